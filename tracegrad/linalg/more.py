"""More of ``torch.linalg``, and the older top-level linear algebra of ``torch``.

Primitives: ``matrix_exp`` (SciPy's ``expm`` where installed, else scaling and squaring of
a Pade approximant; its VJP is the matrix exponential of the block matrix [[A^T, G], [0,
A^T]], whose corner is the adjoint of the Frechet derivative, so it differentiates again)
and ``pinv`` (NumPy's SVD-based pseudo-inverse, with PyTorch's ``pinv_backward``, valid
where the rank does not change).

Composites: ``solve_triangular`` (the triangle taken out, then solved: the gradient stays in
the triangle, as PyTorch's), ``multi_dot``, ``vecdot``, ``vander``, ``diagonal``,
``cond``, ``tensorinv``, ``tensorsolve``, ``cross``, and the old API: ``tracegrad.cholesky``,
``cholesky_solve``, ``cholesky_inverse``, ``svd`` (U, S, V), ``qr``, ``pinverse``,
``matrix_exp``, ``triangular_solve``. The ``*_ex`` forms are re-exported from beside their
factorisations (``linalg.decomp``, ``linalg.solve``).
"""
import math
from collections import namedtuple

import numpy as np

from ..ops.core import Primitive, bind, op_error
from ..ops.declare import method
from ..ops.linalg import matmul
from ..ops.more_ops import diagonal as _diagonal, tril, triu
from ..ops.reduce_ops import sum
from ..ops.shape_ops import cat, reshape
from .checks import check, float_rule, square_rule
from .decomp import cholesky, cholesky_ex, qr, svd, svdvals  # noqa: F401 - re-exported
from .norms import matrix_norm
from .solve import _mT, inv, inv_ex, solve, solve_ex  # noqa: F401 - re-exported

_svd_result = namedtuple("torch_return_types_svd", ["U", "S", "V"])
_qr_result = namedtuple("torch_return_types_qr", ["Q", "R"])
_triangular_result = namedtuple("torch_return_types_triangular_solve",
                                ["solution", "cloned_coefficient"])


# matrix_exp ---------------------------------------------------------------------------------

_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)


def _expm_numpy(a):
    """exp of a batch of matrices: Higham's scaling and squaring with the degree-13 Pade
    approximant (SciPy's method, without its lower-degree shortcuts)."""
    n = a.shape[-1]
    norm1 = np.abs(a).sum(-2).max(-1) if a.size else np.zeros(a.shape[:-2])
    s = np.maximum(0, np.ceil(np.log2(np.maximum(norm1, 1e-300) / 5.371920351148152)))
    s = s.astype(int)
    a = a / (2.0 ** s)[..., None, None]
    b = _PADE13
    eye = np.broadcast_to(np.eye(n, dtype=a.dtype), a.shape)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    out = r.copy()
    flat_out, flat_s = out.reshape(-1, n, n), np.broadcast_to(s, a.shape[:-2]).reshape(-1)
    for k in range(flat_out.shape[0]):
        for _ in range(int(flat_s[k])):
            flat_out[k] = flat_out[k] @ flat_out[k]
    return flat_out.reshape(out.shape)


def _expm_impl(xp, a):
    if xp is not np:
        import cupyx.scipy.linalg as cl
        return cl.expm(a) if a.ndim == 2 else xp.stack([cl.expm(m) for m in a.reshape(
            -1, *a.shape[-2:])]).reshape(a.shape)
    try:
        from scipy.linalg import expm
    except ImportError:
        return _expm_numpy(a).astype(a.dtype, copy=False)
    return np.asarray(expm(a)).astype(a.dtype, copy=False)


def _expm_grad(g, a):
    """The adjoint of exp's Frechet derivative at a, applied to g: the upper-right block of
    exp([[a^T, g], [0, a^T]])."""
    from ..creation import zeros
    n = a.shape[-1]
    at = _mT(a)
    top = cat([at, g], -1)
    bottom = cat([zeros(a.shape, dtype=a.dtype, device=a.device), at], -1)
    big = matrix_exp(cat([top, bottom], -2))
    return big[..., :n, n:]


matrix_exp_p = Primitive(
    "linalg_matrix_exp", _expm_impl, dtype=float_rule("matrix_exp"),
    shape=square_rule("matrix_exp"), vjp=(lambda g, a, out: _expm_grad(g, a),),
    saves=("self",), kind="other", node="LinalgMatrixExpBackward0")


@method
def matrix_exp(A):
    """The matrix exponential of each square matrix of a batch."""
    check("linalg.matrix_exp", A, square=True)
    return bind(matrix_exp_p, A)


# pinv ---------------------------------------------------------------------------------------

def _pinv_impl(xp, a, rtol, hermitian):
    if a.size == 0:
        return xp.zeros(a.shape[:-2] + (a.shape[-1], a.shape[-2]), dtype=a.dtype)
    return xp.linalg.pinv(a, rcond=rtol, hermitian=hermitian) if xp is np else \
        xp.linalg.pinv(a, rcond=rtol)


def _pinv_grad(g, a, p):
    """PyTorch's pinv_backward (FunctionsManual.cpp), for real matrices."""
    m, n = a.shape[-2:]
    ph, gh = _mT(p), _mT(g)
    if m <= n:
        k = matmul(gh, p)
        kph = matmul(k, ph)
        return (-_mT(matmul(p, k)) + kph - matmul(matmul(a, p), kph)
                + matmul(matmul(ph, p), gh - matmul(k, a)))
    k = matmul(p, gh)
    phk = matmul(ph, k)
    return (-_mT(matmul(k, p)) + matmul(matmul(gh - matmul(a, k), p), ph) + phk
            - matmul(matmul(phk, p), a))


pinv_p = Primitive(
    "linalg_pinv", _pinv_impl, dtype=float_rule("pinv"),
    shape=lambda s, **_: tuple(s[:-2]) + (s[-1], s[-2]),
    vjp=(lambda g, a, out, rtol, hermitian: _pinv_grad(g, a, out),),
    saves=("self", "result"), kind="other", node="LinalgPinvBackward0")


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse (singular values below max(atol, rtol * s_max)
    count as zero; by default rtol = max(m, n) * eps)."""
    check("linalg.pinv", A, square=False)
    m, n = A.shape[-2:]
    if atol is not None:
        raise op_error("linalg.pinv", "atol is not supported; use rtol")
    if rtol is None:
        rtol = max(m, n) * float(np.finfo(A.dtype.np).eps)
    return bind(pinv_p, A, rtol=float(rtol), hermitian=bool(hermitian))


@method
def pinverse(input, rcond=1e-15):
    """``torch.pinverse``: ``linalg.pinv`` with a relative cutoff ``rcond``."""
    return pinv(input, rtol=rcond)


# triangular systems -------------------------------------------------------------------------

def _triangle(A, upper, unitriangular):
    from ..creation import eye
    t = triu(A) if upper else tril(A)
    if unitriangular:
        n = A.shape[-1]
        ones = eye(n, dtype=A.dtype, device=A.device)
        t = t - t * ones + ones
    return t


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (or X A = B with ``left=False``) for a triangular A: only A's triangle
    is read (and its diagonal taken as ones with ``unitriangular``), and only that triangle
    gets a gradient."""
    check("linalg.solve_triangular", A, square=True)
    t = _triangle(A, upper, unitriangular)
    return solve(t, B) if left else _mT(solve(_mT(t), _mT(B)))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """``torch.triangular_solve``: ``(solution, A's copy)`` of A X = b (A^T X = b with
    ``transpose``)."""
    t = _triangle(A, upper, unitriangular)
    if transpose:
        t = _mT(t)
    return _triangular_result(solve(t, b), A.clone())


# small composites ---------------------------------------------------------------------------

def multi_dot(tensors):
    """The product of a chain of matrices (the first may be a vector, as may the last)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise op_error("linalg.multi_dot", "expected at least 2 tensors but got "
                                           f"{len(tensors)}")
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def chain_matmul(*matrices):
    """``torch.chain_matmul``: the product of the matrices (``multi_dot``'s, PyTorch's
    deprecated name for it)."""
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along ``dim`` (with broadcasting)."""
    return sum(x * y, dim)


def vander(x, *, N=None):
    """Columns x^0, x^1, ..., x^(N-1) (increasing powers, as ``torch.linalg.vander``)."""
    from ..ops.shape_ops import stack
    if x.ndim == 0:
        x = reshape(x, (1,))
    n = x.shape[-1] if N is None else N
    if n < 1:
        raise op_error("linalg.vander", "N must be greater than 1.")
    cols = [x ** 0] + [x ** k for k in range(1, n)]
    return stack(cols, -1)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.diagonal`` with linalg's defaults (the last two dims)."""
    return _diagonal(A, offset, dim1, dim2)


def cond(A, p=None):
    """The condition number in norm ``p`` (None or 2: s_max / s_min; -2: its inverse; 'fro',
    'nuc', inf, -inf, 1, -1: ||A|| ||A^-1||)."""
    check("linalg.cond", A, square=False)
    if p is None or p in (2, -2):
        s = svdvals(A)
        hi, lo = s[..., 0], s[..., -1]
        return lo / hi if p == -2 else hi / lo
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def tensorinv(A, ind=2):
    """The inverse of A seen as a map from its last dims to its first ``ind`` dims."""
    left, right = A.shape[:ind], A.shape[ind:]
    rows, cols = math.prod(left), math.prod(right)
    if rows != cols:
        raise op_error("linalg.tensorinv", f"Expected self to satisfy the requirement "
                                           f"prod(self.shape[ind:]) == prod(self.shape[:ind]), "
                                           f"but got {cols} != {rows}")
    return reshape(inv(reshape(A, (rows, cols))), tuple(right) + tuple(left))


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B."""
    from ..ops.shape_ops import movedim
    if dims is not None:
        A = movedim(A, list(dims), list(range(A.ndim - len(dims), A.ndim)))
    rest = A.shape[B.ndim:]
    n = math.prod(rest)
    x = solve(reshape(A, (math.prod(B.shape), n)), reshape(B, (-1,)))
    return reshape(x, tuple(rest))


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim`` (broadcast)."""
    from ..ops.shape_ops import broadcast_tensors, stack
    if input.ndim != other.ndim:
        raise op_error("linalg.cross", "inputs must have the same number of dimensions.")
    a, b = broadcast_tensors(input, other)
    d = dim % a.ndim
    if a.shape[d] != 3:
        raise op_error("linalg.cross", f"inputs dimension {dim} must have length 3. Got "
                                       f"{input.shape[d] if d < input.ndim else '?'} and "
                                       f"{other.shape[d] if d < other.ndim else '?'}")
    from ..ops.shape_ops import narrow, squeeze
    ax = [squeeze(narrow(a, d, i, 1), d) for i in range(3)]
    bx = [squeeze(narrow(b, d, i, 1), d) for i in range(3)]
    return stack([ax[1] * bx[2] - ax[2] * bx[1], ax[2] * bx[0] - ax[0] * bx[2],
                  ax[0] * bx[1] - ax[1] * bx[0]], d)


# the older top-level API --------------------------------------------------------------------

def legacy_cholesky(input, upper=False):
    """``torch.cholesky`` (deprecated in PyTorch for ``linalg.cholesky``)."""
    return cholesky(input, upper=upper)


def cholesky_solve(B, L, upper=False):
    """X with (L L^T) X = B, from the Cholesky factor L (U^T U with ``upper``). As in
    PyTorch, the whole of L takes part (its gradient is not kept to the triangle)."""
    a = matmul(_mT(L), L) if upper else matmul(L, _mT(L))
    return solve(a, B)


def cholesky_inverse(L, upper=False):
    """inv(L L^T) from the Cholesky factor L (inv(U^T U) with ``upper``)."""
    return inv(matmul(_mT(L), L) if upper else matmul(L, _mT(L)))


def legacy_svd(input, some=True, compute_uv=True):
    """``torch.svd``: ``(U, S, V)`` with V, not V^H; ``some=False`` gives the full U and V."""
    if not compute_uv:
        from ..creation import zeros
        m, n = input.shape[-2:]
        s = svdvals(input)
        return _svd_result(zeros(input.shape[:-2] + (m, m if not some else min(m, n)),
                                 dtype=input.dtype),
                           s, zeros(input.shape[:-2] + (n, n if not some else min(m, n)),
                                    dtype=input.dtype))
    u, s, vh = svd(input, full_matrices=not some)
    return _svd_result(u, s, _mT(vh))


def legacy_qr(input, some=True):
    """``torch.qr``: ``(Q, R)``, reduced unless ``some=False``."""
    q, r = qr(input, mode="reduced" if some else "complete")
    return _qr_result(q, r)


__all__ = ["matrix_exp", "pinv", "solve_triangular", "multi_dot", "vecdot", "vander",
           "diagonal", "cond", "tensorinv", "tensorsolve", "cross", "cholesky_ex", "inv_ex",
           "solve_ex"]
_LEGACY = {"cholesky": legacy_cholesky, "cholesky_solve": cholesky_solve,
           "cholesky_inverse": cholesky_inverse, "svd": legacy_svd, "qr": legacy_qr,
           "pinverse": pinverse, "matrix_exp": matrix_exp, "triangular_solve": triangular_solve,
           "chain_matmul": chain_matmul}
