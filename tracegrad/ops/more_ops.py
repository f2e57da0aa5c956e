"""More of PyTorch's tensor ops: atan2/logaddexp, comparisons, and the exports of scans,
sorting, einsum and the random draws.

Primitives (one block each): ``atan2``; everything else here is a composite of primitives.
Scans and sorting (``cumsum``, ``argsort``, ``sort``, ``topk``, ...) are in ``scan_sort.py``,
triangles, diagonals and ``roll`` in ``diagonals.py`` (both exported from here too).
``einsum`` is in ``einsum.py``, the random draws in ``random_ops.py``; ``tracegrad`` exports
this module's ``__all__``, theirs among it.
"""
import math

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
from .index_ops import index_select
from .rules import broadcast, float_promote, norm_dim
from .scan_sort import (  # noqa: F401 - in __all__, and imported from here
    argsort, argsort_p, cumprod, cumprod_p, cumsum, cumsum_p, kthvalue, msort, sort, topk,
    values_indices,
)
from .shape_ops import expand, reshape, unsqueeze


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
