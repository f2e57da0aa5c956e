"""The decompositions of ``tracegrad.linalg``: ``cholesky``, ``qr``, ``eigh``/``eigvalsh`` and
``svd``/``svdvals``.

Each decomposition output is a primitive of its own (``eigh`` is ``eigh_values`` and
``eigh_vectors``, ``svd`` is ``svd_u``, ``svd_s``, ``svd_vh``): a primitive has one result,
and a vector-Jacobian product is linear in the cotangents, so the contributions of the
outputs' rules add up to the joint rule. Every rule is written with tracegrad ops (the
rules call the decompositions again, and ``solve``), so gradients are differentiable again.
Where a gradient is not defined (repeated eigen or singular values, ``qr``'s ``mode='r'``)
the conventions are PyTorch's (see ``tracegrad.linalg``). Inputs are checked with
PyTorch's wording before a primitive is bound (``linalg.checks``).
"""
from collections import namedtuple

import numpy as np

from .. import _hooks, dtypes
from ..ops.core import Primitive, bind, op_error
from ..ops.linalg import matmul
from ..ops.more_ops import diag_embed, diagonal, tril
from ..ops.norms import use_svdvals
from ..ops.shape_ops import cat, narrow, unsqueeze
from .checks import check, float_rule, lapack, rule_check, run, square_rule
from .solve import _mT, _solve_right, solve

_eigh_result = namedtuple("torch_return_types_linalg_eigh", ["eigenvalues", "eigenvectors"])
_svd_result = namedtuple("torch_return_types_linalg_svd", ["U", "S", "Vh"])
_qr_result = namedtuple("torch_return_types_linalg_qr", ["Q", "R"])
_cholesky_ex_result = namedtuple("torch_return_types_linalg_cholesky_ex", ["L", "info"])


def _off_diagonal(m):
    return m - diag_embed(diagonal(m, 0, -2, -1))


def _ones_diagonal(v):
    """A diagonal matrix of ones, built from the vector ``v`` (no constant needed)."""
    return diag_embed(v * 0 + 1)


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
    return lapack("linalg.cholesky", "The factorization could not be completed because the "
                  "input is not positive-definite.", xp.linalg.cholesky, a)


cholesky_p = Primitive(
    "linalg_cholesky", _cholesky_impl, dtype=float_rule("cholesky"),
    shape=square_rule("cholesky"), vjp=(lambda g, a, out: _cholesky_grad(g, out),),
    saves=("result",), node="LinalgCholeskyExBackward0")


def cholesky(A, *, upper=False):
    """L lower triangular with A = L L^T (``upper=True``: U = L^T). Only the lower triangle
    of A is read; the gradient is symmetric, as PyTorch's."""
    check("linalg.cholesky", A)
    lower = run(cholesky_p, A)
    return _mT(lower) if upper else lower


# cholesky_ex: the factor and LAPACK potrf's info, an int32 tensor (so compile traces it) --

def _positive_definite(m):
    try:
        np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return False
    return True


def _failing_minor(m):
    """The order of ``m``'s first leading minor that is not positive definite, 0 if none
    (potrf's info). A minor that fails makes every larger one fail: a bisection finds it."""
    if _positive_definite(m):
        return 0
    passes, fails = 0, m.shape[-1]
    while fails - passes > 1:
        mid = (passes + fails) // 2
        passes, fails = (mid, fails) if _positive_definite(m[:mid, :mid]) else (passes, mid)
    return fails


def _cholesky_info_impl(xp, a):
    host = a if xp is np else xp.asnumpy(a)
    if _positive_definite(host):        # the whole batch at once, the common case
        info = np.zeros(host.shape[:-2], np.int32)
    else:
        flat = host.reshape(-1, *host.shape[-2:])
        info = np.array([_failing_minor(m) for m in flat], np.int32).reshape(host.shape[:-2])
    return info if xp is np else xp.asarray(info)


cholesky_info_p = Primitive(
    "linalg_cholesky_info", _cholesky_info_impl, dtype=lambda a: dtypes.int32,
    shape=lambda s: tuple(s[:-2]), kind="other")


def cholesky_ex(A, *, upper=False, check_errors=False):
    """``(L, info)``: info is 0, or the order of the leading minor that is not positive
    definite; there L is NaN (LAPACK leaves a partial factor, which PyTorch returns), and
    with ``check_errors`` it raises. Under compile both stay in the graph: the factor is of
    A with the failing matrices swapped for the identity, then masked."""
    from ..creation import eye
    from ..ops.elementwise import where
    check("linalg.cholesky", A)
    info = bind(cholesky_info_p, A)
    if check_errors or _hooks.tracer is None and not bool(info.any()):
        return _cholesky_ex_result(cholesky(A, upper=upper), info)     # (raises if it fails)
    ok = (info == 0)[..., None, None]
    L = cholesky(where(ok, A, eye(A.shape[-1], dtype=A.dtype, device=A.device)), upper=upper)
    return _cholesky_ex_result(where(ok, L, float("nan")), info)


# qr --------------------------------------------------------------------------------------

def _qr_shape(part):
    def rule(s, mode):
        rule_check("qr", s, square=False)
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
        raise op_error("linalg.qr", "The derivative of linalg.qr depends on Q, which is not "
                                    "computed when mode='r'. Please use linalg.qr(A, "
                                    "mode='reduced') if you are going to differentiate through "
                                    "linalg.qr.")
    m, n = a.shape[-2], a.shape[-1]
    if mode == "complete" and m > n:
        raise op_error("linalg.qr", "The QR decomposition is not differentiable when "
                                    "mode='complete' and nrows > ncols.")
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
    "linalg_qr_q", _qr_impl("q"), dtype=float_rule("qr"), shape=_qr_shape("q"),
    vjp=(lambda g, a, out, mode: _qr_grad(g, a, "q", mode),), saves=("self",),
    node="LinalgQrBackward0")
qr_r_p = Primitive(
    "linalg_qr_r", _qr_impl("r"), dtype=float_rule("qr"), shape=_qr_shape("r"),
    vjp=(lambda g, a, out, mode: _qr_grad(g, a, "r", mode),), saves=("self",),
    node="LinalgQrBackward0")


def qr(A, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise op_error("linalg.qr", f"qr received unrecognized mode '{mode}' but expected one of "
                                    f"'reduced' (default), 'r', or 'complete'")
    check("linalg.qr", A, square=False)
    return _qr_result(run(qr_q_p, A, mode=mode), run(qr_r_p, A, mode=mode))


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
        w, v = lapack("linalg.eigh", None, xp.linalg.eigh, a, UPLO=uplo)
        return w if part == "values" else v
    return impl


eigh_values_p = Primitive(
    "linalg_eigh_values", _eigh_impl("values"), dtype=float_rule("eigh"),
    shape=lambda s, uplo: square_rule("eigh")(s)[:-1],
    vjp=(lambda g, a, out, uplo: _eigh_grad(g, a, "values", uplo),), saves=("self",),
    node="LinalgEighBackward0")
eigh_vectors_p = Primitive(
    "linalg_eigh_vectors", _eigh_impl("vectors"), dtype=float_rule("eigh"),
    shape=lambda s, uplo: square_rule("eigh")(s),
    vjp=(lambda g, a, out, uplo: _eigh_grad(g, a, "vectors", uplo),), saves=("self",),
    node="LinalgEighBackward0")


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix, reading the ``UPLO``
    triangle of A."""
    if UPLO not in ("L", "U"):
        raise op_error("linalg.eigh", f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    check("linalg.eigh", A)
    return _eigh_result(run(eigh_values_p, A, uplo=UPLO), run(eigh_vectors_p, A, uplo=UPLO))


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
        rule_check("svd", s, square=False)
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
            return lapack("linalg.svd", None, xp.linalg.svd, a, compute_uv=False)
        u, s, vh = lapack("linalg.svd", None, xp.linalg.svd, a, full_matrices=full_matrices)
        return u if part == "u" else vh
    return impl


svd_u_p = Primitive(
    "linalg_svd_u", _svd_impl("u"), dtype=float_rule("svd"), shape=_svd_shape("u"),
    vjp=(lambda g, a, out, full_matrices: _svd_grad(g, a, "u", full_matrices),),
    saves=("self",), node="LinalgSvdBackward0")
svd_s_p = Primitive(
    "linalg_svd_s", _svd_impl("s"), dtype=float_rule("svd"), shape=_svd_shape("s"),
    vjp=(lambda g, a, out, full_matrices: _svd_grad(g, a, "s", full_matrices),),
    saves=("self",), node="LinalgSvdBackward0")
svd_vh_p = Primitive(
    "linalg_svd_vh", _svd_impl("vh"), dtype=float_rule("svd"), shape=_svd_shape("vh"),
    vjp=(lambda g, a, out, full_matrices: _svd_grad(g, a, "vh", full_matrices),),
    saves=("self",), node="LinalgSvdBackward0")


def svd(A, full_matrices=True):
    """A = U diag(S) Vh, singular values descending."""
    check("linalg.svd", A, square=False)
    fm = bool(full_matrices)
    return _svd_result(run(svd_u_p, A, full_matrices=fm), run(svd_s_p, A, full_matrices=False),
                       run(svd_vh_p, A, full_matrices=fm))


def svdvals(A):
    check("linalg.svd", A, square=False)
    return run(svd_s_p, A, full_matrices=False)


use_svdvals(svdvals)     # ops.norms' spectral matrix norms ('nuc', 2, -2) read it there
