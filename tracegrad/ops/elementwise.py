"""Elementwise primitives: one block each, with VJP and NumPy/CUDA templates.

Rules follow PyTorch at non-differentiable points: relu'(0) = 0, abs'(0) = 0,
sqrt'(0) = inf, clamp passes the gradient on its bounds, maximum/minimum split
the gradient evenly on ties.

A declaration with ``public=True`` defines its function in this module (``exp``,
``mul``, ... are generated, not written out below); ``method=`` and ``inplace_method=``
put it on ``Tensor``. Functions with logic of their own follow the primitives.
"""
import math

import numpy as np

from .. import _hooks, dtypes
from ..device import as_device, to_device
from .core import LINEAR, Primitive, bind, declaration_helper, inplace, op_error
from .declare import method
from .rules import broadcast, float_promote, promote, same_shape, to_bool
from .special import erf as _erf

_SQRT_PI_2 = 2.0 / math.sqrt(math.pi)


@declaration_helper
def unary_float(name, impl, vjp, np_t, c, saves=("self",), node=None, np_out=None, cuda=None,
                **declare):
    """An elementwise math primitive: ints and bools compute in the default float dtype.
    ``np_t`` names the NumPy ufunc (``"exp"``) or is an expression over ``{self}``; the
    other keywords (``public``, ``method``, ...) go to ``Primitive``."""
    if np_t.isidentifier():
        np_out = np_out or f"np.{np_t}({{self}}, out={{out}})"
        np_t = f"np.{np_t}({{self}})"
    return Primitive(name, lambda xp, x: impl(xp, _as_float(x)), dtype=float_promote,
                     shape=same_shape, vjp=(vjp,), saves=saves, np=np_t, np_out=np_out, c=c,
                     cuda=cuda, kind="elementwise", node=node, **declare)


def _as_float(x):
    # NumPy would compute bool and 8-bit ints in float16, losing precision
    if not hasattr(x, "dtype"):
        return float(x)
    return x if x.dtype.kind == "f" else x.astype(dtypes.get_default_dtype().np)


# C expressions call the type-generic math of <tgmath.h> (expf for a float, exp for a double).
exp_p = unary_float("exp", lambda xp, x: xp.exp(x),
                    lambda g, x, out: g * out, "exp", "exp({self})", saves=("result",),
                    jvp=(lambda t, x, out: t * out,),
                    public=True, method=True, inplace_method="exp_",
                    doc="e to the power of each element.")
log_p = unary_float("log", lambda xp, x: xp.log(x),
                    lambda g, x, out: g / x, "log", "log({self})",
                    jvp=(lambda t, x, out: t / x,), public=True, method=True, inplace_method="log_",
                    doc="Natural logarithm (log'(x) = 1/x).")
log1p_p = unary_float("log1p", lambda xp, x: xp.log1p(x),
                      lambda g, x, out: g / (x + 1), "log1p", "log1p({self})",
                      jvp=(lambda t, x, out: t / (x + 1),),
                      public=True, method=True, doc="log(1 + x), accurate for small x.")
expm1_p = unary_float("expm1", lambda xp, x: xp.expm1(x),
                      lambda g, x, out: g * (out + 1), "expm1", "expm1({self})",
                      saves=("result",), jvp=(lambda t, x, out: t * (out + 1),),
                      public=True, method=True, doc="exp(x) - 1, accurate for small x.")
sqrt_p = unary_float("sqrt", lambda xp, x: xp.sqrt(x),
                     lambda g, x, out: g / (out * 2), "sqrt", "sqrt({self})", saves=("result",),
                     jvp=(lambda t, x, out: t / (out * 2),),
                     public=True, method=True, inplace_method="sqrt_",
                     doc="Square root; sqrt'(0) = inf as in PyTorch.")
rsqrt_p = unary_float("rsqrt", lambda xp, x: 1 / xp.sqrt(x),
                      lambda g, x, out: g * (out * out * out) * -0.5, "1 / np.sqrt({self})",
                      "1 / sqrt({self})", saves=("result",),
                      np_out=("np.sqrt({self}, out={out})", "np.divide(1, {out}, out={out})"),
                      cuda="rsqrt({self})",
                      public=True, method=True, doc="1 / sqrt(x).")
sin_p = unary_float("sin", lambda xp, x: xp.sin(x),
                    lambda g, x, out: g * cos(x), "sin", "sin({self})",
                    jvp=(lambda t, x, out: t * cos(x),),
                    public=True, method=True, inplace_method="sin_", doc="Sine.")
cos_p = unary_float("cos", lambda xp, x: xp.cos(x),
                    lambda g, x, out: g * -sin(x), "cos", "cos({self})",
                    jvp=(lambda t, x, out: t * -sin(x),),
                    public=True, method=True, inplace_method="cos_", doc="Cosine.")
tanh_p = unary_float("tanh", lambda xp, x: xp.tanh(x),
                     lambda g, x, out: bind(tanh_backward_p, g, out), "tanh", "tanh({self})",
                     saves=("result",), jvp=(lambda t, x, out: bind(tanh_backward_p, t, out),),
                     public=True, method=True, inplace_method="tanh_", doc="Hyperbolic tangent.")
# exp(-logaddexp(0, -x)) and the two-sided C form never overflow
sigmoid_p = unary_float(
    "sigmoid", lambda xp, x: _sigmoid(xp, x),
    lambda g, x, out: bind(sigmoid_backward_p, g, out),
    "np.exp(-np.logaddexp(0, -{self}))",
    "({self} >= 0 ? 1 / (1 + exp(-{self})) : exp({self}) / (1 + exp({self})))",
    saves=("result",),
    np_out=("np.negative({self}, out={out})", "np.logaddexp(0, {out}, out={out})",
            "np.negative({out}, out={out})", "np.exp({out}, out={out})"),
    jvp=(lambda t, x, out: bind(sigmoid_backward_p, t, out),),
    public=True, method=True, inplace_method="sigmoid_",
    doc="Logistic sigmoid 1 / (1 + exp(-x)), computed without overflow.")

# The gradients of tanh and sigmoid as one op each (PyTorch's tanh_backward and
# sigmoid_backward): one pass in eager instead of three, and their own rules give the
# second derivative.
tanh_backward_p = Primitive(
    "tanh_backward", lambda xp, g, y: g * (1 - y * y), args=("grad_output", "output"),
    dtype=promote, shape=broadcast, saves=("grad_output", "output"),
    vjp=(lambda gg, g, y, out: bind(tanh_backward_p, gg, y),
         lambda gg, g, y, out: gg * g * y * -2),
    jvp=(lambda t, g, y, out: bind(tanh_backward_p, t, y),
         lambda t, g, y, out: t * g * y * -2),
    np="{grad_output} * (1 - {output} * {output})",
    np_out=("np.multiply({output}, {output}, out={out})", "np.subtract(1, {out}, out={out})",
            "np.multiply({grad_output}, {out}, out={out})"),
    c="{grad_output} * (1 - {output} * {output})", kind="elementwise")
sigmoid_backward_p = Primitive(
    "sigmoid_backward", lambda xp, g, y: g * y * (1 - y), args=("grad_output", "output"),
    dtype=promote, shape=broadcast, saves=("grad_output", "output"),
    vjp=(lambda gg, g, y, out: bind(sigmoid_backward_p, gg, y),
         lambda gg, g, y, out: gg * g * (1 - y * 2)),
    jvp=(lambda t, g, y, out: bind(sigmoid_backward_p, t, y),
         lambda t, g, y, out: t * g * (1 - y * 2)),
    np="{grad_output} * {output} * (1 - {output})",
    np_out=("np.subtract(1, {output}, out={out})", "np.multiply({output}, {out}, out={out})",
            "np.multiply({grad_output}, {out}, out={out})"),
    c="{grad_output} * {output} * (1 - {output})", kind="elementwise")
# erf: SciPy's where installed, else a vectorised rational approximation (special.py);
# the NumPy template calls it by name, so generated modules get it as a helper.
erf_p = unary_float("erf", lambda xp, x: _erf(xp, x),
                    lambda g, x, out: g * exp(-(x * x)) * _SQRT_PI_2, "_erf(np, {self})",
                    "erf({self})", helpers={"_erf": _erf},
                    public=True, method=True, doc="The error function.")


def _sigmoid(xp, x):
    if x.dtype.kind != "f":
        x = x.astype(dtypes.get_default_dtype().np)
    return xp.exp(-xp.logaddexp(x.dtype.type(0), -x))


_MASK_HINT = "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."


def _is_bool(x):
    return getattr(x, "dtype", None) is dtypes.bool or isinstance(x, bool)


def _neg_dtype(x):
    if _is_bool(x):
        raise RuntimeError(f"Negation, the `-` operator, on a bool tensor is not supported. "
                           f"{_MASK_HINT}")
    return promote(x)


def _sub_dtype(a, b):
    if _is_bool(a) and _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(a) or _is_bool(b):
        raise RuntimeError(f"Subtraction, the `-` operator, with a bool tensor is not supported. "
                           f"{_MASK_HINT}")
    return promote(a, b)


def _keep(out, *operands):
    """Operands computed in their own dtypes (tests and casts)."""
    return operands


def _promoted(out, *operands):
    """Operands computed in their promoted dtype (comparisons: the result is bool)."""
    common = promote(*operands)
    return tuple(common for _ in operands)


def _condition_first(out, cond, a, b):
    return (cond, out, out)


neg_p = Primitive("neg", lambda xp, x: xp.negative(x), dtype=_neg_dtype, shape=same_shape,
                  vjp=(lambda g, x, out: -g,), jvp=LINEAR, np="np.negative({self})",
                  np_out="np.negative({self}, out={out})", c="-{self}",
                  kind="elementwise", inplace=lambda xp, x: xp.negative(x, out=x),
                  public=True, method=True, inplace_method="neg_", doc="-x.")
abs_p = Primitive("abs", lambda xp, x: xp.abs(x), dtype=promote, shape=same_shape,
                  vjp=(lambda g, x, out: g * sign(x),), saves=("self",),
                  jvp=(lambda t, x, out: t * sign(x),),
                  np="np.abs({self})", np_out="np.abs({self}, out={out})", c="fabs({self})",
                  kind="elementwise",
                  public=True, method=True, inplace_method="abs_", doc="|x|; abs'(0) = 0.")
# sign(-0.0) is +0.0 and sign(nan) is 0, as PyTorch's (NumPy's sign(nan) is nan)
sign_p = Primitive("sign", lambda xp, x: _sign(xp, x), dtype=promote, shape=same_shape,
                   vjp=(lambda g, x, out: g * 0,), np="np.nan_to_num(np.sign({self}))",
                   np_out=("np.sign({self}, out={out})", "np.nan_to_num({out}, copy=False)"),
                   c="({self} > 0 ? 1 : {self} < 0 ? -1 : 0)",
                   kind="elementwise", public=True, method=True,
                   doc="-1, 0 or 1 by the sign of x; its gradient is zero.")
# relu is a primitive rather than where(x > 0, x, 0): one pass in eager, PyTorch's node name,
# and the rule reads the saved result (relu'(0) = 0; relu'(nan) = 1, as PyTorch's
# threshold_backward, which zeroes only where out <= 0). NaN stays NaN, relu(-0.0) is +0.0.
def _relu_grad(g, out):
    """Eager: PyTorch's threshold_backward node (which requires grad under create_graph and
    differentiates to zeros). Traced: le + where, so the compiler can save relu's mask (a
    bool) in the forward instead of the float output."""
    if _hooks.state.tracer is None:
        return bind(threshold_backward_p, g, out)
    return where(out <= 0, 0, g)


relu_p = Primitive("relu", lambda xp, x: xp.maximum(x, x.dtype.type(0)), dtype=promote,
                   shape=same_shape, vjp=(lambda g, x, out: _relu_grad(g, out),),
                   jvp=(lambda t, x, out: _relu_grad(t, out),),
                   saves=("result",), np="np.maximum({self}, 0)",
                   np_out="np.maximum({self}, 0, out={out})",
                   c="({self} > 0 || isnan({self}) ? {self} : 0)", kind="elementwise",
                   inplace=lambda xp, x: xp.maximum(x, x.dtype.type(0), out=x),
                   public=True, method=True, inplace_method="relu_", doc="max(x, 0); relu'(0) = 0.")


# relu's gradient as one op (PyTorch's threshold_backward): its result depends on the saved
# output, so under create_graph it requires grad, and its derivative in the output is zero
# (PyTorch's: a second derivative of relu is zeros, not "does not require grad").
threshold_backward_p = Primitive(
    "threshold_backward", lambda xp, g, y: xp.where(y <= 0, g.dtype.type(0), g),
    args=("grad_output", "output"), dtype=promote, shape=broadcast, saves=("output",),
    vjp=(lambda gg, g, y, out: bind(threshold_backward_p, gg, y),
         lambda gg, g, y, out: gg * 0),
    jvp=(lambda t, g, y, out: bind(threshold_backward_p, t, y), None),
    np="np.where({output} <= 0, 0, {grad_output})",
    np_out="np.copyto({out}, np.where({output} <= 0, 0, {grad_output}))",
    c="({output} <= 0 ? 0 : {grad_output})", kind="elementwise")


def _sign(xp, x):
    s = xp.sign(x)
    return xp.nan_to_num(s) if s.dtype.kind == "f" else s


@declaration_helper
def rounding(name, impl, np_t, c, np_out=None, **declare):
    """Rounding ops: zero gradient almost everywhere, as in PyTorch."""
    if np_t.isidentifier():
        np_out, np_t = f"np.{np_t}({{self}}, out={{out}})", f"np.{np_t}({{self}})"
    return Primitive(name, impl, dtype=promote, shape=same_shape,
                     vjp=(lambda g, x, out, **_: g * 0,), np=np_t, np_out=np_out, c=c,
                     kind="elementwise", **declare)


floor_p = rounding("floor", lambda xp, x: xp.floor(x), "floor", "floor({self})",
                   public=True, method=True, inplace_method="floor_",
                   doc="Round down; zero gradient.")
ceil_p = rounding("ceil", lambda xp, x: xp.ceil(x), "ceil", "ceil({self})",
                  public=True, method=True, inplace_method="ceil_", doc="Round up; zero gradient.")
trunc_p = rounding("trunc", lambda xp, x: xp.trunc(x), "trunc", "trunc({self})",
                   public=True, method=True, doc="Round toward zero; zero gradient.")
# half to even, as NumPy and PyTorch; C's rint rounds so in the default rounding mode
round_p = rounding("round", lambda xp, x, decimals: xp.round(x, decimals),
                   "np.round({self}, {decimals})",
                   lambda self, decimals: f"rint({self})" if literal_value(decimals) == 0
                   else None,
                   np_out="np.round({self}, {decimals}, out={out})")

# binary -----------------------------------------------------------------------


@declaration_helper
def binary(name, impl, vjp, ufunc, c, saves=(), dtype=promote, node=None, inplace=None,
           np_t=None, operands=None, **declare):
    """A binary elementwise primitive computed by the NumPy ufunc ``ufunc``."""
    return Primitive(name, impl, args=("self", "other"), dtype=dtype, shape=broadcast, vjp=vjp,
                     saves=saves, np=np_t or f"np.{ufunc}({{self}}, {{other}})",
                     np_out=f"np.{ufunc}({{self}}, {{other}}, out={{out}})", c=c,
                     operands=operands, kind="elementwise", node=node, inplace=inplace,
                     **declare)


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


def literal_value(literal):
    """The number a rendered C literal stands for (``2.0f`` -> 2.0)."""
    try:
        return float(str(literal).rstrip("fL"))
    except ValueError:
        return None


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
    from ..tensor import Tensor
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


# comparisons and logic (no gradient) ------------------------------------------------


@declaration_helper
def compare(name, impl, ufunc, op):
    return binary(name, impl, None, ufunc, f"{{self}} {op} {{other}}", dtype=to_bool,
                  np_t=f"{{self}} {op} {{other}}", operands=_promoted, public=True,
                  method=True, doc=f"input {op} other, elementwise, as bool.")


eq_p = compare("eq", lambda xp, a, b: xp.equal(a, b), "equal", "==")
ne_p = compare("ne", lambda xp, a, b: xp.not_equal(a, b), "not_equal", "!=")
lt_p = compare("lt", lambda xp, a, b: xp.less(a, b), "less", "<")
le_p = compare("le", lambda xp, a, b: xp.less_equal(a, b), "less_equal", "<=")
gt_p = compare("gt", lambda xp, a, b: xp.greater(a, b), "greater", ">")
ge_p = compare("ge", lambda xp, a, b: xp.greater_equal(a, b), "greater_equal", ">=")


def _int_or_bool(*operands, **_):
    d = promote(*operands)
    if d.is_floating_point:
        raise NotImplementedError(f"bitwise ops are not implemented for '{d.name}' tensors")
    return d


and_p = binary("bitwise_and", lambda xp, a, b: xp.bitwise_and(a, b), None, "bitwise_and",
               "{self} & {other}", np_t="{self} & {other}", dtype=_int_or_bool,
               public=True, method=True, doc="Bitwise and (logical and for bool).")
or_p = binary("bitwise_or", lambda xp, a, b: xp.bitwise_or(a, b), None, "bitwise_or",
              "{self} | {other}", np_t="{self} | {other}", dtype=_int_or_bool,
              public=True, method=True, doc="Bitwise or (logical or for bool).")
xor_p = binary("bitwise_xor", lambda xp, a, b: xp.bitwise_xor(a, b), None, "bitwise_xor",
               "{self} ^ {other}", np_t="{self} ^ {other}", dtype=_int_or_bool,
               public=True, method=True, doc="Bitwise xor (logical xor for bool).")
# The C tier takes bools but no ints (those stay on NumPy), and ~ of a C bool would set
# its high bits: a bool's not is !.
not_p = Primitive("bitwise_not", lambda xp, x: xp.invert(x), dtype=_int_or_bool,
                  shape=same_shape, np="np.invert({self})", np_out="np.invert({self}, out={out})",
                  c="!{self}", kind="elementwise",
                  public=True, method=True, doc="Bitwise not (logical not for bool).")
logical_not_p = Primitive("logical_not", lambda xp, x: xp.logical_not(x), dtype=to_bool,
                          shape=same_shape, np="np.logical_not({self})",
                          np_out="np.logical_not({self}, out={out})", c="!{self}",
                          operands=_keep, kind="elementwise",
                          public=True, method=True, doc="Elementwise not, as bool.")
isnan_p = Primitive("isnan", lambda xp, x: xp.isnan(x), dtype=to_bool, shape=same_shape,
                    np="np.isnan({self})", np_out="np.isnan({self}, out={out})",
                    c="isnan({self})", operands=_keep, kind="elementwise",
                    public=True, method=True, doc="True where x is NaN.")
isinf_p = Primitive("isinf", lambda xp, x: xp.isinf(x), dtype=to_bool, shape=same_shape,
                    np="np.isinf({self})", np_out="np.isinf({self}, out={out})",
                    c="isinf({self})", operands=_keep, kind="elementwise",
                    public=True, method=True, doc="True where x is +-inf.")


def _where_dtype(cond, a, b):
    if getattr(cond, "dtype", dtypes.bool) is not dtypes.bool:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {cond.dtype.name.capitalize()}")
    return promote(a, b)


where_p = Primitive(
    "where", lambda xp, c, a, b: xp.where(c, a, b), args=("condition", "self", "other"),
    dtype=_where_dtype, shape=broadcast,
    vjp=(None, lambda g, c, a, b, out: where(c, g, 0.0),
         lambda g, c, a, b, out: where(c, 0.0, g)),
    jvp=(None, lambda t, c, a, b, out: where(c, t, 0.0),
         lambda t, c, a, b, out: where(c, 0.0, t)),
    saves=("condition",), np="np.where({condition}, {self}, {other})",
    np_out="np.copyto({out}, np.where({condition}, {self}, {other}))",
    c="({condition} ? {self} : {other})", operands=_condition_first, kind="elementwise")


def _clamp_impl(xp, x, min, max, out=None):
    """NumPy's clip: a NaN bound makes NaN, as in PyTorch. CuPy's clip compares instead
    (a NaN bound is ignored there), so on a GPU it is maximum then minimum."""
    if min is not None and max is not None:
        if xp is np:
            return xp.clip(x, min, max, out=out)
        return xp.minimum(xp.maximum(x, min, out=out), max, out=out)
    if min is not None:
        return xp.maximum(x, min, out=out)
    return xp.minimum(x, max, out=out)


def _clamp_grad(g, x, min, max):
    keep = None
    if min is not None:
        keep = x >= min
    if max is not None:
        keep = x <= max if keep is None else logical_and(keep, x <= max)
    return where(keep, g, 0.0)


def _clamp_c(self, min, max):
    """clip's C form: NaN and -0.0 pass through as in NumPy's clip, and a NaN bound
    (``b != b``) makes NaN, as there."""
    if min is not None:
        self = f"({self} < {min} || {min} != {min} ? {min} : {self})"
    if max is not None:
        self = f"({self} > {max} || {max} != {max} ? {max} : {self})"
    return self


clamp_p = Primitive(
    "clamp", _clamp_impl, dtype=lambda x, min, max: promote(x, *(v for v in (min, max)
                                                                if v is not None)),
    shape=same_shape, vjp=(lambda g, x, out, min, max: _clamp_grad(g, x, min, max),),
    jvp=(lambda t, x, out, min, max: _clamp_grad(t, x, min, max),),
    saves=("self",), np="np.clip({self}, {min}, {max})",
    np_out="np.clip({self}, {min}, {max}, out={out})", c=_clamp_c, kind="elementwise",
    inplace=lambda xp, x, min, max: _clamp_impl(xp, x, min, max, out=x))


def _convert_impl(xp, x, dtype, device, src_device):
    # cast where the data is (a GPU source is CuPy's current device), then copy: a cast after
    # the copy would run on the current device, not the destination
    if dtype is not None and x.dtype != dtype.np:
        x = x.astype(dtype.np)
    if device is not None and device != src_device:
        x = to_device(x, device)
    return x


# a float's conversion to bool is x != 0 (NaN is true), as NumPy's astype(bool)
convert_p = Primitive(
    "convert", lambda xp, x, dtype, device, src_device: _convert_impl(xp, x, dtype, device,
                                                                      src_device),
    dtype=lambda x, dtype, device, src_device: dtype or x.dtype, shape=same_shape,
    vjp=(lambda g, x, out, dtype, device, src_device:
         convert(g, device=src_device) if device is not None and device != src_device else g,),
    jvp=LINEAR, node="ToCopyBackward0", np="{self}.astype({dtype})",
    np_out="np.copyto({out}, {self}, casting='unsafe')", c="{self}", operands=_keep,
    kind="elementwise")

clone_p = Primitive("clone", lambda xp, x: x.copy(), dtype=promote, shape=same_shape,
                    vjp=(lambda g, x, out: g,), jvp=LINEAR, np="{self}.copy()",
                    np_out="np.copyto({out}, {self})", c="{self}", kind="elementwise")


# public functions with logic of their own (the rest are generated by public=) ------------

negative = neg  # noqa: F821 - neg and abs are declared by neg_p and abs_p (public=True)
absolute = abs


@method
def round(input, decimals=0):  # noqa: A001
    """Round half to even, as PyTorch does; zero gradient."""
    return bind(round_p, input, decimals=decimals)


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
    from ..tensor import Tensor
    if not isinstance(exponent, Tensor) and isinstance(input, Tensor):
        return bind(pow_scalar_p, input, exponent=exponent)
    return bind(pow_p, input, exponent)


@method("pow_")
def _pow_(self, exponent):
    from ..tensor import Tensor
    if isinstance(exponent, Tensor):
        return inplace(pow_p, "pow_", self, exponent)
    return inplace(pow_scalar_p, "pow_", self, exponent=exponent)


@method
def logical_and(input, other):
    return bind(and_p, input.bool() if input.dtype is not dtypes.bool else input,
                other.bool() if getattr(other, "dtype", dtypes.bool) is not dtypes.bool else other)


@method
def logical_or(input, other):
    return bind(or_p, input.bool() if input.dtype is not dtypes.bool else input,
                other.bool() if getattr(other, "dtype", dtypes.bool) is not dtypes.bool else other)


def where(condition, input=None, other=None):
    if input is None and other is None:
        from .index_ops import nonzero
        return nonzero(condition, as_tuple=True)
    return bind(where_p, condition, input, other)


@method("where")
def _where_method(self, condition, other):
    """``x.where(condition, y)`` is ``where(condition, x, y)``."""
    return where(condition, self, other)


@method
def clamp(input, min=None, max=None):  # noqa: A002
    from ..tensor import Tensor
    if min is None and max is None:
        raise op_error("clamp", "At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensors(input, min, max)
    return bind(clamp_p, input, min=min, max=max)


def _clamp_tensors(x, lo, hi):
    """clamp with tensor bounds, as PyTorch's: NaN where x or a bound is NaN, ``hi`` where
    lo > hi, and each operand's gradient where PyTorch's clamp_backward_min_max puts it
    (x on ties). Each ``where`` picks one operand, so its mask is that operand's gradient."""
    keep = x >= lo if lo is not None else None
    if hi is not None:
        keep = x <= hi if keep is None else logical_and(keep, x <= hi)
    to_lo = x < lo if lo is not None else None
    if lo is not None and hi is not None:
        to_lo = logical_and(to_lo, lo < hi)
    to_hi = None
    if hi is not None:
        to_hi = x > hi if lo is None else logical_or(x > hi, hi < lo)
    # neither kept nor clamped: some operand is NaN (an integer tensor has none)
    out = x if not x.dtype.is_floating_point else float("nan")
    if to_hi is not None:
        out = where(to_hi, hi, out)
    if to_lo is not None:
        out = where(to_lo, lo, out)
    return where(keep, x, out)


clip = clamp


@method("clamp_")
def _clamp_(self, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise op_error("clamp_", "At least one of 'min' or 'max' must not be None")
    return inplace(clamp_p, "clamp_", self, min=min, max=max)


@method("clamp_min")
def _clamp_min(self, min):  # noqa: A002
    return clamp(self, min=min)


@method("clamp_max")
def _clamp_max(self, max):  # noqa: A002
    return clamp(self, max=max)


def convert(input, dtype=None, device=None, copy=False):
    """The op behind ``Tensor.to``: a new dtype and/or device (differentiable)."""
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
    src = input.device
    if device is not None:
        device = as_device(device)
        if device == src:
            device = None
    if (dtype is None or dtype is input.dtype) and device is None:
        return clone(input) if copy else input
    return bind(convert_p, input, dtype=dtype, device=device, src_device=src)


@method
def clone(input, *, memory_format=None):
    return bind(clone_p, input)
