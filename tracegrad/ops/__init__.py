"""The primitive table and the public op functions; attaches them to ``Tensor``.

``PRIMITIVES`` maps a name to its ``Primitive`` (shape/dtype rule, VJP rule,
templates); every public function below is either one primitive or a
composite of them.
"""
from ..tensor import Tensor
from . import composite, elementwise, index_ops, linalg, reduce_ops, shape_ops
from .composite import (
    addmm, gelu, lerp, log_softmax, logsumexp, mean, norm, rsub, silu, softmax, softplus, square,
    std, std_mean, true_divide, var, var_mean,
)
from .core import PRIMITIVES, Aval, Primitive, bind, inplace, op_error, sum_to_shape
from .elementwise import (
    abs, absolute, add, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, ceil, clamp, clip,
    clone, convert, cos, div, eq, erf, exp, expm1, floor, ge, gt, isinf, isnan, le, log, log1p,
    logical_and, logical_not, logical_or, lt, maximum, minimum, mul, ne, neg, negative, pow,
    relu, round, rsqrt, sigmoid, sign, sin, sqrt, sub, tanh, trunc, where,
)
from .index_ops import (
    gather, index, index_select, masked_fill, masked_select, nonzero, scatter_add, setitem,
    take_along_dim,
)
from .linalg import bmm, dot, matmul, mm, mv, outer
from .reduce_ops import all, amax, amin, any, argmax, argmin, max, min, prod, sum
from .shape_ops import (
    broadcast_tensors, broadcast_to, cat, chunk, concat, concatenate, contiguous, expand,
    expand_as, flatten, flip, movedim, narrow, permute, reshape, reshape_as, split, squeeze,
    stack, swapaxes, swapdims, t, transpose, unbind, unflatten, unsqueeze, view, view_as,
)

multiply, divide, subtract = mul, div, sub
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
to_copy = convert


def remainder(input, other):
    return input - floor(input / other) * other


def floor_divide(input, other):
    return div(input, other, rounding_mode="floor")


def detach(input):
    return input.detach()


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "Tensor", "composite", "elementwise", "index_ops", "linalg", "reduce_ops", "shape_ops",
    "core", "rules", "Primitive", "Aval", "PRIMITIVES", "bind", "inplace", "op_error",
    "sum_to_shape", "to_copy", "convert", "index", "setitem")]


# Tensor methods ------------------------------------------------------------------

_METHODS = [
    abs, absolute, add, all, amax, amin, any, argmax, argmin, bitwise_and, bitwise_not,
    bitwise_or, bitwise_xor, broadcast_to, ceil, chunk, clamp, clip, clone, contiguous, cos, div,
    divide, eq, erf, exp, expand_as, expm1, flatten, flip, floor, gather, ge, gelu, gt,
    index_select, isinf, isnan, le, lerp, log, log1p, log_softmax, logical_and, logical_not,
    logical_or, logsumexp, lt, masked_fill, masked_select, matmul, max, maximum, mean, min,
    minimum, mm, bmm, mv, dot, movedim, mul, multiply, narrow, ne, neg, negative, nonzero, norm,
    outer, pow, prod, relu, remainder, reshape_as, round, rsqrt, scatter_add, sigmoid, sign, sin,
    softmax, split, sqrt, square, squeeze, std, sub, subtract, sum, swapaxes, swapdims, t,
    take_along_dim, tanh, transpose, true_divide, trunc, unbind, unflatten, unsqueeze, var,
    view_as, floor_divide, silu, softplus,
]
for _fn in _METHODS:
    setattr(Tensor, _fn.__name__, _fn)

Tensor.reshape = lambda self, *shape: reshape(self, *shape)
Tensor.view = lambda self, *shape: view(self, *shape)
Tensor.permute = lambda self, *dims: permute(self, *dims)
Tensor.expand = lambda self, *sizes: expand(self, *sizes)
Tensor.where = lambda self, condition, other: where(condition, self, other)
Tensor.clamp_min = lambda self, min: clamp(self, min=min)
Tensor.clamp_max = lambda self, max: clamp(self, max=max)
Tensor.type_as = lambda self, other: self.to(other.dtype)
Tensor.T = property(lambda self: permute(self, tuple(reversed(range(self.ndim)))))
Tensor.mT = property(lambda self: transpose(self, -2, -1))


def _new(fn):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        return fn(*size, dtype=dtype or self.dtype, device=device or self.device,
                  requires_grad=requires_grad)
    return method


def _install_new_methods():
    from .. import creation
    Tensor.new_zeros = _new(creation.zeros)
    Tensor.new_ones = _new(creation.ones)
    Tensor.new_empty = _new(creation.empty)
    Tensor.new_full = lambda self, size, fill_value, dtype=None, device=None, requires_grad=False: \
        creation.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                      requires_grad=requires_grad)
    Tensor.new_tensor = lambda self, data, dtype=None, device=None, requires_grad=False: \
        creation.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                        requires_grad=requires_grad)


# operators -----------------------------------------------------------------------

def _reflected(fn):
    return lambda self, other: fn(other, self)


Tensor.__add__ = Tensor.__radd__ = add
Tensor.__sub__ = sub
Tensor.__rsub__ = _reflected(sub)
Tensor.__mul__ = Tensor.__rmul__ = mul
Tensor.__truediv__ = div
Tensor.__rtruediv__ = _reflected(div)
Tensor.__floordiv__ = floor_divide
Tensor.__rfloordiv__ = _reflected(floor_divide)
Tensor.__mod__ = remainder
Tensor.__pow__ = pow
Tensor.__rpow__ = _reflected(pow)
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = _reflected(matmul)
Tensor.__neg__ = neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = abs
Tensor.__eq__ = eq
Tensor.__ne__ = ne
Tensor.__lt__ = lt
Tensor.__le__ = le
Tensor.__gt__ = gt
Tensor.__ge__ = ge
Tensor.__and__ = Tensor.__rand__ = bitwise_and
Tensor.__or__ = Tensor.__ror__ = bitwise_or
Tensor.__xor__ = Tensor.__rxor__ = bitwise_xor
Tensor.__invert__ = bitwise_not
Tensor.__getitem__ = index


def _setitem(self, key, value):
    setitem(self, key, value)


Tensor.__setitem__ = _setitem


# in-place methods -------------------------------------------------------------------

def _inplace_binary(prim, name):
    def method(self, other, *, alpha=1):
        if alpha != 1:
            other = mul(other, alpha)
        return inplace(prim, name, self, other)
    method.__name__ = name
    return method


def _inplace_unary(prim, name):
    def method(self):
        return inplace(prim, name, self)
    method.__name__ = name
    return method


Tensor.add_ = Tensor.__iadd__ = _inplace_binary(elementwise.add_p, "add_")
Tensor.sub_ = Tensor.__isub__ = _inplace_binary(elementwise.sub_p, "sub_")
Tensor.mul_ = Tensor.__imul__ = _inplace_binary(elementwise.mul_p, "mul_")
Tensor.div_ = Tensor.__itruediv__ = _inplace_binary(elementwise.div_p, "div_")
Tensor.relu_ = _inplace_unary(elementwise.relu_p, "relu_")
Tensor.neg_ = _inplace_unary(elementwise.neg_p, "neg_")
for _name in ("exp", "log", "sqrt", "tanh", "sigmoid", "sin", "cos", "abs", "floor", "ceil"):
    setattr(Tensor, _name + "_", _inplace_unary(getattr(elementwise, _name + "_p"), _name + "_"))


def _pow_(self, exponent):
    if isinstance(exponent, Tensor):
        return inplace(elementwise.pow_p, "pow_", self, exponent)
    return inplace(elementwise.pow_scalar_p, "pow_", self, exponent=exponent)


def _clamp_(self, min=None, max=None):
    if min is None and max is None:
        raise op_error("clamp_", "At least one of 'min' or 'max' must not be None")
    return inplace(elementwise.clamp_p, "clamp_", self, min=min, max=max)


def _fill_(self, value):
    return inplace(index_ops.index_put_p, "fill_", self, value, spec=(Ellipsis,))


def _zero_(self):
    return _fill_(self, 0)


def _copy_(self, src, non_blocking=False):
    if isinstance(src, Tensor) and src.device != self.device:
        src = src.to(self.device)
    return inplace(index_ops.index_put_p, "copy_", self, src, spec=(Ellipsis,))


def _masked_fill_(self, mask, value):
    if mask.dtype.name != "bool":
        raise op_error("masked_fill_", f"masked_fill_ only supports boolean masks, but got mask "
                                       f"with dtype {mask.dtype.name}")
    mask = shape_ops.broadcast_if_needed(mask, self.shape)
    return inplace(index_ops.index_put_p, "masked_fill_", self, value, mask, spec=(("t", 0),))


Tensor.pow_ = Tensor.__ipow__ = _pow_
Tensor.clamp_ = _clamp_
Tensor.fill_ = _fill_
Tensor.zero_ = _zero_
Tensor.copy_ = _copy_
Tensor.masked_fill_ = _masked_fill_
