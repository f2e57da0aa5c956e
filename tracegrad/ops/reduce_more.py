"""More of PyTorch's reductions and scans.

Primitives: ``logcumsumexp`` (NumPy's ``logaddexp.accumulate``; its VJP is PyTorch's,
written with logcumsumexp itself so it differentiates again) and the running arg-extrema
behind ``cummax``/``cummin`` (integer results, no gradient). Composites: ``nansum``,
``nanmean``, ``count_nonzero``, ``aminmax``, ``cummax``/``cummin`` (values gathered at the
running arg-extrema, so their gradient scatters there, as PyTorch's), ``median``,
``nanmedian``, ``quantile`` and ``nanquantile`` (from ``sort``, so the gradient reaches the
elements they pick).
"""
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .core import Primitive, bind, op_error
from .declare import method
from .elementwise import exp, isnan, log, where
from .index_ops import gather
from .more_ops import argsort, values_indices
from .reduce_ops import amax, amin, any as any_, sum
from .rules import norm_dim, same_shape
from .shape_ops import flip, reshape, squeeze, unsqueeze

min_max = namedtuple("aminmax", ["min", "max"])


def running(xp, ufunc, x, axis):
    """``ufunc.accumulate(x, axis=axis)``; where the array module has no such scan (CuPy's
    ``maximum``, ``minimum`` and ``logaddexp`` have none), the same scan by doubling: after
    the step with shift s every element holds ``ufunc`` over the 2s elements up to it."""
    try:
        return ufunc.accumulate(x, axis=axis)
    except (AttributeError, NotImplementedError, TypeError):
        pass
    out = xp.moveaxis(x, axis, -1).copy()
    shift, n = 1, out.shape[-1]
    while shift < n:
        out[..., shift:] = ufunc(out[..., shift:], out[..., :-shift])
        shift *= 2
    return xp.moveaxis(out, -1, axis)


def _logcumsumexp_impl(xp, x, dim):
    if x.shape[dim] == 0:
        return x.copy()
    return running(xp, xp.logaddexp, x, dim)


def _reversed_logcumsumexp(v, dim):
    return flip(logcumsumexp(flip(v, (dim,)), dim), (dim,))


def _logcumsumexp_grad(g, x, out, dim):
    """PyTorch's: sum over j >= i of g_j exp(x_i - out_j), in log space, split by the sign
    of g so that no term overflows. The empty side is the dtype's lowest finite number, not
    -inf: -inf - (-inf) would make NaN in the second derivative."""
    lowest = float(np.finfo(g.dtype.np).min)
    log_abs = log(g.abs())
    pos = where(g > 0, log_abs, lowest)
    neg = where(g < 0, log_abs, lowest)
    return (exp(_reversed_logcumsumexp(pos - out, dim) + x)
            - exp(_reversed_logcumsumexp(neg - out, dim) + x))


logcumsumexp_p = Primitive(
    "logcumsumexp", _logcumsumexp_impl, dtype=lambda x, dim: x.dtype, shape=same_shape,
    vjp=(lambda g, x, out, dim: _logcumsumexp_grad(g, x, out, dim),),
    saves=("self", "result"), kind="other")


@method
def logcumsumexp(input, dim):
    """log(cumsum(exp(x))) along ``dim``, without overflow or underflow."""
    if not input.dtype.is_floating_point:
        input = input.to(dtypes.get_default_dtype())
    if input.ndim == 0:
        return input.clone()
    return bind(logcumsumexp_p, input, dim=norm_dim(dim, input.ndim))


def _running_arg_impl(xp, x, dim, largest):
    """The index of the running max (min) along ``dim``: the last position so far that
    reached it, a NaN counting as the extremum from where it appears (PyTorch's rule)."""
    if x.shape[dim] == 0:
        return xp.zeros(x.shape, dtype=np.int64)
    acc = running(xp, xp.maximum if largest else xp.minimum, x, dim)
    shape = [1] * x.ndim
    shape[dim] = x.shape[dim]
    pos = xp.arange(x.shape[dim]).reshape(shape)
    hit = (x == acc) | (xp.isnan(x) if x.dtype.kind == "f" else False)
    return running(xp, xp.maximum, xp.where(hit, pos, 0), dim).astype(np.int64)


running_argmax_p = Primitive(
    "running_argmax", lambda xp, x, dim: _running_arg_impl(xp, x, dim, True),
    dtype=lambda x, dim: dtypes.int64, shape=same_shape, kind="other")
running_argmin_p = Primitive(
    "running_argmin", lambda xp, x, dim: _running_arg_impl(xp, x, dim, False),
    dtype=lambda x, dim: dtypes.int64, shape=same_shape, kind="other")


def _cum_extreme(prim, input, dim):
    if input.ndim == 0:
        return values_indices(input.clone(), reshape(bind(prim, reshape(input, (1,)), dim=0), ()))
    d = norm_dim(dim, input.ndim)
    idx = bind(prim, input, dim=d)
    return values_indices(gather(input, d, idx), idx)


@method
def cummax(input, dim):
    """``(values, indices)`` of the running maximum along ``dim``."""
    return _cum_extreme(running_argmax_p, input, dim)


@method
def cummin(input, dim):
    """``(values, indices)`` of the running minimum along ``dim``."""
    return _cum_extreme(running_argmin_p, input, dim)


@method
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaNs counted as zero (their gradient is zero)."""
    x = input if dtype is None else input.to(dtype)
    if x.dtype.is_floating_point:
        x = where(isnan(x), 0.0, x)
    return sum(x, dim, keepdim)


@method
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the elements that are not NaN (NaN where all of them are)."""
    x = input if dtype is None else input.to(dtype)
    if not x.dtype.is_floating_point:
        raise op_error("nanmean", f"nanmean(): expected input to have floating point or "
                                  f"complex dtype but got {x.dtype.name.capitalize()}")
    kept = ~isnan(x)
    return nansum(x, dim, keepdim) / sum(kept, dim, keepdim).to(x.dtype)


@method
def count_nonzero(input, dim=None):
    """The number of non-zero elements (over ``dim``, an int or a tuple), as int64."""
    return sum(input != 0, dim)


@method
def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)``, over ``dim`` or the whole tensor."""
    if input.numel() == 0 and dim is None:
        raise op_error("aminmax", "aminmax(): cannot compute aminmax over an empty dimension "
                                  "as the operation has no identity.")
    dims = () if dim is None else dim
    return min_max(amin(input, dims, keepdim), amax(input, dims, keepdim))


# median and quantiles: from sort -----------------------------------------------------------

def _flat_or_dim(input, dim):
    """``(x, d)``: the input and the dim to reduce (the flattened input when dim is None)."""
    if dim is None:
        return reshape(input, (-1,)), 0
    return input, norm_dim(dim, max(input.ndim, 1))


def _median(name, input, dim, keepdim, ignore_nan):
    x, d = _flat_or_dim(input, dim)
    if x.ndim == 0:
        x, d, scalar = reshape(x, (1,)), 0, True
    else:
        scalar = False
    n = x.shape[d]
    if n == 0:
        raise op_error(name, f"{name}(): Expected reduction dim {d} to have non-zero size.",
                       IndexError)
    order = argsort(x, d, stable=True)      # NaN last, as PyTorch's sort puts it
    if ignore_nan:
        count = sum(~isnan(x), d, keepdim=True)
        k = where(count > 0, (count - 1) // 2, (n - 1) // 2)     # all NaN: as PyTorch picks
    else:
        has_nan = any_(isnan(x), d, keepdim=True)
        k = where(has_nan, n - sum(isnan(x), d, keepdim=True), (n - 1) // 2)
    idx = gather(order, d, k)
    values = gather(x, d, idx)
    if dim is None:
        return reshape(values, ())
    if scalar or not keepdim:
        values, idx = squeeze(values, d), squeeze(idx, d)
    return values_indices(values, idx)


@method
def median(input, dim=None, keepdim=False):
    """The lower median (the ((n - 1) // 2)-th smallest); NaN if any element is NaN. With
    ``dim``: ``(values, indices)``."""
    return _median("median", input, dim, keepdim, ignore_nan=False)


@method
def nanmedian(input, dim=None, keepdim=False):
    """``median`` of the elements that are not NaN."""
    return _median("nanmedian", input, dim, keepdim, ignore_nan=True)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    if interpolation not in _INTERPOLATIONS:
        raise op_error(name, f"{name}() interpolation must be one of {', '.join(_INTERPOLATIONS)}"
                             f". Got {interpolation}")
    if not input.dtype.is_floating_point:
        raise op_error(name, f"{name}() input tensor must be either float or double dtype")
    from ..creation import tensor
    scalar_q = not isinstance(q, Tensor)
    qs = tensor(q, dtype=input.dtype, device=input.device) if scalar_q else q.to(input.dtype)
    if qs.ndim > 1:
        raise op_error(name, f"{name}() q must be a scalar or 1D tensor")
    if bool(((qs < 0) | (qs > 1)).any()):
        raise op_error(name, f"{name}() q values must be in the range [0, 1]")
    x, d = _flat_or_dim(input, dim)
    if x.ndim == 0:
        x, d = reshape(x, (1,)), 0
    n = x.shape[d]
    if n == 0:
        raise op_error(name, f"{name}() input tensor must be non-empty")
    sorted_x = gather(x, d, argsort(x, d, stable=True))
    valid = sum(~isnan(x), d, keepdim=True) if ignore_nan else None
    last = (valid - 1).to(x.dtype) if ignore_nan else float(n - 1)
    qv = reshape(qs, (-1,) + (1,) * x.ndim)             # q first, as PyTorch puts it
    pos = qv * last
    below = pos.floor()
    above = pos.ceil()
    if interpolation == "lower":
        above = below
    elif interpolation == "higher":
        below = above
    elif interpolation == "nearest":
        below = above = pos.round()
    sx = unsqueeze(sorted_x, 0).expand(qv.shape[0], *sorted_x.shape)

    def pick(p):
        i = p.clamp(min=0).to(dtypes.int64)
        shape = list(sx.shape)
        shape[d + 1] = 1
        return gather(sx, d + 1, i.expand(*shape))
    lo, hi = pick(below), pick(above)
    if interpolation == "midpoint":
        out = lo + (hi - lo) * 0.5
    elif interpolation == "linear":
        out = lo + (hi - lo) * (pos - below)
    else:
        out = lo
    if ignore_nan:
        out = where(valid == 0, float("nan"), out)
    else:
        out = where(any_(isnan(x), d, keepdim=True), float("nan"), out)
    if dim is None:
        out = reshape(out, (qv.shape[0],) + ((1,) * input.ndim if keepdim else ()))
    elif input.ndim == 0:       # a 0-d input keeps no dim, with keepdim too
        out = reshape(out, (qv.shape[0],))
    elif not keepdim:
        out = squeeze(out, d + 1)
    return out[0] if scalar_q or qs.ndim == 0 else out


@method
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or a 1-D tensor, in [0, 1]); NaN where the reduced
    elements hold a NaN."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


@method
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` of the elements that are not NaN."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


__all__ = ["logcumsumexp", "cummax", "cummin", "nansum", "nanmean", "count_nonzero", "aminmax",
           "median", "nanmedian", "quantile", "nanquantile"]
