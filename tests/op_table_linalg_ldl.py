"""Op-table entries for linalg's LDL factorization and Householder products
(``linalg/ldl.py``: ldl_factor, ldl_solve, householder_product/orgqr, ormqr, geqrf), and for
fractional max pooling (``nn/functional/_fractional.py``)."""
import numpy as np

from op_table import op

try:
    from scipy.linalg import lapack
except ImportError:         # the LDL and geqrf references are LAPACK's, through SciPy
    lapack = None


def _np_householder(a, tau, n=None):
    """H_1 ... H_k (its first ``n`` columns; all m with None), H_i = I - tau_i v_i v_i^T."""
    m = a.shape[-2]
    q = np.eye(m)
    for i in range(tau.shape[-1]):
        v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
    return q[:, :a.shape[-1] if n is None else n] if n != 0 else q


def _batched(fn):
    return lambda *xs: np.stack([fn(*parts) for parts in zip(*xs)])


def _sym(lib_or_np, a):
    return a + (a.mT if hasattr(a, "mT") else np.swapaxes(a, -1, -2))


op("linalg.householder_product", lambda lib, a, tau: lib.linalg.householder_product(a, tau),
   _np_householder, [(5, 3), (2,)], ["matmul"])
op("linalg.householder_product[batch]",
   lambda lib, a, tau: lib.linalg.householder_product(a, tau),
   _batched(_np_householder), [(2, 4, 4), (2, 4)], ["matmul"])
op("orgqr.method", lambda lib, a, tau: a.orgqr(tau), _np_householder, [(4, 3), (3,)],
   ["matmul"])
for _left in (True, False):
    for _t in (False, True):
        op(f"ormqr[left={_left}, transpose={_t}]",
           lambda lib, a, tau, c, left=_left, t=_t: lib.ormqr(a, tau, c, left, t),
           lambda a, tau, c, left=_left, t=_t: (
               (_np_householder(a, tau, 0).T if t else _np_householder(a, tau, 0)) @ c
               if left else c @ (_np_householder(a, tau, 0).T if t
                                 else _np_householder(a, tau, 0))),
           [(4, 3), (3,), (4, 2) if _left else (2, 4)], ["matmul"])

if lapack is not None:
    def _np_ldl(a):
        return np.tril(lapack.dsytrf(_sym(np, a), lower=1)[0])

    op("linalg.ldl_factor.LD", lambda lib, a: lib.linalg.ldl_factor(_sym(lib, a))[0], _np_ldl,
       [(4, 4)], ["linalg_ldl_factor"], grad=False, rtol=1e-4)
    op("linalg.ldl_factor_ex[batch].LD",
       lambda lib, a: lib.linalg.ldl_factor_ex(_sym(lib, a))[0], _batched(_np_ldl),
       [(2, 3, 3)], ["linalg_ldl_factor"], grad=False, rtol=1e-4)
    op("linalg.ldl_solve", lambda lib, a, b: lib.linalg.ldl_solve(
        *lib.linalg.ldl_factor(_sym(lib, a)), b),
       lambda a, b: np.linalg.solve(_sym(np, a), b), [(4, 4), (4, 2)], ["linalg_ldl_solve"],
       grad=False, rtol=1e-4)
    op("geqrf", lambda lib, a: tuple(lib.geqrf(a)),
       lambda a: tuple(lapack.dgeqrf(a)[:2]), [(5, 3)], ["geqrf_a", "geqrf_tau"], grad=False,
       rtol=1e-4)
    op("geqrf[wide].method", lambda lib, a: tuple(a.geqrf()),
       lambda a: tuple(lapack.dgeqrf(a)[:2]), [(2, 4)], ["geqrf_a", "geqrf_tau"], grad=False,
       rtol=1e-4)


# fractional max pooling (nn/functional/_fractional.py; listed here, the file its change owns) --

_U2 = [[[0.25, 0.7], [0.9, 0.1]], [[0.5, 0.05], [0.33, 0.66]]]      # (N=2, C=2, 2)
_U3 = [[[0.25, 0.7, 0.4], [0.9, 0.1, 0.6]]]                         # (N=1, C=2, 3)


def _np_starts(u, L, k, out):
    """PyTorch's window starts (its generate_intervals) along one dim."""
    alpha = (L - k) / (out - 1) if out > 1 else 0.0
    seq = [int((j + u) * alpha) - int(u * alpha) for j in range(out - 1)]
    return seq + [L - k]


def _np_fractional(x, u, kernel, out):
    """Values and flat per-plane indices of fractional max pooling, plane by plane."""
    nd = len(kernel)
    spatial = x.shape[-nd:]
    order = (1, 0) if nd == 2 else (0, 1, 2)
    vals = np.empty(x.shape[:2] + tuple(out))
    idx = np.empty(x.shape[:2] + tuple(out), np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        starts = [_np_starts(u[n][c][order[i]], spatial[i], kernel[i], out[i])
                  for i in range(nd)]
        for o in np.ndindex(*out):
            window = tuple(slice(starts[i][o[i]], starts[i][o[i]] + kernel[i])
                           for i in range(nd))
            block = x[(n, c) + window]
            at = np.unravel_index(np.argmax(block), block.shape)
            pos = tuple(starts[i][o[i]] + at[i] for i in range(nd))
            vals[(n, c) + o] = block[at]
            idx[(n, c) + o] = np.ravel_multi_index(pos, spatial)
    return vals, idx


op("fractional_max_pool2d[k2 out(3,4), indices]",
   lambda lib, x: lib.nn.functional.fractional_max_pool2d(
       x, 2, output_size=(3, 4), return_indices=True,
       _random_samples=lib.tensor(_U2, dtype=x.dtype)),
   lambda x: _np_fractional(x, _U2, (2, 2), (3, 4)), [(2, 2, 6, 7)],
   ["fractional_max_pool2d", "fractional_max_pool2d_backward"])
op("fractional_max_pool3d[k(2,3,2) out(2,3,2)]",
   lambda lib, x: lib.nn.functional.fractional_max_pool3d(
       x, (2, 3, 2), output_size=(2, 3, 2), _random_samples=lib.tensor(_U3, dtype=x.dtype)),
   lambda x: _np_fractional(x, _U3, (2, 3, 2), (2, 3, 2))[0], [(1, 2, 4, 6, 5)],
   ["fractional_max_pool3d", "fractional_max_pool3d_backward"])
