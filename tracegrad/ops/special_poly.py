"""``torch.special``'s orthogonal polynomials, ``airy_ai`` and ``spherical_bessel_j0``.

Each polynomial ``p(input, n)`` is one primitive of two tensors, computed as PyTorch's
kernel (``aten/src/ATen/native/Math.h``) computes it, vectorised over the array:

- ``input`` and ``n`` are promoted together (integers to the default float; float16 is
  refused, as PyTorch's kernels refuse it) and broadcast; each ``n`` is then truncated to
  an integer, NaN, +-inf and values beyond int64 counting as negative (x86's cast);
- a negative degree gives 0; then PyTorch's shortcuts, in its order: the values at the
  ends of the interval (x = +-1; x = 0 and 1 for the shifted Chebyshev polynomials;
  x = 0 for Laguerre), the trigonometric forms of the Chebyshev polynomials for a large
  degree inside the interval, NaN for Hermite degrees past 128 (float32) or 512 (float64);
- every other element runs the three-term recurrence, looping over the degree up to the
  largest one, each element keeping the value at its own degree.

The arithmetic is PyTorch's, in the result's dtype, the recurrences' steps of T, U, V, W
and the Hermite polynomials rounded once as PyTorch's build fuses them (``_fma``), so
float32 results agree to rounding. One difference: at x = NaN with n >= 2, PyTorch's kernels
other than T's and the Hermite ones return an uninitialised variable (their loop stops
before its first step: NaN, inf or a denormal, by what the stack held); here it is NaN.

None of them has a derivative in PyTorch, whose results do not require grad: here they
have none either (``vjp=None``), so results never require grad and backward never
reaches them.

``airy_ai`` is PyTorch's kernel evaluated in float64 (``special_airy``; NaN at +-inf as
PyTorch's), on a GPU too. ``spherical_bessel_j0`` is PyTorch's own formula in array
operations (CuPy has no ``spherical_jn`` either).
"""
import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .core import Primitive, bind, op_error
from .elementwise import _as_float
from .rules import broadcast, float_promote, same_shape
from .special_airy import airy_ai_impl

_HERMITE_LIMIT = {np.dtype(np.float32): 128, np.dtype(np.float64): 512}


def _degree(xp, n):
    """PyTorch's ``static_cast<int64_t>(n)``: truncation toward zero; NaN, +-inf and
    values beyond int64 become INT64_MIN on x86, which the ``n < 0`` rule makes 0."""
    return xp.where(xp.isfinite(n) & (xp.abs(n) < 2.0 ** 63), n, -1).astype(xp.int64)


def _recurrence(xp, k, p1, step):
    """P at each element's degree k >= 0: 1 at 0, ``p1`` at 1, and
    P_m = step(m, P_{m-1}, P_{m-2}) above. Like PyTorch's loop, it stops once every element
    still climbing is NaN (|x| > 1 overflows to inf, then to inf - inf)."""
    p, q = xp.ones_like(p1), p1
    out = xp.where(k == 0, p, q)
    for m in range(2, int(k.max()) + 1 if k.size else 0):
        p, q = q, step(m, q, p)
        out = xp.where(k == m, q, out)
        if m % 64 == 0 and not bool(xp.any((k > m) & ~xp.isnan(q))):
            return xp.where(k > m, q, out)
    return out


def _fma(a, b, c):
    """``a * b + c`` rounded once, as PyTorch's CPU build contracts its recurrences' steps
    (``(x + x) * q - p``, ``x * q - k * p``) into fused multiply-adds: for float32 the
    product and sum in float64 (the product exact), then rounded; float64 as written."""
    if a.dtype != np.float32:
        return a * b + c
    wide = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
    return wide.astype(np.float32)


def _chebyshev(kind, trig_above, shifted=False):
    """The rules of the Chebyshev polynomial T, U, V or W at y = x (or y = 2x - 1, shifted):
    its first degree, its recurrence, the values at y = +-1 and, for degrees above
    ``trig_above`` inside (-1, 1), its trigonometric form (``_trig_form``)."""
    def rules(xp, x, k, kf):
        y = x + x - 1 if shifted else x

        def ends(at_1, at_minus_1):     # the value at y = 1, or at y = -1 (+-, by parity)
            return xp.where(y > 0, at_1, xp.where(k % 2 == 0, at_minus_1, -at_minus_1))
        p1, end = {"t": (y, ends(1, 1)), "u": (y + y, ends(kf + 1, kf + 1)),
                   "v": (y + y - 1, ends(1, 2 * kf + 1)),
                   "w": (y + y + 1, ends(2 * kf + 1, 1))}[kind]
        at_end = (x == 1) | (x == 0) if shifted else xp.abs(x) == 1
        inside = (k > trig_above) & (xp.abs(y) < 1)
        trig = _trig_form(xp, kind, x, k, shifted, end)
        return p1, lambda m, q, p: _fma(y + y, q, -p), [(at_end, end), (inside, trig)]
    return rules


def _trig_form(xp, kind, x, k, shifted, end):
    """T, U, V or W of degree k at y = cos(theta) in (-1, 1) by its trigonometric form,
    with its fallback where the form would divide by 0 (PyTorch's shifted W falls back to
    +-1 where W's own fallback is its value at the nearer end). The fallback is chosen
    as PyTorch chooses it, in the input's dtype (float32's cos(theta / 2) is 1 within
    3e-4 of y = 1); the form is evaluated in float64 from the float64 y, then rounded:
    near a root it cancels, and float32's rounding of y and theta, times the degree,
    would leave a few ulps of theta in the result."""
    narrow = xp.arccos(x + x - 1 if shifted else x)
    wide = x.astype(np.float64)
    y = wide + wide - 1 if shifted else wide
    kf = k.astype(np.float64)
    theta = xp.arccos(y)

    def parity(v):
        return xp.where(k % 2 == 0, v, -v)
    if kind == "t":
        return xp.cos(kf * theta)
    if kind == "u":
        return xp.where(xp.sin(narrow) != 0, xp.sin((kf + 1) * theta) / xp.sin(theta),
                        (kf + 1) * xp.cos((kf + 1) * theta) / y)
    if kind == "v":
        return xp.where(xp.sin(narrow / 2) != 1, xp.cos((kf + 0.5) * theta) / xp.cos(theta / 2),
                        parity(2 * kf + 1))
    return xp.where(xp.cos(narrow / 2) != 1, xp.sin((kf + 0.5) * theta) / xp.sin(theta / 2),
                    parity(1.0) if shifted else end)


def _hermite_h(xp, x, k, kf):
    return (x + x, lambda m, q, p: _fma(x + x, q, -((2 * m - 2) * p)),
            [(k > _HERMITE_LIMIT[x.dtype], np.nan)])


def _hermite_he(xp, x, k, kf):
    return x, lambda m, q, p: _fma(x, q, -((m - 1) * p)), [(k > _HERMITE_LIMIT[x.dtype],
                                                          np.nan)]


def _laguerre_l(xp, x, k, kf):
    return (1 - x, lambda m, q, p: (((2 * m - 2) + (1 - x)) * q - (m - 1) * p) / m,
            [(x == 0, 1)])


def _legendre_p(xp, x, k, kf):
    ends = xp.where((x > 0) | (k % 2 == 0), 1, -1)
    return x, lambda m, q, p: ((2 * m - 1) * x * q - (m - 1) * p) / m, [(xp.abs(x) == 1, ends)]


def _polynomial_impl(name, rules):
    """The implementation of polynomial ``name`` of (x, n), both of one float dtype:
    ``rules(xp, x, k, kf)`` gives its degree-1 value, its recurrence and its shortcuts as
    (mask, value) pairs, the first that holds deciding (k is the integer degree, kf the
    same in x's dtype)."""
    def impl(xp, x, n):
        x = _as_float(x)
        x, n = xp.broadcast_arrays(x, n.astype(x.dtype, copy=False))
        k = _degree(xp, n)
        with np.errstate(all="ignore"):
            p1, step, shortcuts = rules(xp, x, k, k.astype(x.dtype))
            decided = k < 0
            for mask, _ in shortcuts:
                decided = decided | mask
            out = _recurrence(xp, xp.where(decided, 0, k), xp.broadcast_to(p1, x.shape), step)
            for mask, value in reversed(shortcuts):
                out = xp.where(mask, value, out)
            return xp.where(k < 0, 0, out).astype(x.dtype, copy=False)
    impl.__name__ = impl.__qualname__ = f"_{name}"
    globals()[impl.__name__] = impl         # generated modules import it by name
    return impl


def _into(out, result, op):
    """``result`` written into ``out`` (PyTorch's ``out=``), or ``result`` itself."""
    if out is None:
        return result
    if not dtypes.can_cast(result.dtype, out.dtype):
        raise op_error(op, f"result type {result.dtype.name} can't be cast to the desired "
                           f"output type {out.dtype.name}")
    if tuple(out.shape) != tuple(result.shape):
        raise op_error(op, f"out= has shape {tuple(out.shape)}, the result "
                           f"{tuple(result.shape)}: pass an out of the result's shape")
    return out.copy_(result)


def _polynomial(name, rules, doc):
    """The public ``<name>(input, n, *, out=None)`` of a new primitive ``special_<name>``."""
    impl = _polynomial_impl(name, rules)
    prim = Primitive(f"special_{name}", impl, args=("self", "other"), dtype=float_promote,
                     shape=broadcast, vjp=None, kind="other",
                     np=f"{impl.__name__}(np, {{self}}, {{other}})",
                     helpers={impl.__name__: impl})

    def fn(input, n, *, out=None):
        from .math_ops import _operands
        if not isinstance(input, Tensor) and not isinstance(n, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"({type(input).__name__}, {type(n).__name__}), but expected a "
                            f"Tensor for input, n or both")
        x, n = _operands(input, n)
        dt = float_promote(x, n)
        if dt not in (dtypes.float32, dtypes.float64):
            raise op_error(name, f"not implemented for {dt.name} (float32 and float64 only, "
                                 f"as PyTorch's kernels)", NotImplementedError)
        return _into(out, bind(prim, x.to(dt), n.to(dt)), name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc} As ``torch.special.{name}`` (edge cases: {__name__})."
    return fn


chebyshev_polynomial_t = _polynomial(
    "chebyshev_polynomial_t", _chebyshev("t", 6),
    "T_n(input), the Chebyshev polynomial of the first kind.")
chebyshev_polynomial_u = _polynomial(
    "chebyshev_polynomial_u", _chebyshev("u", 8),
    "U_n(input), the Chebyshev polynomial of the second kind.")
chebyshev_polynomial_v = _polynomial(
    "chebyshev_polynomial_v", _chebyshev("v", 8),
    "V_n(input), the Chebyshev polynomial of the third kind.")
chebyshev_polynomial_w = _polynomial(
    "chebyshev_polynomial_w", _chebyshev("w", 8),
    "W_n(input), the Chebyshev polynomial of the fourth kind.")
shifted_chebyshev_polynomial_t = _polynomial(
    "shifted_chebyshev_polynomial_t", _chebyshev("t", 6, shifted=True),
    "T_n(2 input - 1), the shifted Chebyshev polynomial of the first kind.")
shifted_chebyshev_polynomial_u = _polynomial(
    "shifted_chebyshev_polynomial_u", _chebyshev("u", 6, shifted=True),
    "U_n(2 input - 1), the shifted Chebyshev polynomial of the second kind.")
shifted_chebyshev_polynomial_v = _polynomial(
    "shifted_chebyshev_polynomial_v", _chebyshev("v", 6, shifted=True),
    "V_n(2 input - 1), the shifted Chebyshev polynomial of the third kind.")
shifted_chebyshev_polynomial_w = _polynomial(
    "shifted_chebyshev_polynomial_w", _chebyshev("w", 4, shifted=True),
    "W_n(2 input - 1), the shifted Chebyshev polynomial of the fourth kind.")
hermite_polynomial_h = _polynomial(
    "hermite_polynomial_h", _hermite_h, "H_n(input), the physicists' Hermite polynomial.")
hermite_polynomial_he = _polynomial(
    "hermite_polynomial_he", _hermite_he, "He_n(input), the probabilists' Hermite polynomial.")
laguerre_polynomial_l = _polynomial(
    "laguerre_polynomial_l", _laguerre_l, "L_n(input), the Laguerre polynomial.")
legendre_polynomial_p = _polynomial(
    "legendre_polynomial_p", _legendre_p, "P_n(input), the Legendre polynomial.")


def _airy_ai(xp, x):
    return airy_ai_impl(xp, _as_float(x))


def _spherical_bessel_j0(xp, x):
    """PyTorch's kernel: its Taylor series below |x| = 0.5, sin(x) / x above, 0 at +-inf."""
    x = _as_float(x)
    x2 = x * x
    with np.errstate(all="ignore"):
        series = 1 + x2 * (-1 / 6 + x2 * (1 / 120 + x2 * (-1 / 5040 + x2 * (
            1 / 362880 + x2 * (-1 / 39916800 + x2 * (1 / 6227020800))))))
        y = xp.where(xp.abs(x) < 0.5, series, xp.sin(x) / x)
    return xp.where(xp.isinf(x), 0, y).astype(x.dtype, copy=False)


def _unary(name, impl, doc):
    """The public ``<name>(input, *, out=None)`` of a new primitive ``special_<name>``."""
    prim = Primitive(f"special_{name}", impl, dtype=float_promote, shape=same_shape,
                     vjp=None, kind="other", np=f"{impl.__name__}(np, {{self}})",
                     helpers={impl.__name__: impl})

    def fn(input, *, out=None):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(input).__name__}")
        dt = float_promote(input)
        if dt not in (dtypes.float32, dtypes.float64):
            raise op_error(name, f"not implemented for {dt.name} (float32 and float64 only, "
                                 f"as PyTorch's kernels)", NotImplementedError)
        return _into(out, bind(prim, input), name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc} As ``torch.special.{name}`` (edge cases: {__name__})."
    return fn


airy_ai = _unary("airy_ai", _airy_ai, "Ai(input), the Airy function.")
spherical_bessel_j0 = _unary("spherical_bessel_j0", _spherical_bessel_j0,
                             "j_0(input) = sin(input) / input, the spherical Bessel function.")

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p", "airy_ai", "spherical_bessel_j0"]
