"""Comparisons, logic and ``where``: elementwise primitives without a gradient (but where's).

``binary`` declares a binary elementwise primitive computed by one NumPy ufunc; the
comparisons here and the arithmetic of ``elementwise_arithmetic`` are declared with it.
Comparisons compute in their operands' promoted dtype and give bool; ``logical_and`` and
``logical_or`` bind the bitwise primitives on bools.
"""
from .. import dtypes
from .core import Primitive, bind, declaration_helper
from .data_dependent import nonzero
from .declare import method
from .rules import broadcast, promote, same_shape, to_bool


@declaration_helper
def binary(name, impl, vjp, ufunc, c, saves=(), dtype=promote, node=None, inplace=None,
           np_t=None, operands=None, **declare):
    """A binary elementwise primitive computed by the NumPy ufunc ``ufunc``."""
    return Primitive(name, impl, args=("self", "other"), dtype=dtype, shape=broadcast, vjp=vjp,
                     saves=saves, np=np_t or f"np.{ufunc}({{self}}, {{other}})",
                     np_out=f"np.{ufunc}({{self}}, {{other}}, out={{out}})", c=c,
                     operands=operands, kind="elementwise", node=node, inplace=inplace,
                     **declare)


def _keep(out, *operands):
    """Operands computed in their own dtypes (tests and casts)."""
    return operands


def _promoted(out, *operands):
    """Operands computed in their promoted dtype (comparisons: the result is bool)."""
    common = promote(*operands)
    return tuple(common for _ in operands)


def _condition_first(out, cond, a, b):
    return (cond, out, out)


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
        return nonzero(condition, as_tuple=True)
    return bind(where_p, condition, input, other)


@method("where")
def _where_method(self, condition, other):
    """``x.where(condition, y)`` is ``where(condition, x, y)``."""
    return where(condition, self, other)
