"""``tracegrad.linalg``: PyTorch's ``torch.linalg`` over NumPy's LAPACK bindings.

Each decomposition output is a primitive of its own (``eigh`` is ``eigh_values`` and
``eigh_vectors``, ``svd`` is ``svd_u``, ``svd_s``, ``svd_vh``): a primitive has one result,
and a vector-Jacobian product is linear in the cotangents, so the contributions of the
outputs' rules add up to the joint rule. Every rule is written with tracegrad ops (the
rules call the decompositions again), so gradients are differentiable again.

All functions take batches (``(*, m, n)``) and real floating inputs. Conventions for
degenerate inputs follow PyTorch:

- ``eigh``/``svd``: the gradient of the eigen/singular vectors involves 1 / (l_j - l_i)
  (1 / (s_j**2 - s_i**2)); with repeated eigen/singular values it is not defined (inf or
  NaN), as in PyTorch. The gradient through the values alone is always defined.
- ``det``: the gradient is the cofactor matrix (the adjugate's transpose), computed from
  the SVD, so it is right for singular matrices too; its derivative again needs distinct
  singular values.
- ``inv``/``solve`` of a singular matrix raise; ``slogdet`` gives ``logabsdet = -inf``.
- ``qr``: differentiable for ``mode='reduced'``, and for ``'complete'`` when m <= n;
  ``mode='r'`` returns an empty Q and R is not differentiable.
- ``svd(full_matrices=True)``: the gradient uses the first min(m, n) columns of U and rows
  of Vh (the others are not unique) and ignores the cotangent of the rest.
"""
import math
from collections import namedtuple

import numpy as np

from . import dtypes
from .ops.core import Primitive, bind, op_error
from .ops.declare import method
from .ops.composite import isfinite
from .ops.elementwise import abs, sqrt, where
from .ops.linalg import matmul
from .ops.more_ops import cumprod, diag_embed, diagonal, tril
from .ops.reduce_ops import amax, amin, sum
from .ops.rules import broadcast, norm_dim
from .ops.shape_ops import broadcast_to, cat, flip, narrow, squeeze, transpose, unsqueeze

_eigh_result = namedtuple("torch_return_types_linalg_eigh", ["eigenvalues", "eigenvectors"])
_svd_result = namedtuple("torch_return_types_linalg_svd", ["U", "S", "Vh"])
_qr_result = namedtuple("torch_return_types_linalg_qr", ["Q", "R"])
_slogdet_result = namedtuple("torch_return_types_linalg_slogdet", ["sign", "logabsdet"])
_lstsq_result = namedtuple("torch_return_types_linalg_lstsq",
                           ["solution", "residuals", "rank", "singular_values"])


def _mT(x):
    return transpose(x, -1, -2)


def _float_dtype(name):
    def rule(a, *rest, **_):
        if not a.dtype.is_floating_point:
            raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as "
                               f"input. Got {a.dtype.name.capitalize()}")
        for b in rest:
            if hasattr(b, "dtype") and b.dtype is not a.dtype:
                raise RuntimeError(f"linalg.{name}: Expected all tensors to have the same dtype "
                                   f"(got {a.dtype.name} and {b.dtype.name})")
        return a.dtype
    return rule


def _square(name):
    def rule(s, *_, **__):
        if len(s) < 2:
            raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 "
                               f"dimensions.")
        if s[-1] != s[-2]:
            raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they "
                               f"are {s[-2]} by {s[-1]} matrices")
        return tuple(s)
    return rule


def _solve_right(x, a):
    """x @ inv(a), through a solve."""
    return _mT(solve(_mT(a), _mT(x)))


def _off_diagonal(m):
    return m - diag_embed(diagonal(m, 0, -2, -1))


def _ones_diagonal(v):
    """A diagonal matrix of ones, built from the vector ``v`` (no constant needed)."""
    return diag_embed(v * 0 + 1)


def _matrix_of(g):
    return unsqueeze(unsqueeze(g, -1), -1)


# inv -------------------------------------------------------------------------------------

inv_p = Primitive(
    "linalg_inv", lambda xp, a: xp.linalg.inv(a), dtype=_float_dtype("inv"),
    shape=_square("inv"),
    vjp=(lambda g, a, out: -matmul(matmul(_mT(out), g), _mT(out)),), saves=("result",),
    node="LinalgInvExBackward0")


def inv(A):
    return bind(inv_p, A)


# solve -----------------------------------------------------------------------------------

def _solve_shape(a, b):
    _square("solve")(a)
    if b[-2] != a[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({a[-2]}x{a[-1]} and {b[-2]}x{b[-1]})")
    return broadcast(a[:-2], b[:-2]) + tuple(b[-2:])


def _solve_impl(xp, a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return xp.linalg.solve(xp.broadcast_to(a, batch + a.shape[-2:]),
                           xp.broadcast_to(b, batch + b.shape[-2:]))


solve_p = Primitive(
    "linalg_solve", _solve_impl, args=("A", "B"), dtype=_float_dtype("solve"), shape=_solve_shape,
    vjp=(lambda g, a, b, out: -matmul(solve(_mT(a), g), _mT(out)),
         lambda g, a, b, out: solve(_mT(a), g)),
    saves=("A", "result"), node="LinalgSolveExBackward0")


def solve(A, B, *, left=True):
    """X with A X = B (``left=False``: X A = B). B is a batch of vectors when it has one
    dim less than A and its shape is A's without the last dim (or B is 1-D)."""
    if not left:
        return _mT(solve(_mT(A), _mT(B)))
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector:
        return squeeze(bind(solve_p, A, unsqueeze(B, -1)), -1)
    return bind(solve_p, A, B)


# det, slogdet ----------------------------------------------------------------------------

def _prod_others(s):
    """prod_{j != i} s_j along the last dim, without division (exact at zeros)."""
    one = narrow(s, -1, 0, 1) * 0 + 1
    n = s.shape[-1]
    left = cumprod(cat([one, narrow(s, -1, 0, n - 1)], -1), -1)
    right = flip(cumprod(flip(cat([narrow(s, -1, 1, n - 1), one], -1), -1), -1), -1)
    return left * right


def _cofactor(a):
    """det(A) A^-T, from A = U S Vh: det(U) det(Vh) U diag(prod_{j!=i} s_j) Vh."""
    u, s, vh = svd(a)
    alpha = (det(u.detach()) * det(vh.detach()))     # +-1, locally constant
    return matmul(u * unsqueeze(_prod_others(s) * unsqueeze(alpha, -1), -2), vh)


det_p = Primitive(
    "linalg_det", lambda xp, a: xp.linalg.det(a), dtype=_float_dtype("det"),
    shape=lambda s: _square("det")(s)[:-2],
    vjp=(lambda g, a, out: _matrix_of(g) * _cofactor(a),), saves=("self",),
    node="LinalgDetBackward0")

logabsdet_p = Primitive(
    "linalg_logabsdet", lambda xp, a: xp.linalg.slogdet(a)[1], dtype=_float_dtype("slogdet"),
    shape=lambda s: _square("slogdet")(s)[:-2],
    vjp=(lambda g, a, out: _matrix_of(g) * _mT(inv(a)),), saves=("self",),
    node="LinalgSlogdetBackward0")

# the sign is piecewise constant: its gradient is zero (PyTorch's sign output requires grad)
detsign_p = Primitive(
    "linalg_detsign", lambda xp, a: xp.linalg.slogdet(a)[0], dtype=_float_dtype("slogdet"),
    shape=lambda s: _square("slogdet")(s)[:-2],
    vjp=(lambda g, a, out: broadcast_to(_matrix_of(g) * 0, a.shape),),
    node="LinalgSlogdetBackward0")


def det(A):
    return bind(det_p, A)


def slogdet(A):
    """(sign, log|det A|); only ``logabsdet`` has a gradient (sign is piecewise constant)."""
    return _slogdet_result(bind(detsign_p, A), bind(logabsdet_p, A))


# cholesky --------------------------------------------------------------------------------

def _phi(x):
    """The lower triangle with the diagonal halved."""
    return tril(x) - 0.5 * diag_embed(diagonal(x, 0, -2, -1))


def _cholesky_grad(g, l):
    """A^-bar = L^-T Phi(L^T g) L^-1, symmetrised (PyTorch's form)."""
    lt = _mT(l)
    ga = _solve_right(solve(lt, _phi(matmul(lt, g))), l)
    return 0.5 * (ga + _mT(ga))


def _cholesky_impl(xp, a):
    try:
        return xp.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise RuntimeError("linalg.cholesky: The factorization could not be completed because "
                           "the input is not positive-definite.") from None


cholesky_p = Primitive(
    "linalg_cholesky", _cholesky_impl, dtype=_float_dtype("cholesky"),
    shape=_square("cholesky"), vjp=(lambda g, a, out: _cholesky_grad(g, out),),
    saves=("result",), node="LinalgCholeskyExBackward0")


def cholesky(A, *, upper=False):
    """L lower triangular with A = L L^T (``upper=True``: U = L^T). Only the lower triangle
    of A is read; the gradient is symmetric, as PyTorch's."""
    lower = bind(cholesky_p, A)
    return _mT(lower) if upper else lower


# qr --------------------------------------------------------------------------------------

def _qr_shape(part):
    def rule(s, mode):
        m, n = s[-2], s[-1]
        k = min(m, n)
        if part == "q":
            cols = 0 if mode == "r" else (m if mode == "complete" else k)
            return tuple(s[:-2]) + ((m, cols) if mode != "r" else (0,))
        rows = m if mode == "complete" else k
        return tuple(s[:-2]) + (rows, n)
    return rule


def _qr_impl(part):
    def impl(xp, a, mode):
        if part == "q" and mode == "r":
            return xp.zeros((0,), a.dtype)
        q, r = xp.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
        return q if part == "q" else r
    return impl


def _copyltu(x):
    """The symmetric matrix with x's lower triangle."""
    return tril(x) + _mT(tril(x, -1))


def _qr_grad_tall(gq, gr, q, r):
    """m >= n with reduced Q: (gQ + Q copyltu(R gR^T - gQ^T Q)) R^-T."""
    m = 0
    if gr is not None:
        m = matmul(r, _mT(gr))
    if gq is not None:
        m = m - matmul(_mT(gq), q)
    ga = matmul(q, _copyltu(m))
    if gq is not None:
        ga = ga + gq
    return _solve_right(ga, _mT(r))


def _qr_grad(g, a, part, mode):
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when "
                           "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                           "differentiate through linalg.qr.")
    m, n = a.shape[-2], a.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and "
                           "nrows > ncols.")
    q, r = qr(a, mode)
    gq, gr = (g, None) if part == "q" else (None, g)
    if m >= n:
        return _qr_grad_tall(gq, gr, q, r)
    # m < n: A = [X | Y] with X square, R = [U | V]; X = Q U is a square QR
    y = narrow(a, -1, m, n - m)
    u = narrow(r, -1, 0, m)
    gu = gv = None
    if gr is not None:
        gu, gv = narrow(gr, -1, 0, m), narrow(gr, -1, m, n - m)
    gq_x = gq
    if gv is not None:
        gq_x = matmul(y, _mT(gv)) if gq_x is None else gq_x + matmul(y, _mT(gv))
    gx = _qr_grad_tall(gq_x, gu, q, u)
    gy = matmul(q, gv) if gv is not None else y * 0
    return cat([gx, gy], -1)


qr_q_p = Primitive(
    "linalg_qr_q", _qr_impl("q"), dtype=_float_dtype("qr"), shape=_qr_shape("q"),
    vjp=(lambda g, a, out, mode: _qr_grad(g, a, "q", mode),), saves=("self",),
    node="LinalgQrBackward0")
qr_r_p = Primitive(
    "linalg_qr_r", _qr_impl("r"), dtype=_float_dtype("qr"), shape=_qr_shape("r"),
    vjp=(lambda g, a, out, mode: _qr_grad(g, a, "r", mode),), saves=("self",),
    node="LinalgQrBackward0")


def qr(A, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise op_error("linalg.qr", f"qr received unrecognized mode '{mode}' but expected one of "
                                    f"'reduced' (default), 'r', or 'complete'")
    return _qr_result(bind(qr_q_p, A, mode=mode), bind(qr_r_p, A, mode=mode))


# eigh ------------------------------------------------------------------------------------

def _eigh_grad(g, a, part, uplo):
    """V (diag(gL) + F o (V^T gV)) V^T with F_ij = 1 / (l_j - l_i) off the diagonal."""
    lam, v = eigh(a, uplo)
    if part == "values":
        inner = diag_embed(g)
    else:
        e = unsqueeze(lam, -2) - unsqueeze(lam, -1)
        inner = _off_diagonal(matmul(_mT(v), g) / (e + _ones_diagonal(lam)))
    return matmul(matmul(v, inner), _mT(v))


def _eigh_impl(part):
    def impl(xp, a, uplo):
        w, v = xp.linalg.eigh(a, UPLO=uplo)
        return w if part == "values" else v
    return impl


eigh_values_p = Primitive(
    "linalg_eigh_values", _eigh_impl("values"), dtype=_float_dtype("eigh"),
    shape=lambda s, uplo: _square("eigh")(s)[:-1],
    vjp=(lambda g, a, out, uplo: _eigh_grad(g, a, "values", uplo),), saves=("self",),
    node="LinalgEighBackward0")
eigh_vectors_p = Primitive(
    "linalg_eigh_vectors", _eigh_impl("vectors"), dtype=_float_dtype("eigh"),
    shape=lambda s, uplo: _square("eigh")(s),
    vjp=(lambda g, a, out, uplo: _eigh_grad(g, a, "vectors", uplo),), saves=("self",),
    node="LinalgEighBackward0")


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix, reading the ``UPLO``
    triangle of A."""
    if UPLO not in ("L", "U"):
        raise op_error("linalg.eigh", f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return _eigh_result(bind(eigh_values_p, A, uplo=UPLO), bind(eigh_vectors_p, A, uplo=UPLO))


def eigvalsh(A, UPLO="L"):
    return eigh(A, UPLO).eigenvalues


# svd -------------------------------------------------------------------------------------

def _svd_grad(g, a, part, full_matrices):
    """Reduced factors U (m x k), S, Vh (k x n); with F_ij = 1 / (s_j^2 - s_i^2):
    gS: U diag(gS) Vh;
    gU: U (F o (U^T gU - gU^T U)) S Vh + (I - U U^T) gU S^-1 Vh;
    gVh (gV = gVh^T): U S (F o (V^T gV - gV^T V)) Vh + U S^-1 gV^T (I - V V^T)."""
    u, s, vh = svd(a, full_matrices=False)
    if part == "s":
        return matmul(u * unsqueeze(g, -2), vh)
    k = s.shape[-1]
    s2 = s * s
    f = _off_diagonal(1 / (unsqueeze(s2, -2) - unsqueeze(s2, -1) + _ones_diagonal(s)))
    if part == "u":
        gu = narrow(g, -1, 0, k) if full_matrices else g
        j = matmul(_mT(u), gu)
        ga = matmul(u, matmul((f * (j - _mT(j))) * unsqueeze(s, -2), vh))
        if u.shape[-2] > k:     # (I - U U^T) vanishes for a square U: 0 / s stays out
            ga = ga + matmul((gu - matmul(u, j)) / unsqueeze(s, -2), vh)
        return ga
    gvh = narrow(g, -2, 0, k) if full_matrices else g
    j = matmul(vh, _mT(gvh))                # V^T gV
    ga = matmul(u, matmul(unsqueeze(s, -1) * (f * (j - _mT(j))), vh))
    if vh.shape[-1] > k:
        proj = gvh - matmul(_mT(j), vh)     # gV^T (I - V V^T)
        ga = ga + matmul(u, proj / unsqueeze(s, -1))
    return ga


def _svd_shape(part):
    def rule(s, full_matrices):
        m, n = s[-2], s[-1]
        k = min(m, n)
        b = tuple(s[:-2])
        if part == "u":
            return b + (m, m if full_matrices else k)
        if part == "s":
            return b + (k,)
        return b + (n if full_matrices else k, n)
    return rule


def _svd_impl(part):
    def impl(xp, a, full_matrices):
        if part == "s":
            return xp.linalg.svd(a, compute_uv=False)
        u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
        return u if part == "u" else vh
    return impl


svd_u_p = Primitive(
    "linalg_svd_u", _svd_impl("u"), dtype=_float_dtype("svd"), shape=_svd_shape("u"),
    vjp=(lambda g, a, out, full_matrices: _svd_grad(g, a, "u", full_matrices),),
    saves=("self",), node="LinalgSvdBackward0")
svd_s_p = Primitive(
    "linalg_svd_s", _svd_impl("s"), dtype=_float_dtype("svd"), shape=_svd_shape("s"),
    vjp=(lambda g, a, out, full_matrices: _svd_grad(g, a, "s", full_matrices),),
    saves=("self",), node="LinalgSvdBackward0")
svd_vh_p = Primitive(
    "linalg_svd_vh", _svd_impl("vh"), dtype=_float_dtype("svd"), shape=_svd_shape("vh"),
    vjp=(lambda g, a, out, full_matrices: _svd_grad(g, a, "vh", full_matrices),),
    saves=("self",), node="LinalgSvdBackward0")


def svd(A, full_matrices=True):
    """A = U diag(S) Vh, singular values descending."""
    fm = bool(full_matrices)
    return _svd_result(bind(svd_u_p, A, full_matrices=fm), bind(svd_s_p, A, full_matrices=False),
                       bind(svd_vh_p, A, full_matrices=fm))


def svdvals(A):
    return bind(svd_s_p, A, full_matrices=False)


# lstsq -----------------------------------------------------------------------------------

def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of A X = B (the minimum-norm one when A is wide), through
    a QR of A (or of A^T), so it is differentiable. As PyTorch's default CPU driver
    ('gelsy') does, ``residuals`` and ``singular_values`` are empty and ``rank`` is A's rank;
    A must have full rank."""
    if driver not in (None, "gelsy", "gels", "gelsd", "gelss"):
        raise op_error("linalg.lstsq", "parameter `driver` should be one of (gels, gelsy, "
                                       "gelsd, gelss)")
    vector = B.ndim == A.ndim - 1
    b = unsqueeze(B, -1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if m >= n:
        q, r = qr(A)
        x = solve(r, matmul(_mT(q), b))
    else:
        q, r = qr(_mT(A))
        x = matmul(q, solve(_mT(r), b))
    if vector:
        x = squeeze(x, -1)
    from .creation import tensor
    empty = tensor(np.zeros((0,), A.dtype.np))
    return _lstsq_result(x, empty, matrix_rank(A.detach()), tensor(np.zeros((0,), A.dtype.np)))


matrix_rank_p = Primitive(
    "linalg_matrix_rank", lambda xp, a, hermitian: xp.asarray(
        xp.linalg.matrix_rank(a, hermitian=hermitian)),
    dtype=lambda a, **_: dtypes.int64, shape=lambda s, **_: tuple(s[:-2]), kind="other")


def matrix_rank(A, *, hermitian=False):
    """The number of singular values above max(m, n) * eps * s_max (NumPy's and PyTorch's
    default tolerance)."""
    return bind(matrix_rank_p, A, hermitian=bool(hermitian))


# norms -----------------------------------------------------------------------------------

def _safe_root(total, p):
    """total ** (1/p) with a zero gradient at total == 0 (PyTorch's norm'(0) = 0)."""
    zero = total == 0
    root = sqrt(where(zero, 1.0, total)) if p == 2 else where(zero, 1.0, total) ** (1.0 / p)
    return where(zero, 0.0, root)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if not x.dtype.is_floating_point:      # before ``dtype``: torch refuses an int input too
        raise op_error("linalg.vector_norm", f"linalg.vector_norm: Expected a floating point or "
                                             f"complex tensor as input. Got "
                                             f"{x.dtype.name.capitalize()}")
    if dtype is not None:
        x = x.to(dtype)
    if isinstance(dim, (tuple, list)) and not dim:
        dim = None              # dim=(): every element, as torch's vector_norm
    if not x.dtype.is_floating_point:
        raise op_error("linalg.vector_norm", f"linalg.vector_norm: Expected a floating point or "
                                             f"complex tensor as input. Got "
                                             f"{x.dtype.name.capitalize()}")
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
        finite = where(isfinite(x), x, 0.0)     # 0 * inf would be NaN
        return sum((x != 0).to(x.dtype), dim, keepdim) + sum(finite * 0, dim, keepdim)
    if ord == 1:
        return sum(a, dim, keepdim)
    if ord == 2:
        return _safe_root(sum(x * x, dim, keepdim), 2)
    return _safe_root(sum(a ** ord, dim, keepdim), ord)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise op_error("linalg.matrix_norm", "linalg.matrix_norm: The input tensor A must have "
                                             "at least 2 dimensions.")
    d0, d1 = (norm_dim(d, A.ndim) for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        rest = [d for d in range(A.ndim) if d not in (d0, d1)]
        moved = A.permute(*rest, d0, d1)
        s = svdvals(moved)
        out = sum(s, -1) if ord == "nuc" else (amax(s, -1) if ord == 2 else amin(s, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    if ord in (1, -1, math.inf, -math.inf):
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = sum(abs(A), inner, keepdim=True)
        pick = amax if ord in (1, math.inf) else amin
        out = pick(sums, outer, keepdim=True)
        return out if keepdim else squeeze(out, tuple(sorted((d0, d1))))
    raise op_error("linalg.matrix_norm", f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    raise op_error("linalg.norm", f"linalg.norm: If dim is not specified but ord is, the input "
                                  f"must be 1D or 2D. Got {A.ndim}D.")


# top-level names and Tensor methods -------------------------------------------------------

@method("det")
def _det_method(self):
    return det(self)


@method("logdet")
def logdet(self):
    """log det A: NaN where det < 0, as PyTorch's is."""
    s, l = slogdet(self)
    return where(s < 0, math.nan, l)


@method("slogdet")
def _slogdet_method(self):
    return slogdet(self)


@method("inverse")
def inverse(self):
    return inv(self)


def matrix_power(A, n):
    if n < 0:
        return matrix_power(inv(A), -n)
    if n == 0:      # the identity, whatever A holds (NaN and inf included), batched as A
        from .creation import eye
        return broadcast_to(eye(A.shape[-1], dtype=A.dtype), A.shape).clone()
    out = A
    for _ in range(n - 1):
        out = matmul(out, A)
    return out


__all__ = ["inv", "solve", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd",
           "svdvals", "lstsq", "matrix_rank", "norm", "vector_norm", "matrix_norm", "matrix_power"]
