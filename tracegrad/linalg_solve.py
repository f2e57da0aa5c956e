"""``linalg.inv`` and ``linalg.solve``: the linear systems the other linalg rules build on.

Both are primitives over LAPACK (through NumPy or CuPy), batched, with broadcast batch dims
for ``solve``. Their VJPs are solves again (``inv``: -A^-T g A^-T; ``solve``: the adjoint
system A^T X = g), so gradients are differentiable again; ``_solve_right`` (x @ inv(a)) is
the form the decompositions' rules use. Inputs are checked with PyTorch's wording, and a
singular matrix raises PyTorch's error (``linalg_checks``).
"""
import numpy as np

from .linalg_checks import (
    check, float_rule, lapack, matrix_problem, run, same_dtype_problem, square_rule,
)
from .ops.core import Primitive, op_error
from .ops.linalg import matmul
from .ops.rules import broadcast
from .ops.shape_ops import squeeze, transpose, unsqueeze


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
