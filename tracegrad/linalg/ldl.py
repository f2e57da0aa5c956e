"""The LDL factorisation of symmetric matrices and Householder products:
``linalg.ldl_factor``/``ldl_factor_ex``/``ldl_solve``, ``linalg.householder_product``
(``torch.orgqr``), ``torch.geqrf`` and ``torch.ormqr``, with their ``Tensor`` methods.

LDL: LAPACK's Bunch-Kaufman factorisation (``sytrf``, lower triangle; SciPy's LAPACK
bindings, one call per matrix of the batch, as PyTorch's CPU kernel loops), so ``LD`` and the
pivots are LAPACK's, as PyTorch returns them: ``LD`` holds L below the diagonal and the 1x1 or
2x2 blocks of D on and next to it (its upper triangle zero), the pivots are 1-based int32 rows,
negative where a 2x2 block starts (``sytrf``'s convention). ``ldl_solve`` is ``sytrs``. Real
matrices only, so ``hermitian=True`` changes nothing. As in PyTorch neither is differentiable:
their results require grad when an input does, and backward raises PyTorch's error.

Householder: the i-th reflector is H_i = I - tau_i v_i v_i^T with v_i = (0, ..., 0, 1,
A[i+1:, i]) (LAPACK's packed form, what ``geqrf`` returns). ``householder_product`` (the
first n columns of H_1 ... H_k) and ``ormqr`` (op(Q) C or C op(Q)) are composites that apply
the k reflectors one after another, each a batched rank-1 update, as LAPACK's ``orgqr`` and
``ormqr`` do; they are differentiable again in both A and tau (PyTorch's are differentiable).
``geqrf`` is NumPy's QR in raw mode (LAPACK's ``geqrf``); not differentiable, as in PyTorch.
"""
import math
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..ops.core import Primitive, bind, op_error, user_site
from ..ops.declare import method
from ..ops.linalg import matmul
from ..ops.more_ops import tril
from ..ops.shape_ops import narrow, unsqueeze
from .checks import (
    LinAlgError, LinalgError, dtype_problem, matrix_problem, run, scalar_name,
    same_dtype_problem,
)
from .solve import _mT

_ldl_factor_result = namedtuple("torch_return_types_linalg_ldl_factor", ["LD", "pivots"])
_ldl_factor_ex_result = namedtuple("torch_return_types_linalg_ldl_factor_ex",
                                   ["LD", "pivots", "info"])
_geqrf_result = namedtuple("torch_return_types_geqrf", ["a", "tau"])


def _no_derivative(message, exc=RuntimeError):
    """A VJP rule for an op PyTorch does not differentiate: backward raises its error."""
    def rule(g, *_, **__):
        raise exc(message)
    return rule


def _checked(prim, *args, **params):
    """``prim``'s shape and dtype rules on ``args``, their error (PyTorch's words, which name
    the function) raised at the user's line, before anything runs."""
    try:
        prim.shape_dtype(*args, **params)
    except (RuntimeError, IndexError, NotImplementedError) as e:
        site = user_site()
        raise type(e)(str(e) + (f"\n  (at {site})" if site else "")) from None


def _host(xp, a):
    return a if xp is np else xp.asnumpy(a)


def _device(xp, a):
    return a if xp is np else xp.asarray(a)


# LDL ----------------------------------------------------------------------------------------

def _lapack(name, a):
    """SciPy's LAPACK routine ``name`` for ``a``'s dtype (``dsytrf`` for float64)."""
    try:
        from scipy.linalg import lapack
    except ImportError:
        raise ImportError(f"LAPACK's {name} comes from SciPy, which is not installed "
                          f"(pip install scipy)") from None
    return lapack.get_lapack_funcs(name, (a,))


def _sytrf(xp, a):
    """``(LD, pivots, info)`` of each symmetric matrix of the batch (its lower triangle)."""
    host = _host(xp, a)
    n = host.shape[-1]
    flat = host.reshape((math.prod(host.shape[:-2]), n, n))    # (-1: ambiguous when empty)
    ld, piv = np.zeros_like(flat), np.zeros(flat.shape[:2], np.int32)
    info = np.zeros(flat.shape[0], np.int32)
    if n:
        sytrf = _lapack("sytrf", flat)
        for b, m in enumerate(flat):
            f, p, i = sytrf(m, lower=1)
            ld[b], piv[b], info[b] = np.tril(f), p, i
    return tuple(_device(xp, x.reshape(host.shape[:-2] + x.shape[1:]))
                 for x in (ld, piv, info))


def _ldl_shape(s, **_):
    if len(s) < 2:
        raise RuntimeError("torch.linalg.ldl_factor_ex: The input tensor A must have at least "
                           "2 dimensions.")
    if s[-1] != s[-2]:
        raise RuntimeError(f"torch.linalg.ldl_factor_ex: A must be batches of square "
                           f"matrices, but they are {s[-2]} by {s[-1]} matrices")
    return tuple(s)


def _ldl_dtype(a, **_):
    problem = dtype_problem(a.dtype, lapack=False)
    if problem:
        raise RuntimeError(f"torch.linalg.ldl_factor_ex: {problem}")
    if a.dtype is dtypes.float16:
        raise NotImplementedError("\"ldl_factor_kernel_cpu\" not implemented for 'Half'")
    return a.dtype


ldl_factor_p = Primitive(
    "linalg_ldl_factor", lambda xp, a, hermitian: _sytrf(xp, a)[0],
    dtype=_ldl_dtype, shape=_ldl_shape,
    vjp=(_no_derivative("derivative for aten::linalg_ldl_factor_ex is not implemented"),),
    kind="other", node="LinalgLdlFactorExBackward0")
ldl_pivots_p = Primitive(
    "linalg_ldl_pivots", lambda xp, a, hermitian: _sytrf(xp, a)[1],
    dtype=lambda a, **_: dtypes.int32, shape=lambda s, **_: _ldl_shape(s)[:-1], kind="other")
ldl_info_p = Primitive(
    "linalg_ldl_info", lambda xp, a, hermitian: _sytrf(xp, a)[2],
    dtype=lambda a, **_: dtypes.int32, shape=lambda s, **_: _ldl_shape(s)[:-2], kind="other")


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """``(LD, pivots, info)``: LAPACK's compact LDL^T factor of the symmetric A (its lower
    triangle is read), the Bunch-Kaufman pivots, and 0 or the 1-based index of a zero
    diagonal entry of D (the factor exists; solves with it do not)."""
    _checked(ldl_factor_p, A, hermitian=bool(hermitian))
    info = bind(ldl_info_p, A, hermitian=bool(hermitian))
    if check_errors and bool((info != 0).any()):
        first = int(info[info != 0][0])
        raise op_error("torch.linalg.ldl_factor_ex", f"The factorization could not be "
                       f"completed because the input is singular (D[{first}, {first}] is "
                       f"exactly zero)", LinAlgError)
    return _ldl_factor_ex_result(bind(ldl_factor_p, A, hermitian=bool(hermitian)),
                                 bind(ldl_pivots_p, A, hermitian=bool(hermitian)), info)


def ldl_factor(A, *, hermitian=False):
    """``(LD, pivots)``; a singular A (a zero in D) raises ``LinAlgError``."""
    LD, pivots, info = ldl_factor_ex(A, hermitian=hermitian)
    if bool((info != 0).any()):
        first = int(info[info != 0][0])
        raise op_error("torch.linalg.ldl_factor", f"The factorization could not be completed "
                       f"because the input is singular (D[{first}, {first}] is exactly zero)",
                       LinAlgError)
    return _ldl_factor_result(LD, pivots)


def _sytrs(xp, ld, pivots, b, hermitian):
    """X with A X = B for each matrix of the (broadcast) batch, from A's LDL factor."""
    ld, pivots, b = _host(xp, ld), _host(xp, pivots), _host(xp, b)
    batch = np.broadcast_shapes(ld.shape[:-2], pivots.shape[:-1], b.shape[:-2])
    n, k = b.shape[-2:]
    count = math.prod(batch)
    ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape(count, n, n)
    piv = np.broadcast_to(pivots, batch + pivots.shape[-1:]).reshape(count, n).astype(np.int32)
    rhs = np.broadcast_to(b, batch + (n, k)).reshape(count, n, k)
    out = np.empty(rhs.shape, b.dtype)
    if piv.size and not ((np.abs(piv) >= 1) & (np.abs(piv) <= n)).all():
        # LAPACK trusts them: a pivot out of range would read and write outside the arrays
        raise LinalgError("torch.linalg.ldl_solve", f"pivots must be in [-{n}, -1] or [1, {n}] "
                                                    f"(ldl_factor's)")
    if out.size:
        sytrs = _lapack("sytrs", ld)
        for i in range(out.shape[0]):
            x, info = sytrs(ld[i], piv[i], rhs[i], lower=1)
            if info < 0:
                raise LinalgError("torch.linalg.ldl_solve", f"Argument {-info} has an illegal "
                                                            f"value")
            out[i] = x
    return _device(xp, out.reshape(batch + (n, k)))


def _ldl_solve_shape(sld, sp, sb, **_):
    if len(sb) < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(len(sb), 1)}, {max(len(sb), 1) - 1}], but got -2)")
    problem = matrix_problem(sld)
    if problem:
        raise RuntimeError(f"torch.linalg.ldl_solve: {problem}")
    if len(sp) < 1 or sp[-1] != sld[-1]:
        raise RuntimeError(f"torch.linalg.ldl_solve: Expected LD.shape[:-1] and "
                           f"pivots.shape to be the same, but got pivots with shape "
                           f"{list(sp)} instead")
    if sb[-2] != sld[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for torch.linalg.ldl_solve: each A "
                           f"matrix is {sld[-2]} by {sld[-1]} but each b matrix is {sb[-2]} "
                           f"by {sb[-1]}")
    try:
        batch = np.broadcast_shapes(tuple(sld[:-2]), tuple(sp[:-1]), tuple(sb[:-2]))
    except ValueError:
        raise RuntimeError(f"torch.linalg.ldl_solve: the batch dimensions of LD "
                           f"{list(sld[:-2])}, pivots {list(sp[:-1])} and B {list(sb[:-2])} "
                           f"do not broadcast") from None
    return tuple(batch) + tuple(sb[-2:])


def _ldl_solve_dtype(ld, pivots, b, **_):
    if b.dtype is not ld.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{scalar_name(b.dtype)} and A of type {scalar_name(ld.dtype)} "
                           f"instead.")
    if pivots.dtype not in (dtypes.int32, dtypes.int64):
        raise RuntimeError(f"torch.linalg.ldl_solve: Expected pivots to be integers. Got "
                           f"{scalar_name(pivots.dtype)}")
    return ld.dtype


ldl_solve_p = Primitive(
    "linalg_ldl_solve", _sytrs, args=("LD", "pivots", "B"), dtype=_ldl_solve_dtype,
    shape=_ldl_solve_shape,
    vjp=(_no_derivative("derivative for aten::linalg_ldl_solve is not implemented"), None,
         _no_derivative("derivative for aten::linalg_ldl_solve is not implemented")),
    kind="other", node="LinalgLdlSolveBackward0")


def ldl_solve(LD, pivots, B, *, hermitian=False):
    """X with A X = B, from ``ldl_factor``'s ``(LD, pivots)`` of A (batches broadcast)."""
    _checked(ldl_solve_p, LD, pivots, B, hermitian=bool(hermitian))
    return run(ldl_solve_p, LD, pivots, B, hermitian=bool(hermitian))


# Householder products -----------------------------------------------------------------------

def _reflectors(A, k):
    """V (*, m, k): the reflectors' vectors, ones on the diagonal, A's entries below it."""
    from ..creation import eye
    part = narrow(A, -1, 0, k)
    return tril(part, -1) + eye(A.shape[-2], k, dtype=A.dtype, device=A.device)


def _apply(C, V, tau, order, left):
    """C with the reflectors ``order`` applied: H_i C = C - tau_i v_i (v_i^T C) on the left,
    C H_i = C - (C v_i) tau_i v_i^T on the right (k batched rank-1 updates, as LAPACK)."""
    for i in order:
        v = narrow(V, -1, i, 1)                     # (*, m, 1)
        t = unsqueeze(narrow(tau, -1, i, 1), -1)    # (*, 1, 1)
        if left:
            C = C - matmul(v * t, matmul(_mT(v), C))
        else:
            C = C - matmul(matmul(C, v) * t, _mT(v))
    return C


def _check_householder(op, input, tau):
    if input.ndim < 2:
        problem = "input must have at least 2 dimensions."
    elif input.shape[-2] < input.shape[-1]:
        problem = "input.shape[-2] must be greater than or equal to input.shape[-1]"
    elif input.shape[-1] < tau.shape[-1] if tau.ndim else False:
        problem = "input.shape[-1] must be greater than or equal to tau.shape[-1]"
    elif input.ndim - tau.ndim != 1:
        problem = (f"Expected tau to have one dimension less than input, but got tau.ndim "
                   f"equal to {tau.ndim} and input.ndim is equal to {input.ndim}")
    elif tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        problem = (f"Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                   f"{list(tau.shape[:-1])}")
    elif tau.dtype is not input.dtype:
        problem = (f"tau dtype {scalar_name(tau.dtype)} does not match input dtype "
                   f"{scalar_name(input.dtype)}")
    else:
        problem = dtype_problem(input.dtype)
    if problem:
        raise op_error(op, problem)


def householder_product(A, tau):
    """The first n columns of H_1 H_2 ... H_k (A is (*, m, n), m >= n >= k, tau (*, k)):
    ``orgqr``, the Q of a QR from ``geqrf``'s packed output."""
    _check_householder("torch.linalg.householder_product", A, tau)
    from ..creation import eye
    from ..ops.shape_ops import broadcast_to
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    Q = broadcast_to(eye(m, n, dtype=A.dtype, device=A.device), A.shape)
    if k == 0:      # the identity's columns; where, so that A's gradient is zero, not NaN
        from ..creation import ones
        from ..ops.elementwise import where
        return where(ones(A.shape, dtype=dtypes.bool, device=A.device), Q, A)
    return _apply(Q, _reflectors(A, k), tau, range(k - 1, -1, -1), left=True)


@method
def orgqr(input, input2):
    """``torch.orgqr``: ``linalg.householder_product``."""
    return householder_product(input, input2)


@method
def ormqr(input, input2, input3, left=True, transpose=False):
    """op(Q) C (C op(Q) with ``left=False``; op: Q^T with ``transpose``), Q = H_1 ... H_k
    the product of the reflectors packed in ``input`` and ``input2`` (tau), C = ``input3``;
    without forming Q."""
    tau, C = input2, input3
    op = "torch.ormqr"
    if input.ndim < 2:
        raise op_error(op, "input must have at least 2 dimensions.")
    if C.ndim < 2:
        raise op_error(op, "other must have at least 2 dimensions.")
    side = -2 if left else -1
    if C.shape[side] != input.shape[-2]:
        raise op_error(op, f"other.shape[{side}] must be equal to input.shape[-2]")
    if tau.ndim < 1 or tau.shape[-1] != min(C.shape[side], input.shape[-1]):
        raise op_error(op, f"tau.shape[-1] must be equal to min(other.shape[{side}], "
                           f"input.shape[-1])")
    if input.ndim - tau.ndim != 1 or C.ndim != input.ndim:
        raise op_error(op, f"Expected tau to have one dimension less than input and other to "
                           f"have as many, but got input.ndim {input.ndim}, tau.ndim "
                           f"{tau.ndim} and other.ndim {C.ndim}")
    problem = dtype_problem(input.dtype) or same_dtype_problem(input.dtype, tau.dtype) or \
        same_dtype_problem(input.dtype, C.dtype)
    if problem:
        raise op_error(op, problem)
    k = tau.shape[-1]
    forward = range(k)                 # H_1 first: Q^T C = H_k ... H_1 C, C Q = C H_1 ... H_k
    backward = range(k - 1, -1, -1)    # H_k first: Q C = H_1 ... H_k C, C Q^T = C H_k ... H_1
    order = forward if left == bool(transpose) else backward
    return _apply(C, _reflectors(input, k), tau, order, left)


def _geqrf(xp, a):
    """LAPACK geqrf's packed output (R on and above the diagonal, the reflectors below) and
    tau, of each matrix of the batch (NumPy's raw QR is the transpose of LAPACK's array)."""
    host = _host(xp, a)
    m, n = host.shape[-2:]
    if 0 in host.shape:
        return _device(xp, host.copy()), _device(xp, np.zeros(host.shape[:-2] + (min(m, n),),
                                                               host.dtype))
    try:
        geqrf = _lapack("geqrf", host)
        flat = host.reshape(-1, m, n)
        parts = [geqrf(x)[:2] for x in flat]
        h = np.stack([p[0] for p in parts]).reshape(host.shape)
        tau = np.stack([p[1] for p in parts]).reshape(host.shape[:-2] + (min(m, n),))
    except ImportError:          # without SciPy: NumPy's LAPACK (float64 arithmetic)
        h, tau = np.linalg.qr(host, mode="raw")
        h = np.swapaxes(h, -1, -2)
    return _device(xp, h.astype(host.dtype)), _device(xp, tau.astype(host.dtype))


def _geqrf_shape(s):
    if len(s) < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    return tuple(s)


_geqrf_no_derivative = _no_derivative("the derivative for 'geqrf' is not implemented.",
                                      NotImplementedError)
geqrf_a_p = Primitive(
    "geqrf_a", lambda xp, a: _geqrf(xp, a)[0], dtype=lambda a: a.dtype, shape=_geqrf_shape,
    vjp=(_geqrf_no_derivative,), kind="other", node="GeqrfBackward0")
geqrf_tau_p = Primitive(
    "geqrf_tau", lambda xp, a: _geqrf(xp, a)[1], dtype=lambda a: a.dtype,
    shape=lambda s: _geqrf_shape(s)[:-2] + (min(s[-2:]),),
    vjp=(_geqrf_no_derivative,), kind="other", node="GeqrfBackward0")


@method
def geqrf(input):
    """``(a, tau)``: LAPACK's QR in packed form (``householder_product(a, tau)`` is Q, the
    upper triangle of ``a`` is R)."""
    _checked(geqrf_a_p, input)
    problem = dtype_problem(input.dtype)
    if problem:
        raise op_error("torch.geqrf", problem)
    return _geqrf_result(bind(geqrf_a_p, input), bind(geqrf_tau_p, input))



__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve", "householder_product", "LinAlgError"]
_LEGACY = {"orgqr": orgqr, "ormqr": ormqr, "geqrf": geqrf}
