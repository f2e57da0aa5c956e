"""Binary arithmetic: add, sub, mul, div, maximum/minimum, pow, fmod, remainder, and
division with a rounding mode, with their functions and in-place methods.

``add``/``sub`` take ``alpha``, ``div`` a ``rounding_mode``, ``pow`` a tensor or a scalar
exponent (a scalar one is its own primitive, ``pow_scalar``, with eager's shortcuts for
2, 3 and 0.5); the rest are generated from their declarations (``public=True``).
maximum/minimum split the gradient evenly on ties.
"""
import math

import numpy as np

from ..tensor import Tensor
from .core import Primitive, bind, inplace, op_error
from .declare import method
from .elementwise_logic import binary, eq, logical_and, where
from .elementwise_math import _is_bool, _MASK_HINT, literal_value, log
from .rules import broadcast, float_promote, promote, same_shape


def _sub_dtype(a, b):
    if _is_bool(a) and _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(a) or _is_bool(b):
        raise RuntimeError(f"Subtraction, the `-` operator, with a bool tensor is not supported. "
                           f"{_MASK_HINT}")
    return promote(a, b)


add_p = binary("add", lambda xp, a, b: xp.add(a, b),
               (lambda g, a, b, out: g, lambda g, a, b, out: g), "add", "{self} + {other}",
               np_t="{self} + {other}", inplace=lambda xp, a, b: xp.add(a, b, out=a),
               jvp=(lambda t, a, b, out: t, lambda t, a, b, out: t))
sub_p = binary("sub", lambda xp, a, b: xp.subtract(a, b),
               (lambda g, a, b, out: g, lambda g, a, b, out: -g), "subtract",
               "{self} - {other}", np_t="{self} - {other}", dtype=_sub_dtype,
               inplace=lambda xp, a, b: xp.subtract(a, b, out=a),
               jvp=(lambda t, a, b, out: t, lambda t, a, b, out: -t))
mul_p = binary("mul", lambda xp, a, b: xp.multiply(a, b),
               (lambda g, a, b, out: g * b, lambda g, a, b, out: g * a), "multiply",
               "{self} * {other}", np_t="{self} * {other}", saves=("self", "other"),
               inplace=lambda xp, a, b: xp.multiply(a, b, out=a),
               jvp=(lambda t, a, b, out: t * b, lambda t, a, b, out: a * t),
               public=True, method=True, inplace_method="mul_", doc="input * other.")
div_p = binary("div", lambda xp, a, b: xp.true_divide(a, b),
               (lambda g, a, b, out: g / b, lambda g, a, b, out: -g * a / (b * b)),
               "divide", "{self} / {other}", np_t="{self} / {other}", saves=("self", "other"),
               dtype=float_promote, inplace=lambda xp, a, b: xp.true_divide(a, b, out=a),
               jvp=(lambda t, a, b, out: t / b, lambda t, a, b, out: -t * a / (b * b)))
# NumPy's maximum returns the second operand on a tie (so maximum(0.0, -0.0) is -0.0) and
# propagates NaN from either side; the C forms do the same.
maximum_p = binary("maximum", lambda xp, a, b: xp.maximum(a, b),
                   (lambda g, a, b, out: g * _tie_weight(a, b),
                    lambda g, a, b, out: g * _tie_weight(b, a)),
                   "maximum", "({self} > {other} || isnan({self}) ? {self} : {other})",
                   saves=("self", "other"), public=True, method=True,
                   doc="The larger of input and other; NaN if either is; ties share the "
                       "gradient.")
minimum_p = binary("minimum", lambda xp, a, b: xp.minimum(a, b),
                   (lambda g, a, b, out: g * _tie_weight(b, a),
                    lambda g, a, b, out: g * _tie_weight(a, b)),
                   "minimum", "({self} < {other} || isnan({self}) ? {self} : {other})",
                   saves=("self", "other"), public=True, method=True,
                   doc="The smaller of input and other; NaN if either is; ties share the "
                       "gradient.")


def _tie_weight(a, b):
    """0 where a < b, 1/2 where a == b, 1 elsewhere: the gradient share of ``a`` in max(a, b).
    Where either is NaN both get the whole gradient, as PyTorch's (it masks only a < b)."""
    return where(a < b, 0.0, where(eq(a, b), 0.5, 1.0))


def _pow_scalar_grad(g, x, exponent):
    if exponent == 0:
        return g * 0
    return g * (x ** (exponent - 1) * exponent)


def _small_power(exponent):
    """2 or 3 (not True), the powers ``_pow_impl`` computes by multiplying, else None."""
    return exponent if exponent in (2, 3) and not isinstance(exponent, bool) else None


pow_scalar_p = Primitive(
    "pow_scalar", lambda xp, x, exponent: _pow_impl(xp, x, exponent), args=("self",),
    dtype=lambda x, exponent: promote(x, exponent), shape=same_shape,
    vjp=(lambda g, x, out, exponent: _pow_scalar_grad(g, x, exponent),), saves=("self",),
    jvp=(lambda t, x, out, exponent: _pow_scalar_grad(t, x, exponent),),
    node="PowBackward0", np=lambda self, exponent: _pow_source(self, exponent),
    np_out=lambda self, exponent, out: _pow_out(self, exponent, out),
    c=lambda self, exponent: _pow_c(self, literal_value(exponent), exponent),
    kind="elementwise")


def _pow_c(x, value, literal):
    """C for ``x ** exponent`` with eager's shortcuts: multiplying for 2 and 3, sqrt for
    0.5 (which keeps sqrt's -0.0 and nan at -inf, where pow gives +0.0 and inf)."""
    if _small_power(value):
        return " * ".join([x] * int(value))
    return f"sqrt({x})" if value == 0.5 else f"pow({x}, {literal})"


def _pow_source(x, exponent):
    """NumPy source for ``x ** exponent`` with the shortcuts ``_pow_impl`` takes: NumPy's
    general power is ~100x slower than multiplying (float32 ``u**3``: 250 ms vs 1.3 ms
    at 4M elements)."""
    if _small_power(exponent):
        return " * ".join([x] * exponent)
    if exponent == 0.5 and not isinstance(exponent, bool):
        return f"np.sqrt({x})"
    return f"{x} ** {_number(exponent)}"


def _pow_out(x, exponent, out):
    if _small_power(exponent) == 2:
        return (f"np.multiply({x}, {x}, out={out})",)
    if _small_power(exponent) == 3:
        return (f"np.multiply({x}, {x}, out={out})", f"np.multiply({out}, {x}, out={out})")
    if exponent == 0.5 and not isinstance(exponent, bool):
        return (f"np.sqrt({x}, out={out})",)
    return (f"np.power({x}, {_number(exponent)}, out={out})",)


def _number(v):
    """Python source of the number ``v`` in generated code: ``repr`` writes a bare ``inf`` or
    ``nan``, which no module defines; NumPy's (or CuPy's, both ``np`` there) names them."""
    if isinstance(v, float) and not math.isfinite(v):
        return ("-" if v < 0 else "") + ("np.nan" if v != v else "np.inf")
    return repr(v)


def _pow_impl(xp, x, y):
    if isinstance(y, (int, float)) and not isinstance(y, bool) and getattr(x, "dtype", None) is not None:
        if y == 2:
            return x * x
        if y == 3:
            return x * x * x
        if y == 0.5 and x.dtype.kind == "f":
            return xp.sqrt(x)
    return xp.power(x, y)


def _log_base(a):
    """log of a pow base; a Python scalar base is taken in float64, not the default dtype."""
    return log(a if isinstance(a, Tensor) else Tensor._make(np.array(a, np.float64)))


pow_p = binary(
    "pow", lambda xp, a, b: _pow_impl(xp, a, b),
    (lambda g, a, b, out: where(eq(b, 0), 0.0, g * b * a ** (b - 1)),
     lambda g, a, b, out: g * where(logical_and(eq(a, 0), b >= 0), 0.0, out * _log_base(a))),
    "power", "pow({self}, {other})", saves=("self", "other", "result"), node="PowBackward1",
    jvp=(lambda t, a, b, out: where(eq(b, 0), 0.0, t * b * a ** (b - 1)),
         lambda t, a, b, out: t * where(logical_and(eq(a, 0), b >= 0), 0.0, out * _log_base(a))))

# fmod, remainder and rounding division: NumPy's remainder and floor_divide take Python's
# (and PyTorch's) way through fmod, exact where floor(a / b) is not: -1e20 % 501 is 460, not 0,
# and 1.0 // 0.001 is 999, not 1000. Rounding division has a zero gradient (PyTorch's), also
# where b is 0 (floor(a / b)'s chain rule would give 0 * inf = NaN).
fmod_p = binary("fmod", lambda xp, a, b: xp.fmod(a, b),
                (lambda g, a, b, out: g,
                 lambda g, a, b, out: -g * div(a, b, rounding_mode="trunc")),
                "fmod", "fmod({self}, {other})", saves=("self", "other"), node="FmodBackward1",
                public=True, method=True,
                doc="C's fmod: the remainder of a / b rounded toward zero (sign of a).")
def _remainder(xp, a, b):
    """NumPy's remainder; on a GPU, written through fmod for floats, as CuPy's (a - b *
    floor(a / b)) is not exact: CuPy gives -6400 for -1e20 % 501, Python 460."""
    if xp is np or not _floating(a, b):
        return xp.remainder(a, b)
    m = xp.fmod(a, b)
    return xp.where((m != 0) & ((xp.asarray(b) < 0) != (m < 0)), m + b, m)


def _floating(*operands):
    return any(getattr(x, "dtype", np.dtype(type(x))).kind == "f" for x in operands)


remainder_p = binary(
    "remainder", lambda xp, a, b: _remainder(xp, a, b),
    (lambda g, a, b, out: g, lambda g, a, b, out: -g * div(a, b, rounding_mode="floor")),
    "remainder",
    "(fmod({self}, {other}) != 0 && (({other} < 0) != (fmod({self}, {other}) < 0)) ? "
    "fmod({self}, {other}) + {other} : fmod({self}, {other}))",
    saves=("self", "other"), node="RemainderBackward1")
div_rounding_p = Primitive(
    "div_rounding", lambda xp, a, b, rounding_mode: _div_rounding(xp, a, b, rounding_mode),
    args=("self", "other"), dtype=lambda a, b, rounding_mode: promote(a, b), shape=broadcast,
    vjp=(lambda g, a, b, out, rounding_mode: g * 0,
         lambda g, a, b, out, rounding_mode: g * 0),
    node="DivBackward2", np=lambda self, other, rounding_mode="floor": (
        f"np.floor_divide({self}, {other})" if rounding_mode == "floor"
        else f"np.trunc(np.true_divide({self}, {other}))"),
    c=lambda self, other, rounding_mode="floor": (
        _floor_divide_c(self, other) if rounding_mode == "floor"
        else f"trunc({self} / {other})"),
    kind="elementwise")


def _floor_divide_c(a, b):
    """C for NumPy's (and PyTorch's, and Python's) floor division: (a - fmod(a, b)) / b, one
    less where the remainder's sign differs from b's, rounded to the nearest integer; a / b
    where b is 0, and a signed zero for a zero quotient."""
    m = f"fmod({a}, {b})"
    d = f"(({a} - {m}) / {b} - ({m} != 0 && (({b} < 0) != ({m} < 0))))"
    return (f"({b} == 0 ? {a} / {b} : {d} != 0 ? floor({d}) + ({d} - floor({d}) > 0.5) "
            f": copysign(0.0, {a} / {b}))")


def _floor_divide_on_device(xp, a, b):
    """``_floor_divide_c`` in array calls, for CuPy, whose float floor_divide is floor(a / b)
    (1.0 // 0.001 gives 1000 there, Python 999)."""
    b = xp.asarray(b)
    m = xp.fmod(a, b)
    d = (a - m) / b - ((m != 0) & ((b < 0) != (m < 0)))
    fl = xp.floor(d)
    q = xp.where(d != 0, fl + (d - fl > 0.5), xp.copysign(0.0, a / b).astype(fl.dtype))
    return xp.where(b == 0, a / b, q)


def _div_rounding(xp, a, b, rounding_mode):
    if all(x.dtype.kind in "iub" if hasattr(x, "dtype") else isinstance(x, int) for x in (a, b)) \
            and not (b != 0 if isinstance(b, int) else bool((b != 0).all())):
        raise RuntimeError("ZeroDivisionError")     # PyTorch's, for an integer division by 0
    if rounding_mode == "floor":
        if xp is np or not _floating(a, b):
            return xp.floor_divide(a, b)
        return _floor_divide_on_device(xp, a, b)
    q = xp.true_divide(a, b)
    return xp.trunc(q) if getattr(q, "dtype", None) is None or q.dtype.kind == "f" else q


_ONE = 1        # add's default alpha, met by identity (any other 1 is asked of _scales)


def _scales(alpha):
    """Whether ``alpha`` changes ``other``: a number other than 1, or a 0-d tensor (an
    optimizer's learning rate inside a compiled step), which is never compared."""
    return alpha != 1 if isinstance(alpha, (int, float)) else True


@method
def add(input, other, *, alpha=1):
    if alpha is not _ONE and _scales(alpha):      # the default skips the call
        other = mul(other, alpha)
    return bind(add_p, input, other)


# Hand-written in-place methods keep private names: the profiler then reports them under
# the name given to ``inplace`` ("add_"), with the inputs it writes, as before.
@method("add_")
def _add_(self, other, *, alpha=1):
    if alpha is not _ONE and _scales(alpha):      # the default skips the call
        other = mul(other, alpha)
    return inplace(add_p, "add_", self, other)


@method
def sub(input, other, *, alpha=1):
    if alpha is not _ONE and _scales(alpha):      # the default skips the call
        other = mul(other, alpha)
    return bind(sub_p, input, other)


@method("sub_")
def _sub_(self, other, *, alpha=1):
    if alpha is not _ONE and _scales(alpha):      # the default skips the call
        other = mul(other, alpha)
    return inplace(sub_p, "sub_", self, other)


def _check_rounding_mode(name, rounding_mode):
    if rounding_mode not in (None, "floor", "trunc"):
        raise op_error(name, f"{name} expected rounding_mode to be one of None, 'trunc', or "
                             f"'floor' but found '{rounding_mode}'")


@method
def div(input, other, *, rounding_mode=None):
    _check_rounding_mode("div", rounding_mode)
    if rounding_mode is None:
        return bind(div_p, input, other)
    return bind(div_rounding_p, input, other, rounding_mode=rounding_mode)


@method("div_")
def _div_(self, other, *, rounding_mode=None):
    _check_rounding_mode("div_", rounding_mode)
    if rounding_mode is None:
        return inplace(div_p, "div_", self, other)
    return inplace(div_rounding_p, "div_", self, other, rounding_mode=rounding_mode)


@method
def pow(input, exponent):  # noqa: A001
    if not isinstance(exponent, Tensor) and isinstance(input, Tensor):
        return bind(pow_scalar_p, input, exponent=exponent)
    return bind(pow_p, input, exponent)


@method("pow_")
def _pow_(self, exponent):
    if isinstance(exponent, Tensor):
        return inplace(pow_p, "pow_", self, exponent)
    return inplace(pow_scalar_p, "pow_", self, exponent=exponent)
