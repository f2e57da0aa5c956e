"""The pointwise long tail: NaN-ignoring max/min, integer gcd/lcm, heaviside, ldexp/frexp,
nextafter, dist, cross, diagflat; and the in-place and alias ``Tensor`` methods PyTorch has
for ops declared elsewhere (``eq_``, ``bitwise_and_``, ``addmm_``, ``multiply``, ``mH``...).

Primitives (one block each, so they fuse and render in C where C has the function): ``fmax``
and ``fmin`` (gradient to the operand chosen; on a tie to ``input``, as PyTorch's
``derivatives.yaml`` masks), ``gcd``/``lcm`` (integers only), ``heaviside``, ``nextafter``
(grad to input, zero to other, as PyTorch's), ``logical_xor``/``logical_and``/``logical_or``
over truth values, and frexp's two halves. The rest are composites of existing primitives.

In-place forms follow what PyTorch records for each:

- one differentiable primitive (``atan2_``, ``erf_``...): ``core.inplace`` (its node, the
  checks, the version bump);
- no gradient and no node in PyTorch (``logical_*_``, ``bitwise_*_``, ``gcd_``): also
  ``core.inplace``, which then leaves the target's history as it was, as PyTorch does;
- composites and comparisons (``lerp_``, ``addmm_``, ``eq_``...): computed on a snapshot of
  ``self`` and written with ``copy_`` (``write_result``): nothing the composite saved is the
  tensor being overwritten, and a comparison gives both operands a zero gradient, as
  PyTorch's ``EqBackward1``.
"""
import math
from collections import namedtuple

from .. import dtypes
from ..tensor import Tensor
from .core import Primitive, bind, inplace, op_error
from .declare import install_method, method
from .diagonals import diag_embed, roll
from .elementwise import (
    _keep, abs_p, binary, div_p, div_rounding_p, eq, erf_p, expm1_p, isnan, log1p_p,
    logical_or, neg_p, remainder_p, sign_p, trunc_p, rsqrt_p, where, xor_p,
)
from .inplace_methods import (
    _compare_inplace, _composite_inplace, _prim_inplace, _scan_inplace, torch_name,
)
from .math_ops import copysign_p, exp2, hypot_p
from .more_ops import atan2_p
from .norms import vector_norm
from .rules import broadcast, float_promote, promote, same_shape, to_bool


def _integers_only(op):
    """A dtype rule: the promoted integer dtype; PyTorch's error for floats and bools."""
    def rule(*operands, **_):
        d = promote(*operands)
        if d.is_floating_point or d is dtypes.bool:
            raise NotImplementedError(f'"{op}_cpu" not implemented for \'{torch_name(d)}\'')
        return d
    return rule


def _floats_only(op):
    def rule(*operands, **_):
        d = promote(*operands)
        if not d.is_floating_point:
            raise NotImplementedError(f'"{op}_cpu" not implemented for \'{torch_name(d)}\'')
        return d
    return rule


# fmax / fmin: NaN only where both are; the chosen operand takes the gradient ------------------

def _fmax_keeps_self(a, b):
    """Where fmax(a, b) is a: a >= b, or b is NaN (PyTorch's mask, so a tie goes to a)."""
    return logical_or(a >= b, isnan(b))


def _fmin_keeps_self(a, b):
    return logical_or(a <= b, isnan(b))


fmax_p = binary("fmax", lambda xp, a, b: xp.fmax(a, b),
                (lambda g, a, b, out: where(_fmax_keeps_self(a, b), g, 0.0),
                 lambda g, a, b, out: where(_fmax_keeps_self(a, b), 0.0, g)),
                "fmax", "fmax({self}, {other})", saves=("self", "other"),
                public=True, method=True,
                doc="The larger of input and other, ignoring a NaN unless both are NaN.")
fmin_p = binary("fmin", lambda xp, a, b: xp.fmin(a, b),
                (lambda g, a, b, out: where(_fmin_keeps_self(a, b), g, 0.0),
                 lambda g, a, b, out: where(_fmin_keeps_self(a, b), 0.0, g)),
                "fmin", "fmin({self}, {other})", saves=("self", "other"),
                public=True, method=True,
                doc="The smaller of input and other, ignoring a NaN unless both are NaN.")

# integers, logic and steps (no gradient) ------------------------------------------------------

gcd_p = binary("gcd", lambda xp, a, b: xp.gcd(a, b), None, "gcd", None,
               dtype=_integers_only("gcd"), public=True, method=True,
               doc="Greatest common divisor (non-negative), of integer tensors.")
lcm_p = binary("lcm", lambda xp, a, b: xp.lcm(a, b), None, "lcm", None,
               dtype=_integers_only("lcm"), public=True, method=True,
               doc="Least common multiple (non-negative), of integer tensors.")
gcd_p.kind = lcm_p.kind = "other"      # Euclid's loop has no C expression: NumPy's calls


def _heaviside_dtype(x, values):
    if getattr(x, "dtype", None) is not getattr(values, "dtype", None):
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return x.dtype


# PyTorch's a == 0 ? b : a > 0, so NaN gives 0 (NumPy's heaviside gives NaN)
heaviside_p = binary("heaviside", lambda xp, a, b: xp.where(a == 0, b, a > 0), None,
                     "heaviside", "({self} == 0 ? {other} : ({self} > 0))",
                     np_t="np.where({self} == 0, {other}, {self} > 0)",
                     dtype=_heaviside_dtype, public=True, method=True,
                     inplace_method="heaviside_",
                     doc="0 where x < 0, ``values`` where x == 0, 1 where x > 0.")
heaviside_p.np_out = None       # np.where writes no out=: fused kernels take the np form
# PyTorch's gradient: grad for input (one ulp away, the identity to first order), 0 for other
nextafter_p = binary("nextafter", lambda xp, a, b: xp.nextafter(a, b),
                     (lambda g, a, b, out: g, lambda g, a, b, out: g * 0), "nextafter",
                     "nextafter({self}, {other})", dtype=_floats_only("nextafter"),
                     public=True, method=True, inplace_method="nextafter_",
                     doc="The next float after input in the direction of other.")


def _logical(ufunc, c_op):
    """``ufunc`` over truth values (x != 0), as bool, with no gradient; and its in-place
    method, which keeps the target's history, as PyTorch's (it records no node). The
    functions ``logical_and``/``logical_or`` bind ``bitwise_*`` on bools (elementwise.py);
    these primitives serve their in-place forms and ``logical_xor``."""
    return binary(ufunc, lambda xp, a, b: getattr(xp, ufunc)(a, b), None, ufunc,
                  f"(({{self}} != 0) {c_op} ({{other}} != 0))", dtype=to_bool, operands=_keep,
                  inplace_method=ufunc + "_",
                  doc=f"Elementwise {ufunc[8:]} of the truth values, as bool.")


logical_xor_p = _logical("logical_xor", "!=")
logical_and_p = _logical("logical_and", "&&")
logical_or_p = _logical("logical_or", "||")


@method
def logical_xor(input, other):
    """Elementwise exclusive or of the truth values, as bool."""
    return bind(logical_xor_p, input, other)


@method
def isposinf(input):
    """True where x is +inf (never for integer tensors)."""
    return eq(input, math.inf)


@method
def isneginf(input):
    """True where x is -inf (never for integer tensors)."""
    return eq(input, -math.inf)


@method
def isreal(input):
    """True everywhere: a tensor here is never complex."""
    from ..creation import ones_like
    return ones_like(input, dtype=dtypes.bool)


# ldexp and frexp --------------------------------------------------------------------------

@method
def ldexp(input, other):
    """input * 2 ** other, in the promoted float dtype (float16 stays float16)."""
    dt = float_promote(input, other)
    x = input.to(dt) if isinstance(input, Tensor) else input
    e = other.to(dt) if isinstance(other, Tensor) else float(other)
    return x * (exp2(e) if isinstance(e, Tensor) else 2.0 ** e)


frexp_exponent_p = Primitive(
    "frexp_exponent", lambda xp, x: xp.frexp(x)[1].astype("int32"), dtype=lambda x: dtypes.int32,
    shape=same_shape, np="np.frexp({self})[1].astype(np.int32)", operands=_keep,
    kind="other")       # no C form: frexp's two results do not fit one C expression
frexp_mantissa_p = Primitive(
    "frexp_mantissa", lambda xp, x: xp.frexp(x)[0], dtype=lambda x: x.dtype, shape=same_shape,
    vjp=(lambda g, x, out: g / exp2(bind(frexp_exponent_p, x).to(x.dtype)),),
    saves=("self",), np="np.frexp({self})[0]", kind="other", node="FrexpBackward0")
frexp_result = namedtuple("frexp", ["mantissa", "exponent"])


@method
def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1);
    the exponent is int32. The mantissa's gradient is grad / 2 ** exponent."""
    if not input.dtype.is_floating_point:
        raise op_error("frexp", "torch.frexp() only supports floating-point dtypes")
    return frexp_result(bind(frexp_mantissa_p, input), bind(frexp_exponent_p, input))


# dist, cross, diagflat ----------------------------------------------------------------------

@method
def dist(input, other, p=2):
    """The p-norm of input - other (``linalg.vector_norm``: gradient 0 where they are equal)."""
    return vector_norm(input - other, p)


def _cross_dim(shape, dim, name, sizes):
    if dim is None:
        for d, n in enumerate(shape):
            if n == 3:
                import warnings
                warnings.warn("Using torch.cross without specifying the dim arg is deprecated.",
                              UserWarning, stacklevel=3)
                return d
        raise op_error(name, "no dimension of size 3 in input")
    from .rules import norm_dim
    d = norm_dim(dim, len(shape))
    if shape[d] != 3:
        got = " and ".join(str(s[d]) for s in sizes)
        raise op_error(name, f"inputs dimension {dim} must have length 3. Got {got}")
    return d


@method
def cross(input, other, dim=None):
    """The cross product along ``dim`` (the first dimension of size 3 when None), of inputs
    with as many dimensions, broadcast; PyTorch's errors say ``linalg.cross``."""
    from .shape_ops import broadcast_to
    name = "linalg.cross"
    if input.ndim != other.ndim:
        raise op_error(name, "inputs must have the same number of dimensions.")
    shape = broadcast(input.shape, other.shape)
    a, b = broadcast_to(input, shape), broadcast_to(other, shape)
    d = _cross_dim(shape, dim, name, (input.shape, other.shape))
    # c[i] = a[i+1] b[i+2] - a[i+2] b[i+1]: roll(x, -k)[i] is x[i + k]
    return roll(a, -1, d) * roll(b, -2, d) - roll(a, -2, d) * roll(b, -1, d)


@method
def diagflat(input, offset=0):
    """A matrix with the flattened input on its ``offset`` diagonal."""
    return diag_embed(input.reshape(-1), offset, 0, 1)



# in-place forms (the makers are in inplace_methods.py) ---------------------------------------

def _install_inplace_forms():
    from . import composite, elementwise, more_ops, stacking
    from .elementwise import and_p, logical_not_p, not_p, or_p
    for name, prim in (("absolute_", abs_p), ("atan2_", atan2_p), ("arctan2_", atan2_p),
                       ("copysign_", copysign_p), ("hypot_", hypot_p), ("fmod_", None),
                       ("erf_", erf_p), ("expm1_", expm1_p), ("log1p_", log1p_p),
                       ("negative_", neg_p), ("trunc_", trunc_p),
                       ("sign_", sign_p), ("rsqrt_", rsqrt_p), ("remainder_", remainder_p)):
        install_method(name, _prim_inplace(prim or elementwise.fmod_p, name))
    install_method("floor_divide_", _prim_inplace(div_rounding_p, "floor_divide_",
                                                  rounding_mode="floor"))
    functions = {
        "lerp_": composite.lerp,
        "square_": composite.square, "addmm_": composite.addmm, "addmv_": stacking.addmv,
        "addr_": stacking.addr, "baddbmm_": stacking.baddbmm, "addbmm_": stacking.addbmm,
        "ldexp_": ldexp,
    }
    for name, fn in functions.items():
        install_method(name, _composite_inplace(fn, name))
    for name, fn in (("cumsum_", more_ops.cumsum), ("cumprod_", more_ops.cumprod)):
        install_method(name, _scan_inplace(fn, name))
    # no gradient, the history kept (PyTorch records no node for these in-place forms)
    for name, prim in (("gcd_", gcd_p), ("lcm_", lcm_p), ("logical_not_", logical_not_p),
                       ("bitwise_and_", and_p), ("bitwise_or_", or_p), ("bitwise_xor_", xor_p),
                       ("bitwise_not_", not_p)):
        install_method(name, _prim_inplace(prim, name))
    for name, op_name in (("eq_", "eq"), ("ne_", "ne"), ("lt_", "lt"), ("le_", "le"),
                          ("gt_", "gt"), ("ge_", "ge"), ("greater_", "gt"),
                          ("greater_equal_", "ge"), ("less_", "lt"), ("less_equal_", "le"),
                          ("not_equal_", "ne")):
        install_method(name, _compare_inplace(getattr(elementwise, op_name), name))


_install_inplace_forms()


# aliases and small methods ------------------------------------------------------------------

def _install_aliases():
    from . import elementwise, shape_ops
    from .composite import true_divide
    for name, fn in (("absolute", elementwise.abs), ("divide", elementwise.div),
                     ("multiply", elementwise.mul), ("subtract", elementwise.sub),
                     ("greater", elementwise.gt), ("greater_equal", elementwise.ge),
                     ("less", elementwise.lt), ("less_equal", elementwise.le),
                     ("not_equal", elementwise.ne), ("clip", elementwise.clamp),
                     ("moveaxis", shape_ops.movedim)):
        install_method(name, fn)
    for name, existing in (("clip_", "clamp_"), ("multiply_", "mul_"), ("subtract_", "sub_")):
        install_method(name, getattr(Tensor, existing))
    install_method("divide_", _divide_)
    install_method("true_divide_", _composite_inplace(true_divide, "true_divide_"))


def _divide_(self, other, *, rounding_mode=None):
    """In-place ``divide``; ``rounding_mode`` as ``div``'s."""
    if rounding_mode is None:
        return inplace(div_p, "divide_", self, other)
    if rounding_mode not in ("floor", "trunc"):
        raise op_error("divide_", f"div expected rounding_mode to be one of None, 'trunc', or "
                                  f"'floor' but found '{rounding_mode}'")
    return inplace(div_rounding_p, "divide_", self, other, rounding_mode=rounding_mode)


_install_aliases()


def moveaxis(input, source, destination):
    """``movedim``, by NumPy's name."""
    from .shape_ops import movedim
    return movedim(input, source, destination)


@method
def is_nonzero(input):
    """The truth of a one-element tensor (PyTorch's error for any other)."""
    n = input.numel()
    if n != 1:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if n == 0 else
                           "Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


@method
def is_same_size(input, other):
    """Whether the two shapes are equal."""
    return tuple(input.shape) == tuple(other.shape)


@method
def get_device(input):
    """-1 for a CPU tensor, else the cuda device's index."""
    return -1 if input.device.type == "cpu" else (input.device.index or 0)


@method("itemsize")
@property
def _itemsize(self):
    """Bytes per element."""
    return self.element_size()


@method
def byte(input, memory_format=None):
    """``to(uint8)``."""
    return input.to(dtypes.uint8)


@method
def char(input, memory_format=None):
    """``to(int8)``."""
    return input.to(dtypes.int8)


def _matrix_transpose(input, what):
    if input.ndim < 2:
        raise RuntimeError(f"tensor.{what} is only supported on matrices or batches of matrices. "
                           f"Got {input.ndim}-D tensor.")
    return input.transpose(-2, -1)


@method
def adjoint(input):
    """The conjugate transpose of the last two dimensions (a view; real tensors: mT)."""
    return _matrix_transpose(input, "adjoint()")


@method("mH")
@property
def _mH(self):
    return _matrix_transpose(self, "mH")


@method("H")
@property
def _H(self):
    if self.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.ndim}-D tensor." + (" For batches of matrices, consider "
                                                       "using tensor.mH" if self.ndim > 2 else ""))
    return self if self.ndim == 0 else self.transpose(0, 1)


__all__ = ["fmax", "fmin", "gcd", "lcm", "heaviside", "nextafter", "logical_xor", "isposinf",
           "isneginf", "isreal", "ldexp", "frexp", "dist", "cross", "diagflat", "moveaxis",
           "is_nonzero", "is_same_size", "adjoint"]
