"""More of PyTorch's tensor ops: scans, sorting, atan2/logaddexp, comparisons.

Primitives (one block each): ``cumsum``, ``cumprod``, ``argsort``, ``atan2``; triangles,
diagonals and ``roll`` are in ``diagonals.py`` (exported from here too). Everything else is
a composite of primitives: ``sort``/``topk``/``kthvalue`` gather the values at ``argsort``'s
indices (so their gradients scatter back to those indices). ``einsum`` is in ``einsum.py``,
the random draws in ``random_ops.py``; ``tracegrad`` exports all three modules' ``__all__``.
"""
import math
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .core import Primitive, bind, op_error
from .data_dependent import graph_break
from .declare import method
from .diagonals import (  # noqa: F401 - in __all__, and imported from here
    diag, diag_embed, diagonal, diagonal_p, diagonal_scatter_p, roll, trace, tril, triu,
)
from .elementwise import _as_float, abs, eq, exp, isinf, isnan, log1p, maximum, where
from .index_ops import gather, index_select
from .reduce_ops import sum
from .rules import broadcast, float_promote, norm_dim
from .shape_ops import expand, flip, narrow, reshape, squeeze, unsqueeze

values_indices = namedtuple("values_indices", ["values", "indices"])


def _scan_dtype(x, dim):
    return x.dtype if x.dtype.is_floating_point else dtypes.int64


def _rev_cumsum(g, dim):
    """sum over j >= i of g_j along ``dim`` (the adjoint of cumsum)."""
    return flip(cumsum(flip(g, dim), dim), dim)


# cumsum ------------------------------------------------------------------------------------

cumsum_p = Primitive(
    "cumsum", lambda xp, x, dim: xp.cumsum(x, axis=dim), dtype=_scan_dtype,
    shape=lambda s, dim: tuple(s),
    vjp=(lambda g, x, out, dim: _rev_cumsum(g, dim),),
    np="np.cumsum({self}, axis={dim})")


# cumprod -----------------------------------------------------------------------------------

def _cumprod_grad(g, x, out, dim):
    """d/dx_j of sum_i g_i prod_{k<=i} x_k, exact where x holds zeros (as PyTorch's is).

    Before the first zero z the usual form (reverse cumsum of g*out) / x holds; at z it is
    the reverse cumsum of g times the cumprod with x_z replaced by 1; at the second zero z2
    the same with x_z and x_z2 replaced, times x_z (0, but its derivative is not); later
    it is 0. All are tensor expressions, exact to first order, so the rule is
    differentiable again."""
    zero = eq(x, 0)
    count = cumsum(zero, dim)
    first = zero & eq(count, 1)
    second = zero & eq(count, 2)
    safe = where(zero, 1.0, x)
    at_first = _rev_cumsum(g * cumprod(where(first, 1.0, x), dim), dim)
    x_first = sum(where(first, x, 0.0), dim, keepdim=True)
    at_second = _rev_cumsum(g * cumprod(where(first | second, 1.0, x), dim), dim) * x_first
    before = _rev_cumsum(g * out, dim) / safe
    return where(first, at_first, where(second, at_second, where(zero, 0.0, before)))


cumprod_p = Primitive(
    "cumprod", lambda xp, x, dim: xp.cumprod(x, axis=dim), dtype=_scan_dtype,
    shape=lambda s, dim: tuple(s),
    vjp=(lambda g, x, out, dim: _cumprod_grad(g, x, out, dim),), saves=("self", "result"),
    np="np.cumprod({self}, axis={dim})")


def _scan(prim, input, dim, dtype):
    if dtype is not None:
        input = input.to(dtype)
    if input.ndim == 0:
        return bind(prim, reshape(input, (1,)), dim=0).reshape(())
    return bind(prim, input, dim=norm_dim(dim, input.ndim))


@method
def cumsum(input, dim, *, dtype=None):
    return _scan(cumsum_p, input, dim, dtype)


@method
def cumprod(input, dim, *, dtype=None):
    return _scan(cumprod_p, input, dim, dtype)


# sorting -----------------------------------------------------------------------------------

def _argsort_impl(xp, x, dim, descending, stable):
    kind = "stable" if stable else None
    if not descending:
        return xp.argsort(x, axis=dim, kind=kind)
    # stable descending: sort the reversed array ascending, then reverse the result, so equal
    # values keep their original order (a NaN sorts as the largest value, as in PyTorch)
    n = x.shape[dim]
    idx = xp.argsort(xp.flip(x, dim), axis=dim, kind="stable")
    return xp.flip(n - 1 - idx, dim)


argsort_p = Primitive(
    "argsort", _argsort_impl, dtype=lambda x, **_: dtypes.int64,
    shape=lambda s, **_: tuple(s), kind="other")


def _sort_dim(input, dim):
    return norm_dim(dim, input.ndim) if input.ndim else 0


@method
def argsort(input, dim=-1, descending=False, *, stable=False):
    if input.ndim == 0:
        return bind(argsort_p, input.reshape(1), dim=0, descending=descending,
                    stable=stable).reshape(())
    return bind(argsort_p, input, dim=_sort_dim(input, dim), descending=bool(descending),
                stable=bool(stable))


@method
def sort(input, dim=-1, descending=False, *, stable=False):
    """``(values, indices)``; the gradient of ``values`` scatters to ``indices``."""
    idx = argsort(input, dim, descending, stable=stable)
    if input.ndim == 0:
        return values_indices(input.clone(), idx)
    return values_indices(gather(input, dim, idx), idx)


@method
def msort(input):
    return sort(input, 0).values


@method
def topk(input, k, dim=-1, largest=True, sorted=True):
    d = _sort_dim(input, dim)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise op_error("topk", "selected index k out of range", IndexError)
    if input.ndim == 0:
        return values_indices(input.clone(), argsort(input))
    idx = narrow(argsort(input, d, descending=largest, stable=True), d, 0, k)
    return values_indices(gather(input, d, idx), idx)


@method
def kthvalue(input, k, dim=-1, keepdim=False):
    d = _sort_dim(input, dim)
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise op_error("kthvalue", f"kthvalue(): selected number k out of range for dimension "
                                   f"{d}", IndexError)
    if input.ndim == 0:
        return values_indices(input.clone(), argsort(input))
    idx = narrow(argsort(input, d, stable=True), d, k - 1, 1)
    values = gather(input, d, idx)
    if not keepdim:
        values, idx = squeeze(values, d), squeeze(idx, d)
    return values_indices(values, idx)


# atan2, logaddexp, nan_to_num ----------------------------------------------------------------

atan2_p = Primitive(
    "atan2", lambda xp, a, b: xp.arctan2(_as_float(a), _as_float(b)), args=("self", "other"),
    dtype=float_promote, shape=broadcast,
    vjp=(lambda g, a, b, out: g * b * _atan2_recip(a, b),
         lambda g, a, b, out: -g * a * _atan2_recip(a, b)),
    saves=("self", "other"), np="np.arctan2({self}, {other})",
    np_out="np.arctan2({self}, {other}, out={out})", c="atan2({self}, {other})",
    kind="elementwise")


def _atan2_recip(a, b):
    """1 / (a^2 + b^2), and 0 at (0, 0) as PyTorch's atan2_backward masks it (atan2 has no
    derivative there); the inner where keeps the masked 1/0 out of the second derivative."""
    denom = a * a + b * b
    zero = eq(denom, 0)
    return where(zero, 0.0, 1 / where(zero, 1.0, denom))


@method
def atan2(input, other):
    """The angle of (other, input), elementwise; ints and bools give the default float."""
    return bind(atan2_p, input, other)


@method
def arctan2(input, other):
    return bind(atan2_p, input, other)


@method
def logaddexp(input, other):
    """log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); at a tie each side gets 1/2, and
    equal infinities give themselves (their difference would be NaN)."""
    return maximum(input, other) + log1p(exp(-abs(_tie_free_diff(input, other))))


@method
def logaddexp2(input, other):
    ln2 = math.log(2.0)
    diff = _tie_free_diff(input, other)
    return maximum(input, other) + log1p(exp(-abs(diff) * ln2)) / ln2


def _tie_free_diff(a, b):
    """a - b, with 0 where a == b (so equal infinities give 0, not NaN)."""
    same = eq(a, b)
    return where(same, 0.0, a) - where(same, 0.0, b)


@method
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN to ``nan``, +-inf to ``posinf``/``neginf`` (the dtype's extremes by default); the
    gradient passes where the input is finite, as PyTorch's does."""
    if not input.dtype.is_floating_point:
        return input.clone()
    info = np.finfo(input.dtype.np)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    inf = isinf(input)
    out = where(isnan(input), nan, where(inf & (input > 0), posinf,
                                         where(inf, neginf, input)))
    return out if out.dtype is input.dtype else out.to(input.dtype)


# repeat_interleave, meshgrid -------------------------------------------------------------------

@method
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    from ..creation import arange, tensor
    if repeats is None:       # repeat_interleave(repeats): the indices 0, 0, 1, 2, 2, ...
        reps = input
        return repeat_interleave(arange(reps.shape[0], device=reps.device), reps, 0)
    if dim is None:
        input, dim = reshape(input, (-1,)), 0
    d = norm_dim(dim, input.ndim)
    if isinstance(repeats, Tensor):     # the output's size depends on the counts' values
        graph_break("repeat_interleave")
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        counts = repeats.tolist()
        if len(counts) != input.shape[d]:
            raise op_error("repeat_interleave", "repeats must have the same size as input along "
                                                "dim")
        idx = np.repeat(np.arange(input.shape[d]), counts)
        return index_select(input, d, tensor(idx, dtype=dtypes.int64, device=input.device))
    r = int(repeats.item() if isinstance(repeats, Tensor) else repeats)
    if r < 0:
        raise op_error("repeat_interleave", "repeats can not be negative")
    shape = list(input.shape)
    x = unsqueeze(input, d + 1)
    x = expand(x, *(shape[:d + 1] + [r] + shape[d + 1:]))
    return reshape(x, tuple(shape[:d] + [shape[d] * r] + shape[d + 1:]))


def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise op_error("meshgrid", f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                                   f'received: {indexing}')
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    outs = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        outs.append(expand(reshape(t, tuple(view)), *shape))
    if swap:
        outs[0], outs[1] = outs[1], outs[0]
    return tuple(outs)


# comparisons ---------------------------------------------------------------------------------

@method
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise; equal values (infinities too)
    are close; NaN is close to NaN only with ``equal_nan``."""
    if isinstance(other, Tensor) and input.dtype is not other.dtype:
        raise op_error("isclose", f"{input.dtype.name.capitalize()} did not match "
                                  f"{other.dtype.name.capitalize()}")
    if rtol < 0:
        raise op_error("isclose", f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise op_error("isclose", f"atol must be greater than or equal to zero, but got {atol}")
    a, b = input.detach(), other.detach() if isinstance(other, Tensor) else other
    same = eq(a, b)
    if input.dtype is dtypes.bool or not input.dtype.is_floating_point and rtol == 0 \
            and atol == 0:
        return same
    af = a if a.dtype.is_floating_point else a.to(dtypes.get_default_dtype())
    bf = b.to(af.dtype) if isinstance(b, Tensor) else b
    # equal operands (infinities among them) are replaced by 0 before subtracting, so that no
    # inf - inf or 0 * inf is computed
    a_s, b_s = where(same, 0.0, af), where(same, 0.0, bf)
    diff = abs(a_s - b_s)
    scale = abs(where(isinf(b_s), 0.0, b_s))
    close = same | ((diff <= atol + rtol * scale) & ~isinf(diff))
    if equal_nan:
        close = close | (isnan(af) & isnan(bf))
    return close


@method
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    from .reduce_ops import all as all_
    return bool(all_(isclose(input, other, rtol, atol, equal_nan)).item())


__all__ = ["cumsum", "cumprod", "argsort", "sort", "msort", "topk", "kthvalue", "tril", "triu",
           "roll", "diagonal", "diag_embed", "diag", "trace", "atan2", "arctan2", "logaddexp",
           "logaddexp2", "nan_to_num", "repeat_interleave", "meshgrid", "isclose", "allclose"]

from .einsum import einsum  # noqa: E402,F401 - exported with the rest (tracegrad.einsum)
from .random_ops import bernoulli, multinomial, normal  # noqa: E402,F401

__all__ += ["einsum", "bernoulli", "normal", "multinomial"]
