"""The primitive table and the public op functions; attaches them to ``Tensor``.

``PRIMITIVES`` maps a name to its ``Primitive`` (shape/dtype rule, VJP rule,
templates); every public function below is either one primitive or a
composite of them. Functions are generated from a primitive's declaration
(``public=``) or written beside it, and each says there whether it is a ``Tensor``
method (``method=`` / ``@method``): this file keeps no list of methods, only the
Python operators.
"""
import types as _types

from ..tensor import Tensor
from . import collapse  # noqa: F401 - fills declare's slots: composites collapse into one node
from . import composite, elementwise, index_ops, linalg, pool, reduce_ops, shape_ops
from . import conv, pad  # noqa: F401 - convolution and im2col primitives; padding primitives
from . import more_ops  # noqa: F401 - scans, sorting, einsum, random draws (exported by tracegrad)
from .math_ops import *  # noqa: F401,F403 - inverse trigonometry, log2, hypot, xlogy, addcmul...
from .stacking import *  # noqa: F401,F403 - atleast_*, hstack..., rot90, tensordot, kron, addmv...
from .reduce_more import *  # noqa: F401,F403 - nansum, median, quantile, cummax, logcumsumexp...
from .special_fns import *  # noqa: F401,F403 - lgamma, digamma, polygamma, erfinv, i0 (SciPy)
from .pointwise_more import *  # noqa: F401,F403 - fmax, gcd, ldexp, heaviside, in-place forms...
from .index_more import *  # noqa: F401,F403 - take, select_scatter, index_add, tensor_split...
from .search_count import *  # noqa: F401,F403 - bucketize, searchsorted, bincount, histc, isin...
from .statistics import *  # noqa: F401,F403 - cov, corrcoef, cdist, trapezoid, vander, renorm...
from .methods_more import *  # noqa: F401,F403 - repeat, tile, ravel, Tensor.unfold, vdot...
from . import nn_ops  # noqa: F401 - addmm and embedding primitives (Linear's, Embedding's nodes)
from . import slice_grads  # noqa: F401 - one buffer for the gradients of many slices
from .composite import (
    addmm, floor_divide, gelu, isfinite, lerp, log_softmax, logsumexp, mean, norm, remainder,
    rsub, silu, softmax, softplus, square, std, std_mean, true_divide, var, var_mean,
)
from .core import PRIMITIVES, Aval, Primitive, bind, inplace, op_error, sum_to_shape
from .data_dependent import argwhere, nonzero, unique
from .fill_scatter import index_fill, scatter, tril_indices, triu_indices
from .elementwise import (
    absolute, add, clamp, clip, clone, convert, div, logical_and, logical_or, negative, pow,
    round, sub, where,
)
from .index_ops import gather, index, index_select, scatter_add, setitem
from .masked_ops import masked_fill, masked_select, take_along_dim
from .linalg import bmm, dot, matmul, mm, mv, outer
from .reduce_ops import all, amax, amin, any, argmax, argmin, max, min, prod, sum
from .shape_ops import (
    broadcast_tensors, broadcast_to, cat, chunk, concat, concatenate, contiguous, expand,
    expand_as, flatten, flip, movedim, narrow, permute, reshape, reshape_as, split, squeeze,
    stack, swapaxes, swapdims, t, transpose, unbind, unflatten, unsqueeze, view, view_as,
)

# The functions that primitives declare with public= (exp, mul, eq, ...).
globals().update({p.public: p.function for p in PRIMITIVES.values() if p.public})

multiply, divide, subtract = mul, div, sub  # noqa: F821 - mul is declared by mul_p
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne  # noqa: F821
to_copy = convert


def detach(input):
    return input.detach()


__all__ = [n for n, v in globals().items() if not n.startswith("_") and n not in (
    "Tensor", "Primitive", "Aval", "PRIMITIVES", "bind", "inplace", "op_error",
    "sum_to_shape", "to_copy", "convert", "index", "setitem")
    and not isinstance(v, _types.ModuleType)]


# Tensor methods that no function stands for ---------------------------------------

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


def _rsub(self, other):
    """``other - self``; NotImplemented when ``self`` is no tensor, as PyTorch's
    ``Tensor.__rsub__(2.0, t)`` answers (its binding's TypeError, turned into
    NotImplemented)."""
    return sub(other, self) if isinstance(self, Tensor) else NotImplemented


Tensor.__add__ = Tensor.__radd__ = add
Tensor.__sub__ = sub
Tensor.__rsub__ = _rsub
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


# in-place operators: the in-place methods, declared beside their functions ------------

Tensor.__iadd__ = Tensor.add_
Tensor.__isub__ = Tensor.sub_
Tensor.__imul__ = Tensor.mul_
Tensor.__itruediv__ = Tensor.div_
Tensor.__ipow__ = Tensor.pow_
