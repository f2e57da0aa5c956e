"""Unary math: exp, log, the trigonometric ops, neg/abs/sign, relu, and the rounding ops.

Rules follow PyTorch at non-differentiable points: relu'(0) = 0, abs'(0) = 0,
sqrt'(0) = inf; rounding ops have a zero gradient. A declaration with ``public=True``
defines its function in this module (``exp``, ``sin``... are generated, not written out
below); ``method=`` and ``inplace_method=`` put it on ``Tensor``.
"""
import math

from .. import _hooks, dtypes
from .core import LINEAR, Primitive, bind, declaration_helper
from .declare import method
from .elementwise_logic import where
from .rules import broadcast, float_promote, promote, same_shape
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
# exp(-logaddexp(0, -x)) and the two-sided C form never overflow. In C both sides read the one
# exp(-|x|) (exp(-x) where x >= 0, exp(x) below: the same values), which the compiler computes
# once for a vector of x where exp(-x) and exp(x) were two (an LSTM's three gates a step)
sigmoid_p = unary_float(
    "sigmoid", lambda xp, x: _sigmoid(xp, x),
    lambda g, x, out: bind(sigmoid_backward_p, g, out),
    "np.exp(-np.logaddexp(0, -{self}))",
    "({self} >= 0 ? 1 / (1 + exp(-fabs({self}))) : exp(-fabs({self})) / (1 + exp(-fabs({self}))))",
    cuda="({self} >= 0 ? 1 / (1 + exp(-{self})) : exp({self}) / (1 + exp({self})))",
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


def literal_value(literal):
    """The number a rendered C literal stands for (``2.0f`` -> 2.0)."""
    try:
        return float(str(literal).rstrip("fL"))
    except ValueError:
        return None


negative = neg  # noqa: F821 - neg and abs are declared by neg_p and abs_p (public=True)
absolute = abs


@method
def round(input, decimals=0):  # noqa: A001
    """Round half to even, as PyTorch does; zero gradient."""
    return bind(round_p, input, decimals=decimals)
