"""Op-table entries for ``tracegrad/linalg/more.py``: matrix_exp, pinv, solve_triangular,
multi_dot, vecdot, vander, cond, tensorinv, tensorsolve, cross, and the older top-level
cholesky_solve, cholesky_inverse, pinverse, triangular_solve."""
import numpy as np

from op_table import op

try:
    import scipy.linalg as sl
except ImportError:         # the matrix exponential's reference needs SciPy
    sl = None


def _L(lib):
    return lib.linalg


def _tri(lib, x):
    """A well-conditioned lower-triangular factor from x."""
    return lib.tril(x) + 3 * lib.eye(x.shape[-1], dtype=x.dtype)


def _np_tri(x):
    return np.tril(x) + 3 * np.eye(x.shape[-1])


if sl is not None:
    op("linalg.matrix_exp", lambda lib, a: _L(lib).matrix_exp(a), sl.expm, [(3, 3)],
       ["linalg_matrix_exp"])
    op("matrix_exp[batch].method", lambda lib, a: a.matrix_exp(),
       lambda a: np.stack([sl.expm(m) for m in a]), [(2, 3, 3)], ["linalg_matrix_exp"])
op("linalg.pinv[wide]", lambda lib, a: _L(lib).pinv(a), np.linalg.pinv, [(3, 5)], ["linalg_pinv"])
op("linalg.pinv[tall]", lambda lib, a: _L(lib).pinv(a), np.linalg.pinv, [(5, 3)], ["linalg_pinv"])
op("pinverse", lambda lib, a: lib.pinverse(a), np.linalg.pinv, [(2, 4, 3)], ["linalg_pinv"])
op("linalg.solve_triangular[upper]",
   lambda lib, a, b: _L(lib).solve_triangular(_tri(lib, a).mT, b, upper=True),
   lambda a, b: np.linalg.solve(_np_tri(a).T, b), [(3, 3), (3, 2)], ["linalg_solve"])
op("linalg.solve_triangular[right, unit]",
   lambda lib, a, b: _L(lib).solve_triangular(a, b, upper=False, left=False,
                                              unitriangular=True),
   lambda a, b: b @ np.linalg.inv(np.tril(a, -1) + np.eye(3)), [(3, 3), (2, 3)],
   ["linalg_solve"])
op("triangular_solve[transpose].solution",
   lambda lib, b, a: lib.triangular_solve(b, _tri(lib, a), upper=False, transpose=True)[0],
   lambda b, a: np.linalg.solve(_np_tri(a).T, b), [(3, 2), (3, 3)], ["linalg_solve"])
op("linalg.multi_dot", lambda lib, a, b, c: _L(lib).multi_dot([a, b, c]),
   lambda a, b, c: a @ b @ c, [(3,), (3, 4), (4, 2)], ["matmul"])
op("linalg.vecdot", lambda lib, a, b: _L(lib).vecdot(a, b, dim=0),
   lambda a, b: (a * b).sum(0), [(3, 4), (3, 1)], ["mul", "sum"])
op("linalg.vander", lambda lib, x: _L(lib).vander(x, N=4),
   lambda x: np.vander(x, 4, increasing=True), [(3,)], ["pow_scalar"])
op("linalg.cond", lambda lib, a: _L(lib).cond(a + 3 * lib.eye(3, dtype=a.dtype)),
   lambda a: np.linalg.cond(a + 3 * np.eye(3)), [(3, 3)], ["linalg_svd_s"])
op("linalg.cond[fro]", lambda lib, a: _L(lib).cond(a + 3 * lib.eye(3, dtype=a.dtype), "fro"),
   lambda a: np.linalg.cond(a + 3 * np.eye(3), "fro"), [(3, 3)], ["linalg_inv"],
   xfail={k: "PyTorch 2.13's own backward of linalg.cond(A, 'fro') fails (it writes in place "
             "into an output of linalg_inv_ex that its backward saved)"
          for k in ("torch", "torch2")})
op("linalg.tensorinv", lambda lib, a: _L(lib).tensorinv((a + 3 * lib.eye(6, dtype=a.dtype))
                                                       .reshape(2, 3, 6), 2),
   lambda a: np.linalg.tensorinv((a + 3 * np.eye(6)).reshape(2, 3, 6), 2), [(6, 6)],
   ["linalg_inv"])
op("linalg.tensorsolve", lambda lib, a, b: _L(lib).tensorsolve(
    (a + 3 * lib.eye(6, dtype=a.dtype)).reshape(6, 2, 3), b),
   lambda a, b: np.linalg.tensorsolve((a + 3 * np.eye(6)).reshape(6, 2, 3), b),
   [(6, 6), (6,)], ["linalg_solve"])
op("linalg.cross[dim 0]", lambda lib, a, b: _L(lib).cross(a.mT, b.mT, dim=0),
   lambda a, b: np.cross(a, b).T, [(4, 3), (1, 3)], ["mul"])
op("cholesky_solve", lambda lib, b, l: lib.cholesky_solve(b, _tri(lib, l)),
   lambda b, l: np.linalg.solve(_np_tri(l) @ _np_tri(l).T, b), [(3, 2), (3, 3)],
   ["linalg_solve"])
op("cholesky_inverse[upper]", lambda lib, l: lib.cholesky_inverse(_tri(lib, l).mT, upper=True),
   lambda l: np.linalg.inv(_np_tri(l) @ _np_tri(l).T), [(3, 3)], ["linalg_inv"])


def _np_lu(a):
    """P, L, U of one matrix by SciPy (A = P L U, LAPACK's convention), an independent
    reference for tracegrad's own factorisation."""
    return sl.lu(a)


def _np_packed(P, L, U):
    """LAPACK's packed factor: L below the diagonal, U on and above it."""
    m, k = L.shape
    n = U.shape[1]
    return np.pad(np.tril(L, -1), ((0, 0), (0, n - k))) + np.pad(U, ((0, m - k), (0, 0)))


if sl is not None:       # the LU references are SciPy's
    for _shape in ((3, 3), (3, 5), (5, 3)):
        op(f"linalg.lu_factor[{_shape[0]}x{_shape[1]}].LU",
           lambda lib, a: _L(lib).lu_factor(a)[0],
           lambda a: _np_packed(*_np_lu(a)), [_shape], ["linalg_lu"])
        op(f"linalg.lu[{_shape[0]}x{_shape[1]}]", lambda lib, a: tuple(_L(lib).lu(a)),
           _np_lu, [_shape], ["linalg_lu"])
op("linalg.lu_solve", lambda lib, a, b: _L(lib).lu_solve(*_L(lib).lu_factor(a), b),
   lambda a, b: np.linalg.solve(a, b), [(3, 3), (3, 2)], ["linalg_lu"])
op("linalg.lu_solve[adjoint, right]",
   lambda lib, a, b: _L(lib).lu_solve(*_L(lib).lu_factor(a), b, left=False, adjoint=True),
   lambda a, b: b @ np.linalg.inv(a.T), [(3, 3), (2, 3)], ["linalg_lu"])
