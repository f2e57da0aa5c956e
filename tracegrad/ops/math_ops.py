"""More of PyTorch's elementwise math.

Primitives (one block each, so they fuse and render in C and CUDA, whose ``<tgmath.h>`` and
device math have every one of them): the hyperbolic ``sinh``/``cosh``, ``tan``, the inverse
trigonometric and hyperbolic functions, ``log2``/``log10``/``exp2``, ``reciprocal``,
``erfc``, ``hypot``, ``copysign`` and ``signbit``. Their derivatives are PyTorch's formulas
(``derivatives.yaml``), so they agree with PyTorch where the function has a kink or a pole.

Composites of primitives: ``deg2rad``/``rad2deg``, ``frac``, ``fix``, ``sgn``, ``positive``,
``logit``, ``xlogy``, ``sinc``, ``float_power``, ``clamp_min``/``clamp_max``, ``addcmul`` and
``addcdiv``. The ``arc*`` names are NumPy's spellings, which PyTorch keeps as aliases.
"""
import math

from .. import dtypes
from ..tensor import Tensor
from .core import Primitive, op_error
from .declare import install_method, method
from .elementwise import (
    _as_float, _clamp_max, _clamp_min, _keep, binary, clamp, eq, exp, isnan, log, logical_and,
    logical_not, sign, sin, trunc, unary_float, where,
)
from .rules import float_promote, same_shape, to_bool
from .special import erf as _erf

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _float_unary(name, impl, vjp, saves=("self",), doc=""):
    """A float unary primitive whose NumPy ufunc and C function share ``name``'s NumPy
    spelling (``impl``), with its ``Tensor`` method and in-place method."""
    return unary_float(name, lambda xp, x: getattr(xp, impl)(x), vjp, impl, f"{name}({{self}})",
                       saves=saves, public=True, method=True, inplace_method=f"{name}_",
                       doc=doc)


sinh_p = _float_unary("sinh", "sinh", lambda g, x, out: g * cosh(x), doc="Hyperbolic sine.")
cosh_p = _float_unary("cosh", "cosh", lambda g, x, out: g * sinh(x), doc="Hyperbolic cosine.")
tan_p = _float_unary("tan", "tan", lambda g, x, out: g * (out * out + 1), saves=("result",),
                     doc="Tangent; tan'(x) = 1 + tan(x)^2.")
asin_p = _float_unary("asin", "arcsin", lambda g, x, out: g * (1 - x * x).rsqrt(),
                      doc="Inverse sine, on [-1, 1].")
acos_p = _float_unary("acos", "arccos", lambda g, x, out: -g * (1 - x * x).rsqrt(),
                      doc="Inverse cosine, on [-1, 1].")
atan_p = _float_unary("atan", "arctan", lambda g, x, out: g / (x * x + 1),
                      doc="Inverse tangent.")
asinh_p = _float_unary("asinh", "arcsinh", lambda g, x, out: g * (x * x + 1).rsqrt(),
                       doc="Inverse hyperbolic sine.")
acosh_p = _float_unary("acosh", "arccosh", lambda g, x, out: g * (x * x - 1).rsqrt(),
                       doc="Inverse hyperbolic cosine, on [1, inf).")
atanh_p = _float_unary("atanh", "arctanh", lambda g, x, out: g / (1 - x * x),
                       doc="Inverse hyperbolic tangent, on (-1, 1).")
log2_p = _float_unary("log2", "log2", lambda g, x, out: g / (x * _LN2),
                      doc="Base-2 logarithm.")
log10_p = _float_unary("log10", "log10", lambda g, x, out: g / (x * _LN10),
                       doc="Base-10 logarithm.")
exp2_p = _float_unary("exp2", "exp2", lambda g, x, out: g * out * _LN2, saves=("result",),
                      doc="2 to the power of each element.")
reciprocal_p = unary_float("reciprocal", lambda xp, x: xp.reciprocal(x),
                           lambda g, x, out: -g * (out * out), "reciprocal", "1 / {self}",
                           saves=("result",), public=True, method=True,
                           inplace_method="reciprocal_", doc="1 / x, in a float dtype.")
erfc_p = unary_float("erfc", lambda xp, x: 1 - _erf(xp, x),
                     lambda g, x, out: g * exp(-(x * x)) * -_TWO_OVER_SQRT_PI,
                     "1 - _erf(np, {self})", "erfc({self})", helpers={"_erf": _erf},
                     public=True, method=True, inplace_method="erfc_",
                     doc="The complementary error function 1 - erf(x).")
hypot_p = binary("hypot", lambda xp, a, b: xp.hypot(_as_float(a), _as_float(b)),
                 (lambda g, a, b, out: g * a / out, lambda g, a, b, out: g * b / out),
                 "hypot", "hypot({self}, {other})", saves=("self", "other", "result"),
                 dtype=float_promote, public=True, method=True,
                 doc="sqrt(a^2 + b^2), without overflow for large a or b.")
copysign_p = binary("copysign", lambda xp, a, b: xp.copysign(_as_float(a), _as_float(b)),
                    (lambda g, a, b, out: g * where(eq(a, 0), 0.0, out / a),
                     lambda g, a, b, out: g * 0),
                    "copysign", "copysign({self}, {other})", saves=("self", "result"),
                    dtype=float_promote, public=True, method=True,
                    doc="|a| with the sign of b (the sign bit: -0.0 counts as negative).")
signbit_p = Primitive("signbit", lambda xp, x: xp.signbit(x), dtype=to_bool, shape=same_shape,
                      np="np.signbit({self})", np_out="np.signbit({self}, out={out})",
                      c="(signbit({self}) != 0)", operands=_keep, kind="elementwise", public=True,
                      method=True, doc="Whether the sign bit is set (-0.0 and -nan too).")

arcsin, arccos, arctan = asin, acos, atan            # noqa: F821 - declared above (public=)
arcsinh, arccosh, arctanh = asinh, acosh, atanh      # noqa: F821
for _alias, _name in (("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"),
                      ("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh")):
    install_method(_alias, getattr(Tensor, _name))
    install_method(_alias + "_", getattr(Tensor, _name + "_"))


# composites -------------------------------------------------------------------------------

def _floating(x):
    """``x`` in a float dtype (PyTorch's result type for these functions on integers)."""
    if isinstance(x, Tensor) and not x.dtype.is_floating_point:
        return x.to(dtypes.get_default_dtype())
    return x


@method
def deg2rad(input):
    """Degrees to radians."""
    return _floating(input) * (math.pi / 180.0)


@method
def rad2deg(input):
    """Radians to degrees."""
    return _floating(input) * (180.0 / math.pi)


@method
def frac(input):
    """The fractional part x - trunc(x), with the sign of x; gradient 1."""
    return input - trunc(input)


@method
def fix(input):
    """``trunc``, by NumPy's name."""
    return trunc(input)


@method
def sgn(input):
    """``sign`` (for real tensors they are the same)."""
    return sign(input)


@method
def positive(input):
    """``input`` itself, as PyTorch returns it (bool tensors have no positive)."""
    if input.dtype is dtypes.bool:
        raise TypeError("The `+` operator, on a bool tensor is not supported.")
    return input


@method
def logit(input, eps=None):
    """log(p / (1 - p)); with ``eps``, p clamped to [eps, 1 - eps] first (zero gradient
    outside, as PyTorch's)."""
    p = _floating(input)
    if eps is not None:
        p = clamp(p, eps, 1.0 - eps)
    return log(p / (1 - p))


def _operands(a, b):
    """``a`` and ``b`` as tensors (a Python number takes the other's dtype rule and device)."""
    from ..creation import tensor
    if not isinstance(a, Tensor):
        a = tensor(a, dtype=float_promote(b, a), device=b.device)
    if not isinstance(b, Tensor):
        b = tensor(b, dtype=float_promote(a, b), device=a.device)
    return a, b


@method
def xlogy(input, other):
    """x * log(y), 0 where x is 0 (unless y is NaN), as ``scipy.special.xlogy``."""
    x, y = (_floating(t) for t in _operands(input, other))
    zero = logical_and(eq(x, 0), logical_not(isnan(y)))
    return where(zero, 0.0, x * log(where(zero, 1.0, y)))


@method
def sinc(input):
    """sin(pi x) / (pi x), 1 at 0 (where its gradient is 0)."""
    x = _floating(input)
    zero = eq(x, 0)
    pix = where(zero, 1.0, x) * math.pi
    return where(zero, 1.0, sin(pix) / pix)


@method
def float_power(input, exponent):
    """``pow`` computed in float64, as PyTorch's."""
    def double(v):
        return v.to(dtypes.float64) if isinstance(v, Tensor) else float(v)
    if not isinstance(input, Tensor):
        from ..creation import tensor
        input = tensor(float(input), dtype=dtypes.float64, device=exponent.device)
    return double(input) ** double(exponent)


clamp_min, clamp_max = _clamp_min, _clamp_max      # Tensor.clamp_min/_max already


@method("clamp_min_")
def _clamp_min_(self, min):  # noqa: A002 - PyTorch's name
    return self.clamp_(min=min)


@method("clamp_max_")
def _clamp_max_(self, max):  # noqa: A002 - PyTorch's name
    return self.clamp_(max=max)


@method
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    return input + (tensor1 * tensor2 if value == 1 else tensor1 * tensor2 * value)


@method
def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (true division, as PyTorch's)."""
    return input + (tensor1 / tensor2 if value == 1 else tensor1 / tensor2 * value)


def _inplace_composite(fn):
    """``Tensor.<fn>_``: the result written into ``self`` (through ``copy_``: versions and
    autograd as any in-place write), refusing a float result for an integer tensor."""
    def apply(self, *args, **kwargs):
        out = fn(self, *args, **kwargs)
        if out.dtype.is_floating_point and not self.dtype.is_floating_point:
            raise op_error(apply.__name__, f"result type {out.dtype.name.capitalize()} can't "
                           f"be cast to the desired output type {self.dtype.name.capitalize()}")
        return self.copy_(out)
    apply.__name__ = fn.__name__ + "_"
    return apply


for _fn in (deg2rad, rad2deg, frac, fix, sgn, logit, xlogy, float_power, addcmul, addcdiv,
            sinc):
    install_method(_fn.__name__ + "_", _inplace_composite(_fn))

__all__ = ["sinh", "cosh", "tan", "asin", "acos", "atan", "asinh", "acosh", "atanh", "arcsin",
           "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "log2", "log10", "exp2",
           "reciprocal", "erfc", "hypot", "copysign", "signbit", "deg2rad", "rad2deg", "frac",
           "fix", "sgn", "positive", "logit", "xlogy", "sinc", "float_power", "clamp_min",
           "clamp_max", "addcmul", "addcdiv"]
