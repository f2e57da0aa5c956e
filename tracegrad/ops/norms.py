"""The vector and matrix norms: ``vector_norm`` and ``matrix_norm`` (``tracegrad.linalg``'s,
which re-exports them from ``linalg.norms``).

Here, among the ops, because ``torch.norm`` (``composite``), ``cdist``/``renorm``
(``statistics``) and ``dist`` (``pointwise_more``) are defined over them. Compositions of
tracegrad ops (``matrix_norm``'s ``'nuc'``, 2 and -2 through ``linalg.svdvals``, see
``use_svdvals``), so none has a derivative of its own; at a zero input the gradient is zero,
as PyTorch's (``_safe_root``). Signatures, the result dtypes (``dtype=`` converts the input
first) and the errors are PyTorch's; an integer input is refused even with a floating
``dtype=``, as there.
"""
import math

from .core import op_error
from .elementwise import abs, isinf, isnan, sqrt, where
from .linalg_checks import check, dtype_problem
from .reduce_ops import amax, amin, sum
from .rules import norm_dim
from .shape_ops import squeeze, unsqueeze

_svdvals = None     # linalg.svdvals, installed by linalg.decomp when it loads (use_svdvals)


def use_svdvals(svdvals):
    """Where ``matrix_norm`` finds the singular values for 'nuc', 2 and -2: ``linalg.decomp``
    installs its ``svdvals`` (a LAPACK primitive) here when it loads, so this module does not
    import the linalg layer above. ``import tracegrad`` loads it, so it is set before any
    call."""
    global _svdvals
    _svdvals = svdvals


def _safe_root(total, p):
    """total ** (1/p) with a zero gradient at total == 0 (PyTorch's norm'(0) = 0)."""
    zero = total == 0
    root = sqrt(where(zero, 1.0, total)) if p == 2 else where(zero, 1.0, total) ** (1.0 / p)
    return where(zero, 0.0, root)


def _check_float(op, x):
    problem = dtype_problem(x.dtype, lapack=False)
    if problem:
        raise op_error(op, problem)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    _check_float("linalg.vector_norm", x)     # before ``dtype``: torch refuses an int input too
    if dtype is not None:
        x = x.to(dtype)
        _check_float("linalg.vector_norm", x)
    if isinstance(dim, (tuple, list)) and not dim:
        dim = None              # dim=(): every element, as torch's vector_norm
    if isinstance(dim, int):
        dim = (dim,)
    if x.ndim == 0:
        x = x.reshape(1)
        dim = None if dim is None else (0,)
        out = vector_norm(x, ord, dim, False)
        return out
    a = abs(x)
    if ord == math.inf:
        return amax(a, dim if dim is not None else (), keepdim)
    if ord == -math.inf:
        return amin(a, dim if dim is not None else (), keepdim)
    if ord == 0:    # the count of nonzeros, differentiable with gradient 0 (as torch's)
        finite = where(isinf(x) | isnan(x), 0.0, x)     # 0 * inf would be NaN
        return sum((x != 0).to(x.dtype), dim, keepdim) + sum(finite * 0, dim, keepdim)
    if ord == 1:
        return sum(a, dim, keepdim)
    if ord == 2:
        return _safe_root(sum(x * x, dim, keepdim), 2)
    if ord < 1:     # |x|^ord has no derivative at 0 (0 * inf): PyTorch's is 0 there
        zero = a == 0
        powers = where(zero, 0.0 ** ord if ord > 0 else math.inf, where(zero, 1.0, a) ** ord)
        return _safe_root(sum(powers, dim, keepdim), ord)
    return _safe_root(sum(a ** ord, dim, keepdim), ord)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    check("linalg.matrix_norm", A, square=False, lapack=False)  # before ``dtype``, as torch
    if dtype is not None:
        A = A.to(dtype)
        _check_float("linalg.matrix_norm", A)
    d0, d1 = (norm_dim(d, A.ndim) for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        rest = [d for d in range(A.ndim) if d not in (d0, d1)]
        moved = A.permute(*rest, d0, d1)
        s = _svdvals(moved)
        if ord == "nuc" or (ord == 2 and s.shape[-1] == 0):     # no singular values: 0
            out = sum(s, -1)
        else:
            out = amax(s, -1) if ord == 2 else amin(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    if ord in (1, -1, math.inf, -math.inf):
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = sum(abs(A), inner, keepdim=True)
        pick = amax if ord in (1, math.inf) else amin
        if sums.shape[outer] == 0 and pick is amax:     # the max of no sums of |a|: 0
            out = sum(sums, outer, keepdim=True)
        else:
            out = pick(sums, outer, keepdim=True)
        return out if keepdim else squeeze(out, tuple(sorted((d0, d1))))
    raise op_error("linalg.matrix_norm", f"Order {ord} not supported.")
