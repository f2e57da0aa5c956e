"""Reduction primitives: sum, amax/amin, prod, argmax/argmin, any/all.

``dims`` is always a sorted tuple of non-negative dims (the public functions
normalise ``dim``); a reduction over every dim has ``dims == tuple(range(ndim))``.
"""
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from . import prim_node
from .core import LINEAR, Combiner, Primitive, bind, op_error
from .declare import method, rename_node
from .elementwise import eq, maximum, minimum, where
from .index_ops import gather
from .rules import norm_dim, norm_dims, reduced_shape, reduction_dims
from .shape_ops import broadcast_if_needed, reshape, squeeze


def _reduce_shape(shape, dims, keepdim):
    for d in dims:
        if d >= (len(shape) or 1):   # max() is shadowed here
            raise IndexError(f"Dimension out of range (got {d} for a {len(shape)}-d tensor)")
    return reduced_shape(shape, dims, keepdim)


def _expand_back(g, shape, dims, keepdim):
    """Broadcast a reduced gradient back to the input's shape."""
    if not keepdim and dims:
        g = reshape(g, reduced_shape(shape, dims, True))
    return broadcast_if_needed(g, shape)


def _lowest(dtype):
    return -float("inf") if dtype.is_floating_point else int(np.iinfo(dtype.np).min)


def _highest(dtype):
    return float("inf") if dtype.is_floating_point else int(np.iinfo(dtype.np).max)


# How parts combine. The max/min forms propagate NaN as NumPy's max and min do.
SUM = Combiner("add", "{acc} + {x}", lambda dtype: 0, widen=True)
PROD = Combiner("multiply", "{acc} * {x}", lambda dtype: 1, widen=True)
MAX = Combiner("maximum", "({acc} > {x} || isnan({acc}) ? {acc} : {x})", _lowest, widen=False)
MIN = Combiner("minimum", "({acc} < {x} || isnan({acc}) ? {acc} : {x})", _highest, widen=False)


def _sum_dtype(x, dims, keepdim, dtype=None):
    if dtype is not None:
        return dtype
    return dtypes.int64 if not x.dtype.is_floating_point else x.dtype


sum_p = Primitive(
    "sum", lambda xp, x, dims, keepdim, dtype=None: xp.sum(
        x, axis=dims, keepdims=keepdim, dtype=None if dtype is None else dtype.np),
    dtype=_sum_dtype, shape=lambda s, dims, keepdim, dtype=None: _reduce_shape(s, dims, keepdim),
    vjp=(lambda g, x, out, dims, keepdim, dtype=None: _expand_back(g, x.shape, dims, keepdim),),
    np="np.sum({self}, axis={dims}, keepdims={keepdim})",
    np_out="np.sum({self}, axis={dims}, keepdims={keepdim}, out={out})", reduce=SUM,
    kind="reduction", jvp=LINEAR)


def _extremum_grad(g, x, out, dims, keepdim):
    """Ties share the gradient evenly, as PyTorch's amax/amin and full max/min do."""
    out_k = _expand_back(out, x.shape, dims, keepdim)
    mask = eq(x, out_k).to(g.dtype)
    count = sum(mask, dims, keepdim=True)
    return _expand_back(g, x.shape, dims, keepdim) * mask / count


def _nonempty(xp, f, x, dims, keepdim, name):
    if x.size == 0 and (not dims or 0 in [x.shape[d] for d in dims]):   # any() is shadowed
        raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
    return f(x, axis=dims, keepdims=keepdim)


def _extremum_prim(name, np_name, combiner):
    """amax/amin: the same rules over ``xp.max``/``xp.min``."""
    return Primitive(
        name, lambda xp, x, dims, keepdim: _nonempty(xp, getattr(xp, np_name), x, dims, keepdim,
                                                     name),
        dtype=lambda x, dims, keepdim: x.dtype,
        shape=lambda s, dims, keepdim: _reduce_shape(s, dims, keepdim),
        vjp=(lambda g, x, out, dims, keepdim: _extremum_grad(g, x, out, dims, keepdim),),
        saves=("self", "result"), np=f"np.{np_name}({{self}}, axis={{dims}}, keepdims={{keepdim}})",
        np_out=f"np.{np_name}({{self}}, axis={{dims}}, keepdims={{keepdim}}, out={{out}})",
        reduce=combiner, exact=("self",), kind="reduction")


amax_p = _extremum_prim("amax", "max", MAX)
amin_p = _extremum_prim("amin", "min", MIN)


def _prod_grad(g, x, out, dims, keepdim):
    """d prod / dx_i = prod of the others, exact where x holds zeros.

    The others' product is (product of the non-zeros p, over x_i if x_i != 0) times
    the product of the zeros other than x_i, written exact to first order (1, the one
    other zero, or 0) so that the second derivative at zeros is exact too.
    """
    zero = eq(x, 0)
    safe_x = where(zero, 1.0, x)
    p = prod(safe_x, dims, keepdim=True)
    other_zeros = sum(zero, dims, keepdim=True) - where(zero, 1, 0)
    zeros_sum = sum(where(zero, x, 0.0), dims, keepdim=True) - where(zero, x, 0.0)
    rest = where(eq(other_zeros, 0), 1.0, where(eq(other_zeros, 1), zeros_sum, 0.0))
    return _expand_back(g, x.shape, dims, keepdim) * where(zero, p, p / safe_x) * rest


prod_p = Primitive(
    "prod", lambda xp, x, dims, keepdim: xp.prod(x, axis=dims, keepdims=keepdim),
    dtype=lambda x, dims, keepdim: _sum_dtype(x, dims, keepdim),
    shape=lambda s, dims, keepdim: _reduce_shape(s, dims, keepdim),
    vjp=(lambda g, x, out, dims, keepdim: _prod_grad(g, x, out, dims, keepdim),),
    saves=("self", "result"), np="np.prod({self}, axis={dims}, keepdims={keepdim})",
    np_out="np.prod({self}, axis={dims}, keepdims={keepdim}, out={out})", reduce=PROD,
    kind="reduction")


def _arg_impl(xp, f, x, dim, keepdim):
    if dim is None or x.ndim == 0:          # (CuPy takes no axis for a 0-d array)
        r = f(x.reshape(-1))
        return xp.asarray(r).reshape((1,) * x.ndim if keepdim else ())
    return f(x, axis=dim, keepdims=keepdim)


def _arg_prim(name):
    """argmax/argmin: int64 indices, no gradient."""
    return Primitive(
        name, lambda xp, x, dim, keepdim: _arg_impl(xp, getattr(xp, name), x, dim, keepdim),
        dtype=lambda x, dim, keepdim: dtypes.int64,
        shape=lambda s, dim, keepdim: _reduce_shape(s, tuple(range(len(s))) if dim is None
                                                    else (dim,), keepdim),
        kind="reduction")


argmax_p = _arg_prim("argmax")
argmin_p = _arg_prim("argmin")
any_p = Primitive("any", lambda xp, x, dims, keepdim: xp.any(x, axis=dims, keepdims=keepdim),
                  dtype=lambda x, dims, keepdim: dtypes.bool,
                  shape=lambda s, dims, keepdim: _reduce_shape(s, dims, keepdim),
                  kind="reduction")
all_p = Primitive("all", lambda xp, x, dims, keepdim: xp.all(x, axis=dims, keepdims=keepdim),
                  dtype=lambda x, dims, keepdim: dtypes.bool,
                  shape=lambda s, dims, keepdim: _reduce_shape(s, dims, keepdim),
                  kind="reduction")


# public functions --------------------------------------------------------------------

@method
def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    dims = reduction_dims(dim, input.ndim)
    out = bind(sum_p, input, dims=dims, keepdim=keepdim,
               dtype=None if dtype is None else dtypes.as_dtype(dtype))
    if dim is not None and out._grad_fn is not None:
        rename_node(out._grad_fn, "SumBackward1")   # PyTorch's sum.dim_IntList
    return out


@method
def amax(input, dim=(), keepdim=False):
    return bind(amax_p, input, dims=norm_dims(dim if dim != () else None, input.ndim),
                keepdim=keepdim)


@method
def amin(input, dim=(), keepdim=False):
    return bind(amin_p, input, dims=norm_dims(dim if dim != () else None, input.ndim),
                keepdim=keepdim)


@method
def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return bind(prod_p, input, dims=norm_dims(dim, input.ndim), keepdim=keepdim)


@method
def argmax(input, dim=None, keepdim=False):
    return bind(argmax_p, input, dim=None if dim is None else norm_dim(dim, input.ndim),
                keepdim=keepdim)


@method
def argmin(input, dim=None, keepdim=False):
    return bind(argmin_p, input, dim=None if dim is None else norm_dim(dim, input.ndim),
                keepdim=keepdim)


@method
def any(input, dim=None, keepdim=False):  # noqa: A001
    return bind(any_p, input, dims=norm_dims(dim, input.ndim), keepdim=keepdim)


@method
def all(input, dim=None, keepdim=False):  # noqa: A001
    return bind(all_p, input, dims=norm_dims(dim, input.ndim), keepdim=keepdim)


values_indices = namedtuple("values_indices", ["values", "indices"])


def _extremum(name, full, arg, input, dim_or_other, keepdim):
    if isinstance(dim_or_other, Tensor):
        return (maximum if name == "max" else minimum)(input, dim_or_other)
    if dim_or_other is None:
        if input.numel() == 0:
            raise op_error(name, f"{name}(): Expected reduction dim to be specified for "
                                 f"input.numel() == 0. Specify the reduction dim with the 'dim' "
                                 f"argument.", IndexError)
        return full(input)
    d = norm_dim(dim_or_other, input.ndim)
    idx = arg(input, d, keepdim=True)
    # The gradient flows to the selected index only, as PyTorch's max(dim) does.
    values = gather(input, d, idx) if input.ndim else input
    if not keepdim and input.ndim:
        values, idx = squeeze(values, d), squeeze(idx, d)
    return values_indices(values, idx)


@method
def max(input, dim=None, keepdim=False):  # noqa: A001
    return _extremum("max", amax, argmax, input, dim, keepdim)


@method
def min(input, dim=None, keepdim=False):  # noqa: A001
    return _extremum("min", amin, argmin, input, dim, keepdim)


prim_node.reduce_sum = sum      # ``sum_to_shape`` sums with it (prim_node sits below)
