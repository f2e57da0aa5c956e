"""Scans and sorting: ``cumsum``, ``cumprod``, ``argsort`` (one primitive each) and the
composites that gather at ``argsort``'s indices (``sort``, ``msort``, ``topk``, ``kthvalue``).

Apart from ``more_ops`` (which exports them) so that ``random_ops``, which ``more_ops``
re-exports, can build on ``cumsum`` and ``argsort`` without importing its exporter.
"""
from collections import namedtuple

from .. import dtypes
from .core import Primitive, bind, op_error
from .declare import method
from .elementwise import eq, where
from .index_ops import gather
from .reduce_ops import sum
from .rules import norm_dim
from .shape_ops import flip, narrow, reshape, squeeze

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
