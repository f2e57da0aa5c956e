"""The ONNX form of the network primitives: convolution, pooling, resampling, padding.

Pooling and resampling primitives describe each spatial dim by a tap map (see
``ops/pool.py``): a ``("window", L, out, k, s, p, d)`` map is an ONNX ``MaxPool`` window,
an ``("avg", ...)`` map an ``AveragePool`` one, adaptive bins that tile the input evenly
are a pool whose kernel is the bin, and interpolation maps are ``Resize`` with the
coordinate convention PyTorch computes with.
"""
import math

import numpy as np

from ..symbolic import SymInt
from ._builder import INT64_MAX
from ._ops import EMIT, emits, need, slice_, unsupported


@emits("convolution", "convolution_transpose")
def _conv(b, n):
    p = n.params
    x, w = b.operands(n)
    attrs = dict(strides=list(p["stride"]), dilations=list(p["dilation"]), group=p["groups"],
                 pads=[lo for lo, _ in p["padding"]] + [hi for _, hi in p["padding"]],
                 kernel_shape=[int(k) for k in n.inputs[1].shape[2:]])
    if n.op == "convolution":
        return b.op("Conv", [x, w], hint=n.out.name, **attrs)
    return b.op("ConvTranspose", [x, w], output_padding=list(p["output_padding"]),
                hint=n.out.name, **attrs)


# max pooling -------------------------------------------------------------------------------

def _window(n, maps):
    """MaxPool/AveragePool attributes for ``maps``, or None where ONNX has no such window."""
    kernel, strides, lo, hi, dil, ceil = [], [], [], [], [], set()
    for m in maps:
        kind, L, out = m[:3]
        if kind == "window":
            k, s, p, d = m[3:7]
        elif kind == "avg":
            k, s, p, d = m[3], m[4], m[5], 1
        elif kind == "adaptive" and type(L) is not SymInt and L % out == 0:
            k = s = L // out        # even bins: a window of one bin
            p, d = 0, 1
        else:
            return None
        span = L + 2 * p - d * (k - 1) - 1
        if out == span // s + 1:
            ceil.add(0)
        elif out == -(-span // s) + 1:
            ceil.add(1)
        else:
            return None
        kernel.append(int(k))
        strides.append(int(s))
        lo.append(int(p))
        hi.append(int(p))
        dil.append(int(d))
    if len(ceil) > 1:
        return None
    attrs = dict(kernel_shape=kernel, strides=strides, pads=lo + hi, ceil_mode=ceil.pop())
    if any(d != 1 for d in dil):
        attrs["dilations"] = dil
    return attrs


@emits("pool_argmax")
def _pool_argmax(b, n):
    """PyTorch's per-plane indices of each window's max: ONNX's MaxPool gives flat indices
    over the whole tensor, the remainder by the plane size is the index in the plane."""
    maps = n.params["maps"]
    attrs = _window(n, maps)
    if attrs is None:
        raise unsupported(n, f"a max pool over windows {maps} that ONNX's MaxPool cannot form")
    x = n.inputs[0]
    if x.ndim != len(maps) + 2:
        raise unsupported(n, "a max pool of an unbatched input (ONNX pools N, C, ... inputs)")
    values, flat = b.op("MaxPool", [b.read(x)], outputs=2, hint="maxpool", **attrs)
    b.max_of[n.out] = (x, values)
    plane = math.prod(int(d) for d in x.shape[2:]) if not any(
        type(d) is SymInt for d in x.shape[2:]) else None
    if plane is None:
        shape = b.op("Shape", [b.read(x)])
        size = b.op("ReduceProd", [slice_(b, shape, [0], [2], [INT64_MAX])], keepdims=1) \
            if b.opset < 18 else b.op("ReduceProd", [slice_(b, shape, [0], [2], [INT64_MAX]),
                                                     b.ints([0])], keepdims=1)
        return b.op("Mod", [flat, size], hint=n.out.name)
    return b.op("Mod", [flat, b.const(np.array(plane, np.int64))], hint=n.out.name)


@emits("max_pool2d", "max_pool3d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def _max_pool(b, n):
    x, indices = n.inputs
    found = b.max_of.get(indices)
    if found is not None and found[0] is x:         # the max its own argmax found
        return found[1]
    # values at per-plane indices: a gather along the flattened planes
    nd = n.params["nd"]
    lead = [0] * (x.ndim - nd)      # Reshape's 0 keeps a dim
    xs = b.op("Reshape", [b.read(x), b.ints(lead + [-1])])
    ids = b.op("Reshape", [b.read(indices), b.ints(lead + [-1])])
    got = b.op("GatherElements", [xs, ids], axis=-1)
    return b.op("Reshape", [got, b.shape(n.out.shape)], hint=n.out.name)


# linear maps: average pooling and interpolation ---------------------------------------------

_LINEAR = ("avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
           "upsample_nearest_exact1d", "upsample_nearest_exact2d", "upsample_nearest_exact3d",
           "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d")


@emits(*_LINEAR)
def _linear_map(b, n):
    maps, divisor = n.params["maps"], n.params.get("divisor")
    kinds = {m[0] for m in maps}
    x = b.read(n.inputs[0])
    if kinds <= {"avg", "adaptive"}:
        return _avg_pool(b, n, x, maps, divisor)
    if len(kinds) == 1 and kinds <= {"nearest", "nearest-exact", "linear"}:
        return _resize(b, n, x, maps, kinds.pop())
    raise unsupported(n, f"the resampling maps {maps}")


def _avg_pool(b, n, x, maps, divisor):
    if all(m[0] == "adaptive" and m[2] == 1 for m in maps):     # a mean over each plane
        axes = list(range(n.inputs[0].ndim - len(maps), n.inputs[0].ndim))
        from ._ops import reduce
        return reduce(b, "ReduceMean", x, axes, True, n.out.name)
    attrs = _window(n, maps)
    if attrs is None:
        raise unsupported(n, f"an average pool over windows {maps} that ONNX's AveragePool "
                             "cannot form (adaptive bins that do not tile the input evenly)")
    if n.inputs[0].ndim != len(maps) + 2:
        raise unsupported(n, "an average pool of an unbatched input")
    count_pad = all(m[6] for m in maps if m[0] == "avg") if divisor is None else True
    out = b.op("AveragePool", [x], count_include_pad=int(count_pad), hint=n.out.name, **attrs)
    if divisor is not None:     # divisor_override: the window's sum over the given divisor
        scale = math.prod(attrs["kernel_shape"]) / float(np.asarray(divisor).reshape(-1)[0])
        out = b.op("Mul", [out, b.scalar(scale, n.out.dtype)], hint=n.out.name)
    return out


def _resize(b, n, x, maps, kind):
    nd, ndim = len(maps), n.inputs[0].ndim
    attrs = {"mode": "linear" if kind == "linear" else "nearest"}
    if kind == "nearest":          # src = floor(o / scale)
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    elif kind == "nearest-exact":  # src = floor((o + 1/2) / scale) is round((o + 1/2)/scale - 1/2)
        attrs.update(coordinate_transformation_mode="half_pixel",
                     nearest_mode="round_prefer_ceil")
    else:
        align = {m[3] for m in maps}
        if len(align) > 1:
            raise unsupported(n, "a mix of align_corners settings")
        attrs["coordinate_transformation_mode"] = "align_corners" if align.pop() else "half_pixel"
    scales = [m[4] if kind == "linear" else m[3] for m in maps]
    if all(scales) and attrs["coordinate_transformation_mode"] != "align_corners":
        # the user's scale factors: PyTorch maps positions with them, not with out / L
        scale = np.array([1.0] * (ndim - nd) + [float(s) for s in scales], np.float32)
        return b.op("Resize", [x, "", b.const(scale, "scales")], hint=n.out.name, **attrs)
    return b.op("Resize", [x, "", "", b.shape(n.out.shape)], hint=n.out.name, **attrs)


# padding ------------------------------------------------------------------------------------

def _pads(b, ndim, pad):
    """ONNX's pads (all begins, then all ends) for ``(low, high)`` pairs of the last dims."""
    lead = ndim - len(pad)
    return [0] * lead + [lo for lo, _ in pad] + [0] * lead + [hi for _, hi in pad]


@emits("constant_pad_nd")
def _constant_pad(b, n):
    x, pad = n.inputs[0], n.params["pad"]
    name = b.read(x)
    lead = x.ndim - len(pad)
    crop = [(lead + i, max(-lo, 0), max(-hi, 0)) for i, (lo, hi) in enumerate(pad)
            if lo < 0 or hi < 0]
    if crop:        # negative widths crop: a slice first, then the positive widths
        name = slice_(b, name, [a for a, _, _ in crop], [lo for _, lo, _ in crop],
                      [-hi if hi else INT64_MAX for _, _, hi in crop])
    pads = _pads(b, x.ndim, [(max(lo, 0), max(hi, 0)) for lo, hi in pad])
    if not any(pads):
        return name
    value = b.scalar(n.params["value"], n.out.dtype)
    return b.op("Pad", [name, b.ints(pads), value], mode="constant", hint=n.out.name)


def _mode_pad(mode, opset):
    def emit(b, n):
        need(b, n, opset)
        pads = _pads(b, n.inputs[0].ndim, n.params["pad"])
        return b.op("Pad", [b.read(n.inputs[0]), b.ints(pads)], mode=mode, hint=n.out.name)
    return emit


for _nd in (1, 2, 3):
    EMIT[f"reflection_pad{_nd}d"] = _mode_pad("reflect", 13)
    EMIT[f"replication_pad{_nd}d"] = _mode_pad("edge", 13)
EMIT["circular_pad"] = _mode_pad("wrap", 19)

__all__ = []
