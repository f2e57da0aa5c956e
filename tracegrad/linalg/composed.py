"""The functions of ``tracegrad.linalg`` built on its parts: ``det``/``slogdet`` (whose
gradient comes from the SVD), ``lstsq`` (through a QR), ``matrix_rank`` and
``matrix_power``, with the ``Tensor`` methods ``det``, ``logdet``, ``slogdet`` and
``inverse``."""
import math
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..ops.core import Primitive, op_error
from ..ops.declare import method
from ..ops.elementwise import where
from ..ops.linalg import matmul
from ..ops.more_ops import cumprod
from ..ops.shape_ops import broadcast_to, cat, flip, narrow, squeeze, unsqueeze
from .checks import (
    check, float_rule, lapack, matrix_problem, run, scalar_name, square_rule,
)
from .decomp import eigvalsh, qr, svd, svdvals
from .solve import _mT, inv, solve

_slogdet_result = namedtuple("torch_return_types_linalg_slogdet", ["sign", "logabsdet"])
_lstsq_result = namedtuple("torch_return_types_linalg_lstsq",
                           ["solution", "residuals", "rank", "singular_values"])


def _matrix_of(g):
    return unsqueeze(unsqueeze(g, -1), -1)


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
    "linalg_det", lambda xp, a: xp.linalg.det(a), dtype=float_rule("det"),
    shape=lambda s: square_rule("det")(s)[:-2],
    vjp=(lambda g, a, out: _det_grad(g, a),), saves=("self",),
    node="LinalgDetBackward0")


def _det_grad(g, a):
    if a.shape[-1] == 0:        # det of a 0x0 matrix is 1, a constant: an empty gradient
        return broadcast_to(_matrix_of(g), a.shape)
    return _matrix_of(g) * _cofactor(a)

logabsdet_p = Primitive(
    "linalg_logabsdet", lambda xp, a: xp.linalg.slogdet(a)[1], dtype=float_rule("slogdet"),
    shape=lambda s: square_rule("slogdet")(s)[:-2],
    vjp=(lambda g, a, out: _matrix_of(g) * _mT(inv(a)),), saves=("self",),
    node="LinalgSlogdetBackward0")

# the sign is piecewise constant: its gradient is zero (PyTorch's sign output requires grad)
detsign_p = Primitive(
    "linalg_detsign", lambda xp, a: xp.linalg.slogdet(a)[0], dtype=float_rule("slogdet"),
    shape=lambda s: square_rule("slogdet")(s)[:-2],
    vjp=(lambda g, a, out: broadcast_to(_matrix_of(g) * 0, a.shape),),
    node="LinalgSlogdetBackward0")


def det(A):
    check("linalg.det", A)
    return run(det_p, A)


def slogdet(A):
    """(sign, log|det A|); only ``logabsdet`` has a gradient (sign is piecewise constant)."""
    check("linalg.slogdet", A)
    return _slogdet_result(run(detsign_p, A), run(logabsdet_p, A))


# lstsq, matrix_rank ----------------------------------------------------------------------

def _float_or_double(A):
    if A.dtype not in (dtypes.float32, dtypes.float64):
        return "This function doesn't handle types other than float and double"
    return None


def _check_lstsq(A, B, vector):
    """PyTorch's errors of ``lstsq`` (``vector``: B is a batch of vectors)."""
    if A.ndim < 2:
        problem = "input must have at least 2 dimensions."
    elif B.ndim < 1:
        problem = "other must have at least 1 dimension."
    elif A.dtype is not B.dtype:
        problem = (f"Expected input and other to have the same dtype, but got input's dtype "
                   f"{scalar_name(A.dtype)} and other's dtype {scalar_name(B.dtype)}")
    else:
        rows = B.shape[-1] if vector else B.shape[-2] if B.ndim >= 2 else None
        problem = _float_or_double(A) or (
            None if rows == A.shape[-2] else
            f"input.size(-2) should match other.size({-1 if vector else -2})")
    if problem:
        raise op_error("linalg.lstsq", problem)


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of A X = B (the minimum-norm one when A is wide), through
    a QR of A (or of A^T), so it is differentiable; A must have full rank. The other outputs
    are shaped by ``driver`` as PyTorch's CPU drivers shape them: ``rank`` is empty for
    'gels'; ``singular_values`` are A's for 'gelsd' and 'gelss', else empty; ``residuals``
    (the squared residual of each column of B) are given when A is tall with full rank and
    the driver is not 'gelsy' (the default), else empty."""
    if driver not in (None, "gelsy", "gels", "gelsd", "gelss"):
        raise op_error("linalg.lstsq", "parameter `driver` should be one of (gels, gelsy, "
                                       "gelsd, gelss)")
    vector = B.ndim == A.ndim - 1
    _check_lstsq(A, B, vector)
    b = unsqueeze(B, -1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if m >= n:
        q, r = qr(A)
        x = solve(r, matmul(_mT(q), b))
    else:
        q, r = qr(_mT(A))
        x = matmul(q, solve(_mT(r), b))
    from ..creation import tensor
    from ..ops.reduce_ops import sum

    def empty(dtype=A.dtype):
        return tensor(np.zeros((0,), dtype.np))
    driver = driver or "gelsy"
    rank = matrix_rank(A.detach()) if driver != "gels" else empty(dtypes.int64)
    full = m > n and (driver == "gels" or bool((rank == n).all()))
    residuals = empty()
    if full and driver != "gelsy":
        r = matmul(A, x) - b
        residuals = sum(r * r, -2)
    values = svdvals(A.detach()) if driver in ("gelsd", "gelss") else empty()
    if vector:
        x = squeeze(x, -1)
    return _lstsq_result(x, residuals, rank, values)


def _matrix_rank(xp, a, hermitian):
    """NumPy's ``matrix_rank`` (singular values above s_max * max(m, n) * eps), written out:
    CuPy's takes no ``hermitian`` and no batch."""
    m, n = a.shape[-2:]
    if 0 in (m, n):
        return xp.zeros(a.shape[:-2], dtype=np.int64)
    s = xp.abs(xp.linalg.eigvalsh(a)) if hermitian else xp.linalg.svd(a, compute_uv=False)
    tol = s.max(axis=-1, keepdims=True) * (max(m, n) * np.finfo(s.dtype).eps)
    return (s > tol).sum(axis=-1).astype(np.int64)


matrix_rank_p = Primitive(
    "linalg_matrix_rank", lambda xp, a, hermitian: xp.asarray(
        lapack("linalg.matrix_rank", None, _matrix_rank, xp, a, hermitian)),
    dtype=lambda a, **_: dtypes.int64, shape=lambda s, **_: tuple(s[:-2]), kind="other")


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None):
    """The number of singular values above max(atol, rtol * s_max), as PyTorch's: by default
    rtol = max(m, n) * eps and atol = 0 (NumPy's tolerance); an ``atol`` alone sets rtol to 0;
    the older ``tol`` is ``atol`` with rtol 0. ``atol`` and ``rtol`` may be tensors that
    broadcast against the batch."""
    problem = matrix_problem(A.shape, square=False, name="input") or _float_or_double(A)
    if problem:
        raise op_error("linalg.matrix_rank", problem)
    if tol is not None:
        if atol is not None or rtol is not None:
            raise op_error("linalg.matrix_rank", "tol cannot be given with atol or rtol")
        atol, rtol = tol, 0.0
    if atol is None and rtol is None:
        return run(matrix_rank_p, A, hermitian=bool(hermitian))
    from ..ops.elementwise import abs, maximum
    from ..ops.reduce_ops import amax, sum
    m, n = A.shape[-2], A.shape[-1]
    if rtol is None:
        rtol = 0.0 if _positive(atol) else max(m, n) * float(np.finfo(A.dtype.np).eps)
    A = A.detach()
    s = abs(eigvalsh(A)) if hermitian else svdvals(A)
    if 0 in (m, n):
        return sum(s > 0, -1)
    cut = maximum(rtol * amax(s, -1), atol if atol is not None else 0.0)
    return sum(s > unsqueeze(cut, -1), -1)


def _positive(atol):
    """Whether ``atol`` is given above zero (a tensor ``atol`` is taken as given)."""
    if atol is None:
        return False
    return True if hasattr(atol, "shape") else atol > 0


# top-level names and Tensor methods -------------------------------------------------------

@method("det")
def _det_method(self):
    return det(self)


@method("logdet")
def logdet(self):
    """log det A: NaN where det < 0, as PyTorch's is."""
    check("logdet", self)
    s, l = slogdet(self)
    return where(s < 0, math.nan, l)


@method("slogdet")
def _slogdet_method(self):
    return slogdet(self)


@method("inverse")
def inverse(self):
    return inv(self)


@method("matrix_power")
def matrix_power(A, n):
    problem = matrix_problem(A.shape)
    if problem:
        raise op_error("linalg.matrix_power", problem)
    if n < 0:
        return matrix_power(inv(A), -n)
    if n == 0:      # the identity, whatever A holds (NaN and inf included), batched as A
        from ..creation import eye, ones
        identity = broadcast_to(eye(A.shape[-1], dtype=A.dtype, device=A.device), A.shape)
        # where, not identity + 0 * A: a differentiable result with a zero gradient for A
        # (PyTorch's requires grad) that NaN or inf entries of A cannot reach
        return where(ones(A.shape, dtype=dtypes.bool, device=A.device), identity, A)
    out = A
    for _ in range(n - 1):
        out = matmul(out, A)
    return out
