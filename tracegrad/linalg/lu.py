"""The LU factorisation with partial pivoting: ``linalg.lu_factor``/``lu_factor_ex``,
``linalg.lu``, ``linalg.lu_solve``, and the older ``torch.lu``, ``torch.lu_solve``,
``torch.lu_unpack``.

``linalg.lu`` is a primitive whose result is LAPACK's packed factor (L below the diagonal,
its unit diagonal implied, U on and above it), square or rectangular, batched; its pivots
(LAPACK's 1-based row swaps, int32) come from a second primitive without a gradient. The
VJP is PyTorch's ``linalg.lu_backward`` (square, wide and tall cases), written with
triangular solves, so it differentiates again; P, L and U, and the solves, are composites
of the packed factor. The factorisation itself and its info primitive are in ``getrf``.
"""
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..ops.core import Primitive, bind, op_error
from ..ops.linalg import matmul
from ..ops.more_ops import tril, triu
from ..ops.shape_ops import cat, narrow
from .checks import check
from .getrf import _factor, lu_info_p
from .more import solve_triangular
from .solve import _mT

_lu_factor_result = namedtuple("torch_return_types_linalg_lu_factor", ["LU", "pivots"])
_lu_factor_ex_result = namedtuple("torch_return_types_linalg_lu_factor_ex",
                                  ["LU", "pivots", "info"])
_lu_result = namedtuple("torch_return_types_linalg_lu", ["P", "L", "U"])
_lu_unpack_result = namedtuple("torch_return_types_lu_unpack", ["P", "L", "U"])


def _permutation_impl(xp, pivots, m, dtype):
    """P (m x m) with A = P L U, from LAPACK's pivots (the row swaps, applied in order)."""
    host = pivots if xp is np else xp.asnumpy(pivots)
    flat = host.reshape(int(np.prod(host.shape[:-1])), host.shape[-1])
    out = np.zeros((flat.shape[0], m, m), dtype=dtype.np)
    for b, row in enumerate(flat):
        perm = np.arange(m)
        for j, p in enumerate(row):
            perm[[j, p - 1]] = perm[[p - 1, j]]
        out[b, perm, np.arange(m)] = 1      # A[perm] = L U, so A = P L U: P[perm[i], i] = 1
    out = out.reshape(host.shape[:-1] + (m, m))
    return out if xp is np else xp.asarray(out)


lu_permutation_p = Primitive(
    "linalg_lu_permutation", _permutation_impl, args=("pivots",),
    dtype=lambda p, m, dtype: dtype, shape=lambda s, m, dtype: tuple(s[:-1]) + (m, m),
    kind="other")


def _permutation(pivots, m, like):
    return bind(lu_permutation_p, pivots, m=m, dtype=like.dtype)


def _unit_lower(LU, k):
    """L (m x k, unit diagonal) from the packed factor."""
    from ..creation import eye
    m = LU.shape[-2]
    part = narrow(LU, -1, 0, k) if LU.shape[-1] != k else LU
    return tril(part, -1) + eye(m, k, dtype=LU.dtype, device=LU.device)


def _upper(LU, k):
    """U (k x n) from the packed factor."""
    part = narrow(LU, -2, 0, k) if LU.shape[-2] != k else LU
    return triu(part)


def _lu_grad(g, a, lu):
    """PyTorch's linalg_lu_backward, from the packed factor's cotangent g."""
    m, n = a.shape[-2:]
    k = min(m, n)
    pivots = bind(lu_pivots_p, a)
    P = _permutation(pivots, m, a)
    L, U = _unit_lower(lu, k), _upper(lu, k)
    gL, gU = _unit_lower_part(g, k), _upper(g, k)
    if m == n:
        x = tril(matmul(_mT(L), gL), -1) + triu(matmul(gU, _mT(U)))
        x = solve_triangular(_mT(U), x, upper=False, left=False)
        x = solve_triangular(_mT(L), x, upper=True, unitriangular=True)
        return matmul(P, x)
    if m < n:
        U1, U2 = narrow(U, -1, 0, k), narrow(U, -1, k, n - k)
        gU1, gU2 = narrow(gU, -1, 0, k), narrow(gU, -1, k, n - k)
        x = matmul(_mT(L), gL) - matmul(triu(gU), _mT(U))
        x = solve_triangular(_mT(U1), tril(x, -1), upper=False, left=False)
        x = cat([x + triu(gU1), gU2], -1)
        x = solve_triangular(_mT(L), x, upper=True, unitriangular=True)
        return matmul(P, x)
    L1, L2 = narrow(L, -2, 0, k), narrow(L, -2, k, m - k)
    gL1, gL2 = narrow(gL, -2, 0, k), narrow(gL, -2, k, m - k)
    x = matmul(gU, _mT(U)) - matmul(_mT(L), tril(gL, -1))
    x = solve_triangular(_mT(L1), triu(x), upper=True, unitriangular=True)
    x = cat([x + tril(gL1, -1), gL2], -2)
    x = solve_triangular(_mT(U), x, upper=False, left=False)
    return matmul(P, x)


def _unit_lower_part(g, k):
    """The cotangent of L's free entries (below the diagonal) from the packed cotangent."""
    part = narrow(g, -1, 0, k) if g.shape[-1] != k else g
    return tril(part, -1)


lu_p = Primitive(
    "linalg_lu", lambda xp, a: _factor(xp, a)[0],
    dtype=lambda a: a.dtype, shape=lambda s: tuple(s),
    vjp=(lambda g, a, out: _lu_grad(g, a, out),), saves=("self", "result"), kind="other",
    node="LinalgLuFactorExBackward0")
lu_pivots_p = Primitive(
    "linalg_lu_pivots", lambda xp, a: _factor(xp, a)[1],
    dtype=lambda a: dtypes.int32,
    shape=lambda s: tuple(s[:-2]) + (min(s[-2:]),), kind="other")


def _check(op, A):
    check(op, A, square=False)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """``(LU, pivots, info)``: LAPACK's packed factor, its 1-based row swaps, and 0 or the
    first zero pivot (U singular: the factor exists, solves with it do not)."""
    _check("linalg.lu_factor_ex", A)
    if not pivot:
        raise op_error("linalg.lu_factor_ex", "LU without pivoting is not implemented on the "
                                              "CPU (as in PyTorch)")
    info = bind(lu_info_p, A)
    if check_errors and bool((info != 0).any()):
        raise op_error("linalg.lu_factor_ex", f"The factorization could not be completed "
                                              f"because the input is not full rank (info = "
                                              f"{int(info.max())})")
    return _lu_factor_ex_result(bind(lu_p, A), bind(lu_pivots_p, A), info)


def lu_factor(A, *, pivot=True):
    """``(LU, pivots)``: the packed factor and its row swaps."""
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return _lu_factor_result(LU, pivots)


def lu(A, *, pivot=True):
    """``(P, L, U)`` with A = P L U; L (m x k) unit lower, U (k x n) upper, k = min(m, n)."""
    LU, pivots = lu_factor(A, pivot=pivot)
    m, n = A.shape[-2:]
    k = min(m, n)
    return _lu_result(_permutation(pivots, m, A), _unit_lower(LU, k), _upper(LU, k))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B with ``left=False``; A^T instead of A with ``adjoint``), from
    A's packed factor: a permutation and two triangular solves."""
    n = LU.shape[-1]
    if LU.shape[-2] != n:
        raise op_error("linalg.lu_solve", "Expected LU to be square")
    P = _permutation(pivots, n, LU)
    L, U = _unit_lower(LU, n), _upper(LU, n)
    if not left:        # X A = B  <=>  A^T X^T = B^T
        return _mT(lu_solve(LU, pivots, _mT(B), left=True, adjoint=not adjoint))
    if adjoint:         # A^T = U^T L^T P^T:  X = P L^-T U^-T B
        y = solve_triangular(_mT(U), B, upper=False)
        y = solve_triangular(_mT(L), y, upper=True, unitriangular=True)
        return matmul(P, y)
    y = matmul(_mT(P), B)
    y = solve_triangular(L, y, upper=False, unitriangular=True)
    return solve_triangular(U, y, upper=True)


# the older API ---------------------------------------------------------------------------

def legacy_lu(A, pivot=True, get_infos=False):
    """``torch.lu``: ``(LU, pivots)``, and the infos with ``get_infos``."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def legacy_lu_solve(b, LU_data, LU_pivots):
    """``torch.lu_solve``: X with A X = b."""
    return lu_solve(LU_data, LU_pivots, b)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """``(P, L, U)`` from a packed factor and its pivots (empty tensors for the parts not
    asked for)."""
    from ..creation import empty
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    P = _permutation(LU_pivots, m, LU_data) if unpack_pivots else empty(0, dtype=LU_data.dtype)
    if not unpack_data:
        return _lu_unpack_result(P, empty(0, dtype=LU_data.dtype),
                                 empty(0, dtype=LU_data.dtype))
    return _lu_unpack_result(P, _unit_lower(LU_data, k), _upper(LU_data, k))


__all__ = ["lu_factor", "lu_factor_ex", "lu", "lu_solve"]
_LEGACY = {"lu": legacy_lu, "lu_solve": legacy_lu_solve, "lu_unpack": lu_unpack}
