"""Special functions: the gamma family, erfinv, Bessel functions, the normal distribution's
functions, zeta and the incomplete gamma functions, computed by SciPy's ``scipy.special``
(the ``scipy`` extra; CuPy's ``cupyx.scipy.special`` on a GPU). Without SciPy they raise an
error that says how to install it. ``i0`` alone has NumPy's own ``np.i0``. Where SciPy's
conventions are not PyTorch's, PyTorch's values are put in: its incomplete gammas'
boundary values, polygamma's NaNs at the infinities, and zeta for q > 1e8 (PyTorch's own
sum, where SciPy's takes an asymptotic form).

Each is a primitive whose derivative is PyTorch's formula (``digamma`` for ``lgamma``,
``polygamma(n + 1)`` for ``polygamma(n)``, ``i1`` for ``i0`` ...). Those PyTorch leaves
without a derivative (the Bessel functions of ``torch.special``, zeta in its first
argument, the incomplete gammas in ``a``) have none here either. ``lgamma`` also renders in
C and CUDA (both have it) and fuses; the others are opaque ops ("other") that compiled code
runs as SciPy's calls.
"""
import math

import numpy as np

from .core import Primitive, op_error
from .elementwise import _as_float, exp, log, sign, where
from .rules import broadcast, float_promote, same_shape

_SQRT_PI_2 = math.sqrt(math.pi) / 2
_SQRT_2PI = math.sqrt(2 * math.pi)


def scipy_special(xp, name, op):
    """``scipy.special.<name>`` (``cupyx.scipy.special`` for CuPy arrays), or the error
    naming ``op`` that says how to get it."""
    try:
        if xp is np:
            import scipy.special as sp
        else:
            import cupyx.scipy.special as sp
    except ImportError:
        raise op_error(op, f"{op} needs SciPy's scipy.special: pip install "
                           f"'tracegrad[scipy]'") from None
    fn = getattr(sp, name, None)
    if fn is None:
        raise op_error(op, f"{op}: {sp.__name__}.{name} is not available here")
    return fn


def _in_dtype(xp, x, y):
    """SciPy's result in ``x``'s dtype (some of its loops answer float64 for float32)."""
    return y.astype(x.dtype, copy=False) if y.dtype != x.dtype else y


def _unary(name, scipy_name, vjp, saves=("self",), c=None, method=True, inplace=True, doc="",
           fix=None):
    """A float unary primitive computed by ``scipy.special.<scipy_name>``; with ``method``,
    a public function (``tracegrad.<name>``) and ``Tensor`` methods too. ``fix(xp, x, y)``
    corrects SciPy's result where its convention is not PyTorch's."""
    def impl(xp, x):
        x = _as_float(x)
        y = xp.asarray(scipy_special(xp, scipy_name, name)(x))
        return _in_dtype(xp, x, y if fix is None else fix(xp, x, y))
    helper = f"_{name}"
    impl.__name__ = impl.__qualname__ = helper      # generated modules import it by name
    globals()[helper] = impl
    return Primitive(name, impl, dtype=float_promote, shape=same_shape,
                     vjp=None if vjp is None else (vjp,), saves=saves,
                     np=f"{helper}(np, {{self}})", c=c,
                     kind="elementwise" if c else "other",     # fused where C has it
                     helpers={helper: impl}, public=method, method=method,
                     inplace_method=f"{name}_" if inplace and method else None, doc=doc)


def _function(prim, name):
    """``tracegrad.special.<name>``: ``prim`` over one tensor."""
    def fn(input):
        from .core import bind
        return bind(prim, input)
    fn.__name__ = fn.__qualname__ = name
    return fn


lgamma_p = _unary("lgamma", "gammaln", lambda g, x, out: g * digamma(x),
                  c="lgamma({self})", doc="log |Gamma(x)|.",
                  # SciPy's gammaln(-inf) is -inf; PyTorch's (and C's lgamma) is +inf
                  fix=lambda xp, x, y: xp.where(xp.isneginf(x), xp.inf, y))
digamma_p = _unary("digamma", "psi", lambda g, x, out: g * polygamma(1, x),
                   doc="The logarithmic derivative of Gamma (psi); -inf at 0, as PyTorch.")
erfinv_p = _unary("erfinv", "erfinv", lambda g, x, out: g * _SQRT_PI_2 * exp(out * out),
                  saves=("result",), doc="The inverse of erf, on (-1, 1).")


def _i0_impl(xp, x):
    x = _as_float(x)
    if xp is np:
        return np.i0(x).astype(x.dtype, copy=False)
    return scipy_special(xp, "i0", "i0")(x)


i0_p = Primitive("i0", _i0_impl, dtype=float_promote, shape=same_shape,
                 vjp=(lambda g, x, out: g * special_i1(x),), saves=("self",),
                 np="_i0(np, {self})", kind="other", helpers={"_i0": _i0_impl},
                 public="i0", method=True, inplace_method="i0_",
                 doc="The modified Bessel function of the first kind, order 0.")
special_i0e_p = _unary("special_i0e", "i0e",
                       lambda g, x, out: g * (special_i1e(x) - sign(x) * out),
                       saves=("self", "result"), method=False, inplace=False,
                       doc="i0(x) * exp(-|x|).")
special_i1_p = _unary("special_i1", "i1",
                      lambda g, x, out: g * where(x == 0, 0.5, i0(x) - out / where(x == 0, 1.0,
                                                                                   x)),
                      saves=("self", "result"), method=False, inplace=False,
                      doc="The modified Bessel function of the first kind, order 1.")
special_i1e_p = _unary(
    "special_i1e", "i1e",
    lambda g, x, out: g * where(x == 0, 0.5, special_i0e(x) - out * (sign(x) + 1 / where(
        x == 0, 1.0, x))),
    saves=("self", "result"), method=False, inplace=False, doc="i1(x) * exp(-|x|).")
special_ndtri_p = _unary("special_ndtri", "ndtri",
                         lambda g, x, out: g * _SQRT_2PI * exp(out * out * 0.5),
                         saves=("result",), method=False, inplace=False,
                         doc="The inverse of the standard normal CDF.")
special_log_ndtr_p = _unary(
    "special_log_ndtr", "log_ndtr",
    lambda g, x, out: g * exp(-(x * x) * 0.5 - out) / _SQRT_2PI,
    saves=("self", "result"), method=False, inplace=False,
    doc="log of the standard normal CDF, accurate far in the left tail.")
special_erfcx_p = _unary("special_erfcx", "erfcx",
                         lambda g, x, out: g * (2 * x * out - 2 / math.sqrt(math.pi)),
                         saves=("self", "result"), method=False, inplace=False,
                         doc="exp(x^2) * erfc(x).")
BESSEL = {}
for _name, _scipy in (("bessel_j0", "j0"), ("bessel_j1", "j1"), ("bessel_y0", "y0"),
                      ("bessel_y1", "y1"), ("modified_bessel_i0", "i0"),
                      ("modified_bessel_i1", "i1"), ("modified_bessel_k0", "k0"),
                      ("modified_bessel_k1", "k1"), ("scaled_modified_bessel_k0", "k0e"),
                      ("scaled_modified_bessel_k1", "k1e")):
    BESSEL[_name] = _function(
        _unary(f"special_{_name}", _scipy, None, saves=(), method=False, inplace=False,
               doc=f"scipy.special.{_scipy}; no derivative, as in PyTorch."), _name)


def _entr_impl(xp, x):
    x = _as_float(x)
    with np.errstate(all="ignore"):
        y = -x * xp.log(xp.where(x > 0, x, 1))
    return xp.where(x > 0, y, xp.where(x == 0, 0, xp.where(x < 0, -xp.inf, x))).astype(
        x.dtype, copy=False)


special_entr_p = Primitive(
    "special_entr", _entr_impl, dtype=float_promote, shape=same_shape,
    vjp=(lambda g, x, out: g * -(log(x) + 1),), saves=("self",), np="_entr(np, {self})",
    kind="other", helpers={"_entr": _entr_impl})


def _polygamma_impl(xp, x, n):
    x = _as_float(x)
    if n == 0:
        y = scipy_special(xp, "psi", "polygamma")(x)
    else:
        # CuPy's polygamma takes n as an array (it calls where(n == 0, ...))
        y = scipy_special(xp, "polygamma", "polygamma")(n if xp is np else xp.asarray(n), x)
    return _in_dtype(xp, x, _polygamma_infinities(xp, x, xp.asarray(y), n))


def _polygamma_infinities(xp, x, y, n):
    """PyTorch's values at the infinities where SciPy's differ: NaN at +inf for n >= 2 (its
    ``zeta(n + 1, inf)`` meets ``0 * inf``) and at -inf for n = 1 (its reflection takes
    ``sin(pi * inf)``); SciPy says -+0 and +inf."""
    if n >= 2:
        return xp.where(xp.isposinf(x), xp.nan, y)
    if n == 1:
        return xp.where(xp.isneginf(x), xp.nan, y)
    return y


polygamma_p = Primitive(
    "polygamma", _polygamma_impl, args=("self",), dtype=lambda x, n: float_promote(x),
    shape=lambda s, n: tuple(s), vjp=(lambda g, x, out, n: g * polygamma(n + 1, x),),
    saves=("self",), kind="other")


def polygamma(n, input):
    """The n-th derivative of digamma (n >= 0), as ``torch.polygamma(n, input)``."""
    from .core import bind
    if not isinstance(n, int) or n < 0:
        raise op_error("polygamma", f"polygamma(n, x) does not support negative n. got {n}")
    return bind(polygamma_p, input, n=n)


def _zeta_impl(xp, x, q):
    """SciPy's Hurwitz zeta, but for q > 1e8, where SciPy's Cephes takes an asymptotic
    form that PyTorch's lacks: there PyTorch's own sum (``_zeta_large_q``)."""
    x, q = _as_float(x), _as_float(q)
    y = xp.asarray(scipy_special(xp, "zeta", "special.zeta")(x, q))
    large = (q > 1e8) & (x > 1)
    if not bool(xp.any(large)):
        return y
    wide_x, wide_q = (xp.broadcast_to(v, y.shape).astype(np.float64) for v in (x, q))
    with np.errstate(all="ignore"):
        own = _zeta_large_q(xp, xp.where(large, wide_x, 2.0), xp.where(large, wide_q, 1e9))
    return xp.where(large, own, y).astype(y.dtype, copy=False)


_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)
_MACHEP = 1.11022302462515654042e-16


def _zeta_large_q(xp, x, q):
    """PyTorch's ``zeta`` (Cephes' Euler-Maclaurin sum, in float64) for q > 9: nine terms
    of the sum, then up to twelve correction terms, each element stopping where its next
    term is below MACHEP relative to its sum. Its NaNs are kept: where every term
    underflows and the correction's product of x + k overflows (x ~ 1e13 and more) it
    meets 0 * inf; so does q = inf."""
    s, a, b = q ** -x, q, xp.zeros_like(q)
    done, result = xp.zeros(q.shape, dtype=bool), xp.zeros_like(q)
    for _ in range(9):
        a = a + 1
        b = a ** -x
        s = xp.where(done, s, s + b)
        converged = ~done & (-_MACHEP * s < b) & (b < _MACHEP * s)
        result, done = xp.where(converged, s, result), done | converged
    w = a
    s = s + b * w / (x - 1) - 0.5 * b
    a, k = xp.ones_like(q), 0.0
    for coefficient in _ZETA_A:
        a = a * (x + k)
        b = b / w
        term = a * b / coefficient
        s = s + term
        converged = ~done & (xp.abs(term / s) < _MACHEP)
        result, done = xp.where(converged, s, result), done | converged
        a = a * (x + k + 1)
        b = b / w
        k += 2.0
    return xp.where(done, result, s)


special_zeta_p = Primitive(
    "special_zeta", _zeta_impl, args=("self", "other"), dtype=float_promote, shape=broadcast,
    vjp=(None, lambda g, x, q, out: g * -x * special_zeta(x + 1, q)),
    saves=("self", "other"), kind="other")


def _gammainc_grad(g, a, x, upper):
    """d/dx of the regularised lower (upper) incomplete gamma: +-x^(a-1) e^-x / Gamma(a)."""
    d = exp((a - 1) * log(x) - x - lgamma(a))
    return g * (-d if upper else d)


def _incomplete_gamma_edges(xp, a, x, y, upper):
    """PyTorch's boundary values, tested in its order before NaN reaches the series: NaN
    for a < 0 or x < 0; at a = 0, P = 1 for x > 0 (else NaN); at x = 0, P = 0; at
    a = inf, P = 0 (NaN if x = inf too); at x = inf, P = 1. So P(inf, NaN) = 0 and
    P(NaN, inf) = 1 where SciPy says NaN. Q = 1 - P at each of them."""
    def p(value):
        return 1 - value if upper else value
    nan = xp.nan
    return xp.where((x < 0) | (a < 0), nan, xp.where(
        a == 0, xp.where(x > 0, p(1.0), nan), xp.where(
            x == 0, p(0.0), xp.where(
                xp.isinf(a), xp.where(xp.isinf(x), nan, p(0.0)), xp.where(
                    xp.isinf(x), p(1.0), y)))))


def _incomplete_gamma_impl(name, upper):
    def impl(xp, a, x):
        a, x = _as_float(a), _as_float(x)
        y = xp.asarray(scipy_special(xp, name, f"special.{name}")(a, x))
        return _incomplete_gamma_edges(xp, a, x, y, upper).astype(y.dtype, copy=False)
    return impl


def _incomplete_gamma_p(name, upper):
    """The regularised lower (upper) incomplete gamma P(a, x) (Q(a, x)): SciPy's
    ``gammainc`` (``gammaincc``) inside PyTorch's boundary values; differentiable in x
    only, as in PyTorch."""
    return Primitive(
        f"special_{name}", _incomplete_gamma_impl(name, upper),
        args=("self", "other"), dtype=float_promote, shape=broadcast,
        vjp=(None, lambda g, a, x, out: _gammainc_grad(g, a, x, upper)),
        saves=("self", "other"), kind="other")


special_gammainc_p = _incomplete_gamma_p("gammainc", upper=False)
special_gammaincc_p = _incomplete_gamma_p("gammaincc", upper=True)


def _binary_fn(prim, name):
    def fn(input, other):
        from ..tensor import Tensor
        from .core import bind
        from .math_ops import _operands
        if not isinstance(input, Tensor) or not isinstance(other, Tensor):
            input, other = _operands(input, other)
        return bind(prim, input, other)
    fn.__name__ = name
    return fn


special_zeta = _binary_fn(special_zeta_p, "zeta")
special_gammainc = _binary_fn(special_gammainc_p, "gammainc")
special_gammaincc = _binary_fn(special_gammaincc_p, "gammaincc")
special_i0e = _function(special_i0e_p, "i0e")
special_i1 = _function(special_i1_p, "i1")
special_i1e = _function(special_i1e_p, "i1e")
special_ndtri = _function(special_ndtri_p, "ndtri")
special_log_ndtr = _function(special_log_ndtr_p, "log_ndtr")
special_erfcx = _function(special_erfcx_p, "erfcx")
special_entr = _function(special_entr_p, "entr")


def _install_polygamma():
    from ..tensor import Tensor

    def method(self, n):
        return polygamma(n, self)

    def method_(self, n):
        return self.copy_(polygamma(n, self))
    Tensor.polygamma, Tensor.polygamma_ = method, method_


_install_polygamma()

__all__ = ["lgamma", "digamma", "erfinv", "i0", "polygamma"]
