"""Pooling and resampling primitives: max/avg/adaptive pooling and interpolation.

Every op here reads, along each spatial dim, a few *taps*: for output position ``o`` and
tap ``t`` an input index ``idx[t, o]`` (and for linear ops a weight ``w[t, o]``). A
``(kernel, stride, padding, dilation)`` window, an adaptive bin and a linear
interpolation stencil are all tap maps; which one is named by a hashable descriptor,
one per spatial dim, in the param ``maps``:

    ("window", L, out, k, s, p, d)         max pool window (padding is never selected)
    ("avg", L, out, k, s, p, count_pad)    avg pool window; the divisor per position
    ("adaptive", L, out)                   bins [floor(o*L/out), ceil((o+1)*L/out))
    ("nearest" | "nearest-exact", L, out, scale)
    ("linear", L, out, align_corners, scale)
    ("cubic", L, out, align_corners, scale)    bicubic's four taps, clamped into the input

A tap that falls outside the input points at index ``L``: a slot appended to the input
that holds 0 for linear ops and the dtype's lowest value for max ops, so no tap ever
multiplies an input by 0 (which would turn an ``inf`` into a NaN).

Two kinds of primitive are built from the maps, each declared for every PyTorch
``grad_fn`` name it stands for (the implementations are shared):

- *linear* (avg pools, adaptive avg pools, upsampling): the maps applied dim by dim, a
  loop over the taps vectorised over everything else; the VJP is the transposed map
  (a scatter-add per tap), whose own VJP is the map again, so any order differentiates.
- *max* (max pools, adaptive max pools): ``pool_argmax`` finds PyTorch's flat per-plane
  indices (a loop over the kernel's tap combinations, in PyTorch's scan order; a NaN
  wins, an all-``-inf`` window picks its first valid element); the values are a gather
  of the plane at those indices, whose VJP scatters to them and whose second VJP gathers.

The window argmax, the gather and the scatter run as C kernels where they can (NumPy arrays
of float32 or float64 and a C compiler: ``conv_columns.c_kernels``), with the same results
bit for bit; elsewhere the NumPy code here runs.
"""
import functools
import itertools
import math

import numpy as np

from .. import dtypes
from .conv_columns import c_kernels
from .core import Primitive, bind

# tap maps -----------------------------------------------------------------------------


def pool_out_size(L, k, s, p, d, ceil_mode):
    """PyTorch's pooling output size (a window must start inside the input or left pad)."""
    span = L + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= L + p:
        out -= 1
    return out


@functools.lru_cache(maxsize=512)
def taps(desc, dtype="float64"):
    """``(idx, w, div, first)`` for one dim: int64 ``idx[T, out]`` (``L`` where a tap is
    outside the input), float ``w[T, out]`` or None (all ones), float ``div[out]`` or None
    (no division), int64 ``first[out]``: the first index inside the input."""
    kind, L, out = desc[:3]
    o = np.arange(out, dtype=np.int64)
    w = div = None
    if kind in ("window", "avg"):
        k, s, p = desc[3:6]
        d = desc[6] if kind == "window" else 1
        idx = o * s - p + np.arange(k, dtype=np.int64)[:, None] * d
        if kind == "avg":
            start = o * s - p
            div = np.minimum(start + k, L + p) - start if desc[6] else \
                np.minimum(start + k, L) - np.maximum(start, 0)
            div = div.astype(np.float64)
    elif kind == "adaptive":
        start, end = (o * L) // out, -((-(o + 1) * L) // out)
        idx = start + np.arange((end - start).max(initial=1), dtype=np.int64)[:, None]
        idx = np.where(idx < end, idx, L)
        div = (end - start).astype(np.float64)
    elif kind in ("nearest", "nearest-exact"):
        # float32 arithmetic, as PyTorch computes the source index whatever the dtype
        scale = np.float32(1.0 / desc[3] if desc[3] else L / out)
        shift = np.float32(0.5 if kind == "nearest-exact" else 0.0)
        src = np.floor((o.astype(np.float32) + shift) * scale).astype(np.int64)
        idx = np.minimum(src, L - 1)[None] if out != L else o[None]
    elif kind == "cubic":
        idx, w = _cubic_taps(L, out, desc[3], desc[4], np.dtype(dtype).type)
    else:       # linear, computed in the input's precision as PyTorch's kernel is
        ft = np.dtype(dtype).type
        align, scale = desc[3], desc[4]
        if align:
            scale = ft((L - 1) / (out - 1)) if out > 1 else ft(0)
            src = ft(scale) * o.astype(ft)
        else:
            scale = ft(1.0 / scale) if scale else ft(L) / ft(out)
            src = np.maximum(_half_pixel_source(scale, o, ft), ft(0))
        i0 = np.minimum(src.astype(np.int64), L - 1)
        lam1 = np.clip(src - i0.astype(ft), 0, 1).astype(ft)
        idx = np.stack([i0, i0 + (i0 < L - 1)])
        w = np.stack([ft(1) - lam1, lam1])
    idx = np.where((idx >= 0) & (idx < L), idx, L)
    first = np.where(idx < L, idx, np.iinfo(np.int64).max).min(0)
    for a in (idx, w, div, first):
        if a is not None:
            a.flags.writeable = False
    return idx, w, div, first


def _half_pixel_source(scale, o, ft):
    """``scale * (o + 0.5) - 0.5`` rounded once, as PyTorch's CPU build computes it (one
    fused multiply-add): in float64, exact for a float32 ``scale``, then rounded to ``ft``."""
    return (np.float64(scale) * (o + 0.5) - 0.5).astype(ft)


def _cubic_taps(L, out, align, scale, ft):
    """PyTorch's bicubic (Keys' cubic convolution, A = -0.75): the source position is not
    clamped at 0 (unlike linear's), taps at floor(src) - 1 .. floor(src) + 2 read the
    nearest edge value where they fall outside the input, and the four weights come from
    the fractional part, in the input's precision."""
    o = np.arange(out, dtype=np.int64).astype(ft)
    if align:
        src = (ft((L - 1) / (out - 1)) if out > 1 else ft(0)) * o
    else:
        step = ft(1.0 / scale) if scale else ft(L) / ft(out)
        src = _half_pixel_source(step, o.astype(np.int64), ft)
    i0 = np.floor(src)
    t = (src - i0).astype(ft)
    a = ft(-0.75)

    def near(x):        # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):         # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    w = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)]).astype(ft)
    idx = np.clip(i0.astype(np.int64) + np.arange(-1, 3, dtype=np.int64)[:, None], 0, L - 1)
    return idx, w


def _lookup(xp, maps, dtype):
    return [tuple(None if a is None else xp.asarray(a) for a in taps(m, np.dtype(dtype).name))
            for m in maps]


def _append_slot(xp, x, axis, fill):
    """``x`` with one more entry at the end of ``axis``, holding ``fill``."""
    shape = list(x.shape)
    shape[axis] = 1
    return xp.concatenate([x, xp.full(shape, fill, dtype=x.dtype)], axis=axis)


def _along(v, axis, ndim):
    """A 1-d array shaped to broadcast along ``axis`` of an ``ndim``-d array."""
    return v.reshape((-1,) + (1,) * (ndim - 1 - axis))


def _divisor(xp, tapsets, nd, divisor):
    """The array each output position is divided by (None: no division)."""
    if divisor is not None:
        return divisor
    divs = [t[2] for t in tapsets]
    if all(d is None for d in divs):
        return None
    total = 1
    for i, d in enumerate(divs):
        if d is not None:
            total = total * _along(d, i, nd)
    return total


def _div(xp, y, by):
    if by is None:
        return y
    if y.dtype.kind in "iu":        # integer avg pooling truncates, as PyTorch's does
        return xp.trunc(y / by).astype(y.dtype)
    return (y / by).astype(y.dtype, copy=False)


# linear maps ------------------------------------------------------------------------

def _linear_impl(xp, x, maps, divisor=None):
    nd = len(maps)
    tapsets = _lookup(xp, maps, x.dtype)
    for i in reversed(range(nd)):        # last dim first: PyTorch's bilinear order
        idx, w, _, _ = tapsets[i]
        axis = x.ndim - nd + i
        if (idx == maps[i][1]).any():
            x = _append_slot(xp, x, axis, 0)
        y = None
        for t in range(idx.shape[0]):
            part = xp.take(x, idx[t], axis=axis)
            if w is not None:
                part = part * _along(w[t].astype(x.dtype), axis, x.ndim)
            y = part if y is None else y + part
        x = y
    return _div(xp, x, _divisor(xp, tapsets, nd, divisor))


def _add_at(xp, out, key, vals):
    if xp is np:
        np.add.at(out, key, vals)
    else:
        import cupyx
        cupyx.scatter_add(out, key, vals)


def _linear_t_impl(xp, g, maps, divisor=None):
    """The transposed map: each output's gradient goes back to the taps that made it."""
    nd = len(maps)
    tapsets = _lookup(xp, maps, g.dtype)
    by = _divisor(xp, tapsets, nd, divisor)
    if by is not None:
        g = (g / by).astype(g.dtype, copy=False)
    for i in range(nd):
        idx, w, _, _ = tapsets[i]
        axis = g.ndim - nd + i
        shape = list(g.shape)
        shape[axis] = maps[i][1] + 1
        out = xp.zeros(shape, dtype=g.dtype)
        key = (slice(None),) * axis
        for t in range(idx.shape[0]):
            part = g if w is None else g * _along(w[t].astype(g.dtype), axis, g.ndim)
            _add_at(xp, out, key + (idx[t],), part)
        g = out[key + (slice(0, maps[i][1]),)]
    return g


def _mapped_shape(s, maps, pick):
    nd = len(maps)
    if len(s) < nd:
        raise RuntimeError(f"expected at least {nd} spatial dims, got a {len(s)}-d tensor")
    for m, n in zip(maps, s[len(s) - nd:]):
        if n != m[1 + (not pick)]:
            raise RuntimeError(f"size {n} of a spatial dim does not match the map {m}")
    return tuple(s[:len(s) - nd]) + tuple(m[1 + pick] for m in maps)


def _linear_pair(name, node):
    """The primitive applying tap maps, and its transpose, with PyTorch's node names."""
    fwd = Primitive(
        name, _linear_impl, dtype=lambda x, maps, divisor=None: x.dtype,
        shape=lambda s, maps, divisor=None: _mapped_shape(s, maps, 1),
        vjp=(lambda g, x, out, maps, divisor=None: bind(bwd, g, maps=maps, divisor=divisor),),
        node=node)
    bwd = Primitive(
        name + "_backward", _linear_t_impl, args=("grad",),
        dtype=lambda g, maps, divisor=None: g.dtype,
        shape=lambda s, maps, divisor=None: _mapped_shape(s, maps, 0),
        vjp=(lambda g, gout, out, maps, divisor=None: bind(fwd, g, maps=maps, divisor=divisor),),
        node=node.replace("Backward0", "BackwardBackward0"))
    return fwd


avg_pool2d_p = _linear_pair("avg_pool2d", "AvgPool2DBackward0")
avg_pool3d_p = _linear_pair("avg_pool3d", "AvgPool3DBackward0")
adaptive_avg_pool2d_p = _linear_pair("adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0")
adaptive_avg_pool3d_p = _linear_pair("adaptive_avg_pool3d", "AdaptiveAvgPool3DBackward0")
UPSAMPLE = {
    ("nearest", 1): _linear_pair("upsample_nearest1d", "UpsampleNearest1DBackward0"),
    ("nearest", 2): _linear_pair("upsample_nearest2d", "UpsampleNearest2DBackward0"),
    ("nearest", 3): _linear_pair("upsample_nearest3d", "UpsampleNearest3DBackward0"),
    ("nearest-exact", 1): _linear_pair("upsample_nearest_exact1d",
                                       "UpsampleNearestExact1DBackward0"),
    ("nearest-exact", 2): _linear_pair("upsample_nearest_exact2d",
                                       "UpsampleNearestExact2DBackward0"),
    ("nearest-exact", 3): _linear_pair("upsample_nearest_exact3d",
                                       "UpsampleNearestExact3DBackward0"),
    ("linear", 1): _linear_pair("upsample_linear1d", "UpsampleLinear1DBackward0"),
    ("linear", 2): _linear_pair("upsample_bilinear2d", "UpsampleBilinear2DBackward0"),
    ("linear", 3): _linear_pair("upsample_trilinear3d", "UpsampleTrilinear3DBackward0"),
    ("cubic", 2): _linear_pair("upsample_bicubic2d", "UpsampleBicubic2DBackward0"),
}


# max maps -----------------------------------------------------------------------------

def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _window_argmax(xp, x, maps):
    """``_argmax_impl`` for pooling windows (the maps all ``"window"``). Every tap is then a
    strided slice of the input padded with the lowest value, so the scan reads views (no
    gather); it keeps the running max (``maximum`` lets a NaN win, as the scan's rule) and
    the number of the winning tap, updated without branches. A window's flat index is its
    start's plus the tap's offset, so the indices are made once at the end."""
    nd = len(maps)
    lead = x.ndim - nd
    pads, views, base = [], [], 0
    plane = [math.prod(m[1] for m in maps[i + 1:]) for i in range(nd)]
    for i, (L, out, k, s, p, d) in enumerate(m[1:7] for m in maps):
        hi = max(0, (out - 1) * s - p + (k - 1) * d - (L - 1))
        pads.append((p, hi))
        views.append([slice(t * d, t * d + s * (out - 1) + 1, s) for t in range(k)])
        base = base + _along(xp.arange(out, dtype=np.int64) * s - p, i, nd) * plane[i]
    if any(lo or hi for lo, hi in pads):
        x = xp.pad(x, ((0, 0),) * lead + tuple(pads), constant_values=_lowest(x.dtype))
    out_shape = x.shape[:lead] + tuple(m[2] for m in maps)
    best = xp.full(out_shape, _lowest(x.dtype), dtype=x.dtype)
    tap = xp.full(out_shape, -1, dtype=np.int32)        # -1: nothing above the lowest yet
    take = xp.empty(out_shape, dtype=bool)
    step = xp.empty(out_shape, dtype=np.int32)
    nan = xp.empty(out_shape, dtype=bool) if x.dtype.kind == "f" else None
    every = (slice(None),) * lead
    for number, combo in enumerate(itertools.product(*(range(len(v)) for v in views))):
        cand = x[every + tuple(v[c] for v, c in zip(views, combo))]
        xp.greater(cand, best, out=take)
        if nan is not None:         # PyTorch's rule: a NaN is the max (the last one)
            xp.logical_or(take, xp.isnan(cand, out=nan), out=take)
        xp.maximum(best, cand, out=best)
        xp.subtract(number, tap, out=step)      # tap += take * (number - tap)
        xp.multiply(step, take, out=step)
        xp.add(tap, step, out=tap)
    # the winning tap's offset from its number, one digit a dim (the product's order, the
    # last dim fastest), and an all-lowest window's (tap -1) first position inside the
    # input: arithmetic on the device, no table copied over and no host read (a CUDA graph
    # records it)
    offset, rest, first = 0, tap.astype(np.int64), 0
    for i in range(nd - 1, -1, -1):
        L, out, k, s, p, d = maps[i][1:7]
        offset = offset + (rest % k) * (d * plane[i])
        rest = rest // k
        start = xp.arange(out, dtype=np.int64) * s - p
        t0 = (xp.maximum(-start, 0) + d - 1) // d      # the first tap at or past 0
        at = start + t0 * d
        inside = xp.where((t0 < k) & (at < L), at, np.iinfo(np.int64).max)
        first = first + _along(inside, i, nd) * plane[i]
    idx = base + offset
    xp.copyto(idx, xp.broadcast_to(first, idx.shape), where=tap < 0)
    return idx


def _argmax_impl(xp, x, maps):
    nd = len(maps)
    if all(m[0] == "window" for m in maps):
        fast = c_kernels(xp, x)
        if fast is not None:
            return fast.pool_argmax(x, maps)
        return _window_argmax(xp, x, maps)
    tapsets = _lookup(xp, maps, x.dtype)
    for i in range(nd):
        if (tapsets[i][0] == maps[i][1]).any():
            x = _append_slot(xp, x, x.ndim - nd + i, _lowest(x.dtype))
    plane = [math.prod(m[1] for m in maps[i + 1:]) for i in range(nd)]
    best_idx = sum(_along(t[3], i, nd) * plane[i] for i, t in enumerate(tapsets))
    best = None
    lead = (slice(None),) * (x.ndim - nd)
    for combo in itertools.product(*(range(t[0].shape[0]) for t in tapsets)):
        key = tuple(_along(t[0][c], i, nd) for i, (t, c) in enumerate(zip(tapsets, combo)))
        cand = x[lead + key]
        flat = sum(k * plane[i] for i, k in enumerate(key))
        if best is None:
            best = xp.full(cand.shape, _lowest(x.dtype), dtype=x.dtype)
            best_idx = xp.broadcast_to(best_idx, cand.shape).copy()
        take = cand > best
        if x.dtype.kind == "f":
            take |= xp.isnan(cand)      # PyTorch's rule: a NaN is the max (the last one)
        best = xp.where(take, cand, best)
        best_idx = xp.where(take, flat, best_idx)
    return best_idx.astype(np.int64)


pool_argmax_p = Primitive(
    "pool_argmax", _argmax_impl, dtype=lambda x, maps: dtypes.int64,
    shape=lambda s, maps: _mapped_shape(s, maps, 1))


def _flat(a, nd):
    lead = a.shape[:a.ndim - nd]
    return a.reshape(lead + (math.prod(a.shape[a.ndim - nd:]),))     # (-1: none when empty)


def _same_planes(x, indices, nd):
    """Whether ``x`` and ``indices`` have the same leading dims (the C kernels' case; NumPy
    broadcasts them, or raises the error)."""
    return x.shape[:x.ndim - nd] == indices.shape[:indices.ndim - nd]


def _gather_impl(xp, x, indices, nd):
    fast = c_kernels(xp, x)
    if fast is not None and type(indices) is np.ndarray and _same_planes(x, indices, nd):
        out = fast.gather(x, indices, nd)
        if out is not None:         # else an index out of range: NumPy's error follows
            return out
    return xp.take_along_axis(_flat(x, nd), _flat(indices, nd), axis=-1).reshape(indices.shape)


def _scatter_impl(xp, g, indices, nd, shape):
    fast = c_kernels(xp, g)
    if fast is not None and type(indices) is np.ndarray and g.shape == indices.shape \
            and g.shape[:g.ndim - nd] == tuple(shape[:len(shape) - nd]):
        out = fast.scatter(g, indices, nd, shape)
        if out is not None:         # else an index out of range: NumPy's error follows
            return out
    lead = shape[:len(shape) - nd]
    plane = math.prod(shape[len(shape) - nd:])
    rows = math.prod(lead)
    out = xp.zeros(rows * plane, dtype=g.dtype)
    offsets = xp.arange(rows, dtype=np.int64)[:, None] * plane
    per_row = math.prod(indices.shape[indices.ndim - nd:])
    _add_at(xp, out, (_flat(indices, nd).reshape(rows, per_row) + offsets).ravel(), g.ravel())
    return out.reshape(shape)


def _gather_pair(name, node):
    """Values at flat per-plane indices (the max), and the scatter that is its VJP."""
    fwd = Primitive(
        name, _gather_impl, args=("self", "indices"), saves=("indices",),
        dtype=lambda x, i, nd: x.dtype, shape=lambda s, i, nd: tuple(i),
        vjp=(lambda g, x, indices, out, nd: bind(bwd, g, indices, nd=nd, shape=x.shape), None),
        node=node)
    bwd = Primitive(
        name + "_backward", _scatter_impl, args=("grad", "indices"), saves=("indices",),
        dtype=lambda g, i, nd, shape: g.dtype, shape=lambda s, i, nd, shape: tuple(shape),
        vjp=(lambda g, gout, indices, out, nd, shape: bind(fwd, g, indices, nd=nd), None),
        node=node.replace("Backward0", "BackwardBackward0"))
    return fwd


max_pool2d_p = _gather_pair("max_pool2d", "MaxPool2DWithIndicesBackward0")
max_pool3d_p = _gather_pair("max_pool3d", "MaxPool3DWithIndicesBackward0")
adaptive_max_pool2d_p = _gather_pair("adaptive_max_pool2d", "AdaptiveMaxPool2DBackward0")
adaptive_max_pool3d_p = _gather_pair("adaptive_max_pool3d", "AdaptiveMaxPool3DBackward0")


# what the functional layer calls ---------------------------------------------------------

def max_pool(x, prim, maps, return_indices=False):
    """The max over each window of ``maps`` (the trailing ``len(maps)`` dims of ``x``)."""
    indices = bind(pool_argmax_p, x, maps=maps)
    values = bind(prim, x, indices, nd=len(maps))
    return (values, indices) if return_indices else values


def linear_map(x, prim, maps, divisor=None):
    """``maps`` applied to the trailing ``len(maps)`` dims of ``x`` (see the docstring)."""
    return bind(prim, x, maps=maps, divisor=divisor)
