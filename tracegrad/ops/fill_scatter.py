"""``index_fill``/``scatter``/``scatter_reduce``/``index_reduce`` (with their in-place forms)
and ``tril_indices``/``triu_indices``.

Both fills are compositions: a boolean mask of the written places (built from ``index``, so
it compiles without reading data) picks the new values with ``where``, and the ``_`` forms
``copy_`` the result in, which bumps the version counter as every in-place op does.
``scatter_reduce`` is a primitive (NumPy's ``ufunc.at``) and ``index_reduce`` a use of it.
"""
import numpy as np

from .. import dtypes
from .._hooks import state as _hook_state
from ..tensor import Tensor
from .core import Primitive, bind, op_error
from .declare import method
from .elementwise import clone, where
from .index_ops import check_scatter_index, gather, scatter_add
from .inplace_methods import torch_name, write_result
from .rules import norm_dim


@method
def index_fill(input, dim, index, value):
    """``input`` with the slices ``index`` along ``dim`` set to ``value``."""
    from ..creation import arange
    if index.dtype.is_floating_point or index.ndim > 1:
        raise op_error("index_fill", f"index_fill_(): Expected a 0-D or 1-D int64 index, got "
                                     f"{index.ndim}-D {index.dtype.name}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise op_error("index_fill", f"index_fill_ only supports a 0-dimensional value tensor, "
                                     f"but got tensor with {value.ndim} dimension(s).")
    if input.ndim == 0:
        return where(index.reshape(-1) == 0, value, input.reshape(1)).reshape(()).to(input.dtype)
    d = norm_dim(dim, input.ndim)
    n = input.shape[d]
    index = index.reshape(1, -1)
    if _hook_state.tracer is None and type(index) is Tensor and index.numel():  # host read
        bad = index[(index < -n) | (index >= n)]
        if bad.numel():
            raise op_error("index_fill", f"index {int(bad[0].item())} is out of bounds for "
                                         f"dimension {d} with size {n}", IndexError)
    index = where(index < 0, index + n, index)      # negative indices count from the end
    hit = (arange(n, device=input.device).reshape(-1, 1) == index).any(1)
    hit = hit.reshape((1,) * d + (n,) + (1,) * (input.ndim - d - 1))
    out = where(hit, value, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


@method("index_fill_")
def _index_fill_(self, dim, index, value):
    return self.copy_(index_fill(self, dim, index, value))


@method
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """``input`` with ``out[index[i]][j] = src[i][j]`` along ``dim`` (or ``value``);
    ``reduce="add"``/``"multiply"`` combine with what is there instead.

    Where ``index`` names a place twice, PyTorch leaves unspecified which ``src`` value
    wins; this composition would sum them, so it refuses instead (outside compile) unless
    ``reduce`` says how to combine."""
    from ..creation import ones, zeros
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src          # scatter(dim, index, value): the scalar overload
    if (src is None) == (value is None):
        raise op_error("scatter", "scatter() expects exactly one of src (a tensor) or value "
                                  "(a number)", TypeError)
    if reduce not in (None, "add", "multiply"):
        raise op_error("scatter", f"reduce argument must be either add or multiply, got "
                                  f"{reduce!r}")
    if index.dtype.is_floating_point:
        raise op_error("scatter", f"scatter(): Expected dtype int64 for index, got "
                                  f"{index.dtype.name}")
    d = norm_dim(dim, max(input.ndim, 1))
    check_scatter_index("scatter", input, d, index)
    count = scatter_add(zeros(input.shape, device=input.device), d, index,
                        ones(index.shape, device=input.device))
    hit = count > 0
    if src is None:
        if reduce == "add":
            out = input + count * value
        elif reduce == "multiply":
            out = input * value ** count
        else:
            out = where(hit, value, input)
        return out if out.dtype is input.dtype else out.to(input.dtype)
    if src.shape != index.shape:            # only src's leading index.shape part is read
        src = src[tuple(slice(0, n) for n in index.shape)]
    if reduce != "add" and _hook_state.tracer is None and bool((count > 1).any()):
        raise op_error("scatter", "scatter: index names a place more than once, and which src "
                                  "value lands there is unspecified; use scatter_add, or "
                                  "reduce='add', for a defined result")
    placed = scatter_add(zeros(input.shape, dtype=src.dtype, device=input.device), d, index,
                         src)
    if reduce == "add":
        out = input + placed
    elif reduce == "multiply":
        out = where(hit, input * placed, input)
    else:
        out = where(hit, placed, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


@method("scatter_")
def _scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    return self.copy_(scatter(self, dim, index, src, value, reduce=reduce))


def _indices(np_fn, row, col, offset, dtype, device):
    from ..creation import tensor
    if row < 0 or col < 0:
        raise op_error(np_fn.__name__, f"row must be non-negative, got{row}" if row < 0
                       else f"col must be non-negative, got{col}")
    rows, cols = np_fn(row, offset, col)
    return tensor(np.stack([rows, cols]).reshape(2, -1), dtype=dtype or dtypes.int64,
                  device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, col) coordinates, in row-major order, of the lower triangle of a
    ``row x col`` matrix (``offset`` > 0 takes diagonals above the main one in)."""
    return _indices(np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, col) coordinates, in row-major order, of the upper triangle."""
    return _indices(np.triu_indices, row, col, offset, dtype, device)




# scatter_reduce, index_reduce -------------------------------------------------------------
# One primitive: ``src`` reduced into ``self`` at ``index`` along ``dim`` by a ufunc's
# ``at`` (repeats combine, in place, without a Python loop). ``index_reduce`` is the same
# write with its index vector broadcast to the source's shape. The gradient is PyTorch's
# ``scatter_reduce_backward``: prod divides by the value left out (a lone zero's gradient is
# the product of the others, computed again without it), amax/amin split the gradient evenly
# among the values equal to the result, and include_self=False gives self no gradient where
# something was scattered.

_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_UFUNCS = {"sum": "add", "prod": "multiply", "mean": "add", "amax": "maximum",
           "amin": "minimum"}


def _identity(reduce, dtype):
    """The value a place starts from when ``include_self`` is False."""
    if reduce in ("sum", "mean", "prod"):
        return int(reduce == "prod")
    if np.issubdtype(dtype, np.inexact):
        return -np.inf if reduce == "amax" else np.inf
    if dtype == np.bool_:
        return reduce == "amin"
    return np.iinfo(dtype).min if reduce == "amax" else np.iinfo(dtype).max


def _scatter_reduce_impl(xp, x, index, src, dim, reduce, include_self):
    from ..device import recording
    from .index_ops import _gather_key
    if index.size and not recording(xp):     # (a host read: see recording)
        lim = x.shape[dim]
        bad = index[(index < 0) | (index >= lim)]
        if bad.size:
            raise RuntimeError(f"index {int(bad[0])} is out of bounds for dimension {dim} with "
                               f"size {lim}")
    key = _gather_key(xp, index, dim)
    out = x.copy()
    if not include_self:
        out[key] = _identity(reduce, x.dtype)
    _reduce_at(xp, out, key, src, reduce)
    if reduce == "mean":
        count = xp.full(x.shape, 1 if include_self else 0, dtype="int64")
        _reduce_at(xp, count, key, 1, "sum")
        count[count == 0] = 1
        out = out / count if np.issubdtype(x.dtype, np.inexact) else out // count   # floor
        out = out.astype(x.dtype, copy=False)
    return out


def _reduce_at(xp, out, key, src, reduce):
    """``out[key] = reduce(out[key], src)`` in place, repeated places combining."""
    if xp is np:
        getattr(np, _UFUNCS[reduce]).at(out, key, src)
        return
    if reduce in ("amax", "amin"):
        _extreme_at(xp, out, key, src, reduce)
    elif reduce == "prod":      # no multiplying scatter in CuPy: the product on the host
        host = xp.asnumpy(out)
        np.multiply.at(host, tuple(xp.asnumpy(k) for k in key), xp.asnumpy(src))
        out[...] = xp.asarray(host)
    else:
        import cupyx
        cupyx.scatter_add(out, key, src)


def _extreme_at(xp, out, key, src, reduce):
    """``maximum.at``/``minimum.at`` on the GPU without atomics (CuPy's ``scatter_max`` and
    ``scatter_min`` round float64 through float32): the values are sorted by place, each
    place's values in order so that its extreme comes last (NaN last for amax, first for
    amin), and the last of each run of equal places is combined with what is there. The
    places not last in their run write to one spare slot past the end, so that no place is
    written twice and no count is read back on the host (CUDA graph capture stays open)."""
    keys = xp.broadcast_arrays(*key)
    place = xp.zeros(keys[0].shape, dtype=np.int64)
    for k, n in zip(keys, out.shape):
        place = place * n + k
    place = place.ravel()
    if place.size == 0:
        return
    values = xp.broadcast_to(xp.asarray(src, dtype=out.dtype), keys[0].shape).ravel()
    by_value = xp.argsort(values, kind="stable")
    if reduce == "amin":
        by_value = by_value[::-1]
    order = by_value[xp.argsort(place[by_value], kind="stable")]
    place, values = place[order], values[order]
    last = xp.ones(place.shape, dtype=bool)
    last[:-1] = place[1:] != place[:-1]
    flat = out.reshape(-1)
    combine = xp.maximum if reduce == "amax" else xp.minimum
    merged = combine(flat[place], values)
    if reduce == "amin" and np.issubdtype(out.dtype, np.inexact):
        # NaN propagates as in minimum.at: a place any of whose values is NaN gets NaN
        nan_count = xp.zeros(flat.shape, dtype=np.int32)
        _reduce_at(xp, nan_count, place, xp.isnan(values).astype(np.int32), "sum")
        merged = xp.where(nan_count[place] > 0, xp.asarray(np.nan, dtype=out.dtype), merged)
    spare = xp.concatenate([flat, flat[:1]])
    spare[xp.where(last, place, flat.size)] = merged
    out[...] = spare[:-1].reshape(out.shape)


def _scatter_reduce_vjp(g, x, i, s, out, dim, reduce, include_self):
    from ..creation import ones, zeros
    d = dict(dim=dim, reduce=reduce, include_self=include_self)
    if reduce == "sum":
        gx, gs = g, gather(g, dim, i)
    elif reduce == "prod":
        mx = where(x == 0, 1.0, x)
        gx = g * bind(scatter_reduce_p, mx, i, s, **d) / mx
        szero = s == 0
        nzero = gather(scatter_add(zeros(x.shape, dtype=g.dtype, device=g.device), dim, i,
                                   szero.to(g.dtype)), dim, i)
        single = szero & (nzero == 1)
        left_out = bind(scatter_reduce_p, x, i, where(single, 1.0, s), **d)
        gs = where(single, gather(g * left_out, dim, i),
                   gather(g * out, dim, i) / where(szero, 1.0, s))
    elif reduce == "mean":
        start = (ones if include_self else zeros)(x.shape, dtype=g.dtype, device=g.device)
        n = scatter_add(start, dim, i, ones(i.shape, dtype=g.dtype, device=g.device))
        n = where(n == 0, 1.0, n)
        gx, gs = g / n, gather(g, dim, i) / gather(n, dim, i)
    else:
        x_hit, s_hit = (x == out).to(g.dtype), (s == gather(out, dim, i)).to(g.dtype)
        share = g / scatter_add(x_hit, dim, i, s_hit)
        gx, gs = x_hit * share, s_hit * gather(share, dim, i)
    if not include_self:
        gx = scatter(gx, dim, i, value=0)
    return gx, None, gs


scatter_reduce_p = Primitive(
    "scatter_reduce", _scatter_reduce_impl, args=("self", "index", "src"),
    dtype=lambda x, i, s, dim, reduce, include_self: x.dtype,
    shape=lambda x, i, s, dim, reduce, include_self: tuple(x),
    vjp=_scatter_reduce_vjp, saves=("self", "index", "src", "result"),
    node="ScatterReduceBackward0", kind="other")


def _reduce_name(op, reduce, allowed):
    if op == "scatter_reduce":      # which takes PyTorch's old names max/min too
        reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)
    if reduce not in allowed:
        raise op_error(op, f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}" if op == "scatter_reduce" else
                       f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin "
                       f"but got {reduce}.")
    return reduce


@method
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """``input`` with ``src[i][j]`` reduced into ``out[index[i][j]][j]`` along ``dim`` by
    ``reduce`` (sum, prod, mean, amax, amin); ``include_self=False`` leaves the old values
    out of the places written."""
    reduce = _reduce_name("scatter_reduce", reduce, _REDUCES)
    if index.dtype not in (dtypes.int64, dtypes.int32):
        raise op_error("scatter_reduce", "scatter(): Expected dtype int32/int64 for index")
    if src.dtype is not input.dtype:
        raise op_error("scatter_reduce", "scatter(): Expected self.dtype to be equal to "
                                         "src.dtype")
    if input.ndim == 0 or index.ndim == 0 or src.ndim == 0:     # 0-d counts as one element
        if max(input.ndim, index.ndim, src.ndim) <= 1:
            norm_dim(dim, 1)
            out = scatter_reduce(input.reshape(-1), 0, index.reshape(-1), src.reshape(-1),
                                 reduce, include_self=include_self)
            return out.reshape(input.shape)
    d = norm_dim(dim, input.ndim)
    if not index.ndim == src.ndim == input.ndim and index.numel():
        raise op_error("scatter_reduce", "Index tensor must have the same number of dimensions "
                                         "as self tensor")
    if any(k > s or (a != d and k > x) for a, (k, s, x)
           in enumerate(zip(index.shape, src.shape, input.shape))):
        raise op_error("scatter_reduce", f"Expected index {list(index.shape)} to be no larger "
                                         f"than self {list(input.shape)} apart from dimension "
                                         f"{d} and to be no larger size than src "
                                         f"{list(src.shape)}")
    if index.numel() == 0:
        return clone(input)
    if src.shape != index.shape:            # only src's leading index.shape part is read
        src = src[tuple(slice(0, n) for n in index.shape)]
    return bind(scatter_reduce_p, input, index.to(dtypes.int64), src, dim=d, reduce=reduce,
                include_self=bool(include_self))


@method
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """``input`` with ``source``'s slices reduced into the slices ``index`` names along
    ``dim`` by ``reduce`` (prod, mean, amax, amin)."""
    reduce = _reduce_name("index_reduce", reduce, _REDUCES[1:])
    if not isinstance(index, Tensor) or index.dtype not in (dtypes.int64, dtypes.int32):
        got = torch_name(index.dtype) if isinstance(index, Tensor) else type(index).__name__
        raise op_error("index_reduce", f"index_reduce_(): Expected dtype int32/int64 for index "
                                       f"but got: {got}")
    if source.dtype is not input.dtype:
        raise op_error("index_reduce", f"index_reduce_(): self ({torch_name(input.dtype)}) and "
                                       f"source ({torch_name(source.dtype)}) must have the same "
                                       f"scalar type")
    if index.ndim > 1:
        raise op_error("index_reduce", "index_reduce_(): Index is supposed to be a vector",
                       IndexError)
    if input.ndim == 0:
        out = index_reduce(input.reshape(1), dim, index, source.reshape(-1), reduce,
                           include_self=include_self)
        return out.reshape(())
    d = norm_dim(dim, input.ndim)
    index = index.reshape(-1)
    if source.ndim < input.ndim:            # a 0-d source is one slice
        source = source.reshape((1,) * input.ndim)
    if source.shape[d] != index.shape[0]:
        raise op_error("index_reduce", f"index_reduce_(): Number of indices ({index.shape[0]}) "
                                       f"should be equal to source.size(dim): "
                                       f"({source.shape[d]}), for dim: {dim}")
    if _hook_state.tracer is None and index.numel():
        lo, hi = int(index.min().item()), int(index.max().item())
        if lo < 0 or hi >= input.shape[d]:
            raise op_error("index_reduce", "index out of range in self", IndexError)
    wide = index.reshape((1,) * d + (-1,) + (1,) * (input.ndim - d - 1))
    return scatter_reduce(input, d, wide.expand(*source.shape), source, reduce,
                          include_self=include_self)


@method("scatter_reduce_")
def _scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    return write_result(self, "scatter_reduce_", lambda x: scatter_reduce(
        x, dim, index, src, reduce, include_self=include_self))


@method("index_reduce_")
def _index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    return write_result(self, "index_reduce_", lambda x: index_reduce(
        x, dim, index, source, reduce, include_self=include_self))



# put ---------------------------------------------------------------------------------------

@method
def put(input, index, source, accumulate=False):
    """``input`` with ``source``'s elements written at the flat positions ``index`` (negative
    count from the end; ``accumulate``: added, repeats adding up): ``index_put`` on the
    flattened tensor, so its gradient is index_put's (``source``'s is ``take``)."""
    from .index_more import index_put
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int64:
        got = torch_name(index.dtype) if isinstance(index, Tensor) else type(index).__name__
        raise op_error("put", f"put_(): Expected a long tensor for index, but got {got}")
    if source.dtype is not input.dtype:
        raise op_error("put", f"put_(): self and source expected to have the same dtype, but "
                              f"got self.dtype = {torch_name(input.dtype)} and source.dtype = "
                              f"{torch_name(source.dtype)}")
    if index.numel() != source.numel():
        raise op_error("put", f"put_(): Expected source and index to have the same number of "
                              f"elements, but got source.numel() = {source.numel()}, "
                              f"index.numel() = {index.numel()}", IndexError)
    n = input.numel()
    if _hook_state.tracer is None and index.numel():
        for v in (int(index.min().item()), int(index.max().item())):
            if not -n <= v < n:
                raise op_error("put", f"out of range: tried to access index {v} on a tensor "
                                      f"of {n} elements.", IndexError)
    flat = index_put(input.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(input.shape)


@method("put_")
def _put_(self, index, source, accumulate=False):
    return write_result(self, "put_", lambda x: put(x, index, source, accumulate))


__all__ = ["index_fill", "scatter", "tril_indices", "triu_indices", "scatter_reduce",
           "index_reduce", "put"]
