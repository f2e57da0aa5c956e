"""``linalg.inv`` and ``linalg.solve``: the linear systems the other linalg rules build on.

Both are primitives over LAPACK (through NumPy or CuPy), batched, with broadcast batch dims
for ``solve``. Their VJPs are solves again (``inv``: -A^-T g A^-T; ``solve``: the adjoint
system A^T X = g), so gradients are differentiable again; ``_solve_right`` (x @ inv(a)) is
the form the decompositions' rules use. Inputs are checked with PyTorch's wording, and a
singular matrix raises PyTorch's error (``linalg.checks``).
"""
from collections import namedtuple

import numpy as np

from .. import _hooks, dtypes
from ..ops.core import Primitive, bind, op_error
from ..ops.linalg import matmul
from ..ops.rules import broadcast
from ..ops.shape_ops import squeeze, transpose, unsqueeze
from .checks import (
    check, float_rule, lapack, matrix_problem, run, same_dtype_problem, square_rule,
)
from .getrf import lu_info_p


_inv_ex_result = namedtuple("torch_return_types_linalg_inv_ex", ["inverse", "info"])
_solve_ex_result = namedtuple("torch_return_types_linalg_solve_ex", ["result", "info"])


def _mT(x):
    return transpose(x, -1, -2)


def _solve_right(x, a):
    """x @ inv(a), through a solve."""
    return _mT(solve(_mT(a), _mT(x)))


# inv -------------------------------------------------------------------------------------

inv_p = Primitive(
    "linalg_inv", lambda xp, a: lapack("linalg.inv", "The inversion could not be completed "
                                       "because the input matrix is singular.", xp.linalg.inv, a),
    dtype=float_rule("inv"), shape=square_rule("inv"),
    vjp=(lambda g, a, out: -matmul(matmul(_mT(out), g), _mT(out)),), saves=("result",),
    node="LinalgInvExBackward0")


def inv(A):
    check("linalg.inv", A)
    return run(inv_p, A)


# solve -----------------------------------------------------------------------------------

def _incompatible(a, rows, cols, left=True):
    """PyTorch's error for a B of ``rows`` x ``cols`` that does not fit A of shape ``a`` in
    A X = B (``left=False``: X A = B), or None."""
    if (rows if left else cols) == a[-1]:
        return None
    return (f"Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
            f"({a[-2]}x{a[-1]} and {rows}x{cols})")


def _solve_shape(a, b):
    problem = matrix_problem(a) or _incompatible(a, b[-2], b[-1])
    if problem:
        raise RuntimeError(f"linalg.solve: {problem}")
    return broadcast(a[:-2], b[:-2]) + tuple(b[-2:])


def _solve_impl(xp, a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return lapack("linalg.solve", "The solver failed because the input matrix is singular.",
                  xp.linalg.solve, xp.broadcast_to(a, batch + a.shape[-2:]),
                  xp.broadcast_to(b, batch + b.shape[-2:]))


solve_p = Primitive(
    "linalg_solve", _solve_impl, args=("A", "B"), dtype=float_rule("solve"), shape=_solve_shape,
    vjp=(lambda g, a, b, out: -matmul(solve(_mT(a), g), _mT(out)),
         lambda g, a, b, out: solve(_mT(a), g)),
    saves=("A", "result"), node="LinalgSolveExBackward0")


def _check_solve(A, B, left, vector):
    """PyTorch's errors of ``solve`` (``vector``: B is a batch of vectors)."""
    check("linalg.solve", A)
    if vector:
        problem = same_dtype_problem(A.dtype, B.dtype) or _incompatible(A.shape, B.shape[-1], 1)
    else:
        problem = matrix_problem(B.shape, False, "B") or same_dtype_problem(A.dtype, B.dtype) \
            or _incompatible(A.shape, B.shape[-2], B.shape[-1], left)
    if problem:
        raise op_error("linalg.solve", problem)
    try:
        broadcast(B.shape[:-1 if vector else -2], A.shape[:-2])
    except RuntimeError as e:
        raise op_error("linalg.solve", str(e)) from None


def solve(A, B, *, left=True):
    """X with A X = B (``left=False``: X A = B). B is a batch of vectors when it has one
    dim less than A and its shape is A's without the last dim (or B is 1-D)."""
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    _check_solve(A, B, left, vector and left)
    if not left:
        return _mT(solve(_mT(A), _mT(B)))
    if vector:
        return squeeze(run(solve_p, A, unsqueeze(B, -1)), -1)
    return run(solve_p, A, B)


# the *_ex forms: the result and LAPACK getrf's info, an int32 tensor (so compile traces it) --

def _getrf_info(A):
    """0, or the 1-based index of the first zero pivot, per matrix of the batch."""
    if 0 in A.shape:        # no matrix, or 0 x 0 ones: nothing fails (and getrf has no batch)
        from ..creation import zeros
        return zeros(A.shape[:-2], dtype=dtypes.int32, device=A.device)
    return bind(lu_info_p, A)


def _on_invertible(fn, A, info, *rest):
    """``fn(A, *rest)`` with the singular matrices of the batch swapped for the identity,
    their results then NaN (what a caller that checks ``info`` throws away)."""
    from ..creation import eye
    from ..ops.elementwise import where
    ok = (info == 0)[..., None, None]
    out = fn(where(ok, A, eye(A.shape[-1], dtype=A.dtype, device=A.device)), *rest)
    return where(ok if out.ndim >= A.ndim else ok[..., 0], out, float("nan"))   # B a vector


def _all_invertible(info):
    """Whether ``fn(A)`` alone will do: eager, with no singular matrix (compile keeps the
    masked form, whose values on invertible matrices are the same)."""
    return _hooks.tracer is None and not bool(info.any())


def inv_ex(A, *, check_errors=False):
    """``(inverse, info)``: info is LAPACK's (0, or the first zero pivot), the inverse NaN
    where it is not; ``check_errors`` raises instead."""
    check("linalg.inv", A)
    info = _getrf_info(A)
    if check_errors or _all_invertible(info):
        return _inv_ex_result(inv(A), info)
    return _inv_ex_result(_on_invertible(inv, A, info), info)


def solve_ex(A, B, *, left=True, check_errors=False):
    """``(result, info)``, as ``inv_ex``; info has A's batch shape."""
    check("linalg.solve", A)
    info = _getrf_info(A)
    if check_errors or _all_invertible(info):
        return _solve_ex_result(solve(A, B, left=left), info)
    return _solve_ex_result(_on_invertible(lambda a, b: solve(a, b, left=left), A, info, B),
                            info)
