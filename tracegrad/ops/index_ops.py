"""Indexing primitives: getitem, setitem, gather and their adjoints.

An index key is split into a hashable ``spec`` and the index tensors, which
are inputs of the primitive (they are data, not parameters). A spec entry is
an int, None, Ellipsis, ``("s", start, stop, step)`` for a slice, or
``("t", k)`` for the k-th index tensor.

This module sits below ``shape_ops`` (``narrow`` and ``flip`` are indexes): the indexing ops
that broadcast first (``take_along_dim``, the masked ones) are in ``masked_ops.py``, above
both, and ``nonzero`` is in ``data_dependent.py``.
"""
import warnings

import numpy as np

from .. import _hooks, dtypes
from ..autograd.grad_mode import _state as _gm
from ..creation import tensor
from ..device import recording
from ..tensor import Tensor
from . import inplace_views
from .core import Primitive, apply_view_steps, bind, inplace, op_error
from .data_dependent import graph_break, is_mask_key
from .declare import method
from .rules import norm_dim
from ..symbolic import Specialize, SymInt, slice_length, symbols_in


def parse_key(key):
    """``(spec, index_tensors)`` for a user's ``__getitem__`` key."""
    if not isinstance(key, tuple):
        key = (key,)
    spec, tensors = [], []
    for k in key:
        if k is None or k is Ellipsis:
            spec.append(k)
        elif isinstance(k, slice):
            parts = tuple(None if v is None else v if type(v) is SymInt else int(v)
                          for v in (k.start, k.stop, k.step))     # a traced size stays
            if parts[2] is not None and parts[2] <= 0:
                raise op_error("getitem", "step must be greater than zero", ValueError)
            spec.append(("s",) + parts)
        elif isinstance(k, (bool, np.bool_)):
            tensors.append(tensor(bool(k)))
            spec.append(("t", len(tensors) - 1))
        elif isinstance(k, (int, np.integer)):
            spec.append(int(k))
        elif isinstance(k, Tensor):
            if k.ndim == 0 and k.dtype is not dtypes.bool and k.dtype.is_signed is not False \
                    and not k.dtype.is_floating_point:
                spec.append(int(k.item()))
            else:
                if k.dtype.is_floating_point:
                    raise op_error("getitem", "tensors used as indices must be long, int, byte or "
                                              "bool tensors", IndexError)
                tensors.append(k)
                spec.append(("t", len(tensors) - 1))
        elif isinstance(k, (list, np.ndarray)):
            tensors.append(tensor(k))
            spec.append(("t", len(tensors) - 1))
        else:
            raise op_error("getitem", f"only integers, slices, ellipsis, None and long, byte or "
                                      f"bool tensors are valid indices (got {type(k).__name__})",
                           IndexError)
    return tuple(spec), tensors


def build_key(spec, arrays):
    key = []
    for s in spec:
        if type(s) is tuple:
            key.append(slice(*s[1:]) if s[0] == "s" else arrays[s[1]])
        else:
            key.append(s)
    return tuple(key)


def _index_impl(xp, x, *idx, spec):
    key = build_key(spec, idx)
    if not idx and Ellipsis not in spec:
        key += (Ellipsis,)   # basic indexing is a view, as in PyTorch: x[0] of a vector is 0-d
    return x[key]


def _index_shape(s, *idx_shapes, spec):
    if symbols_in(s) or symbols_in(spec):   # symbolic sizes stay symbolic, or specialise
        shape = _basic_shape(s, spec) if not idx_shapes else _advanced_shape(s, idx_shapes,
                                                                             spec)
        if shape is None:
            raise Specialize(symbols_in(s) | symbols_in(spec),
                             "an index whose result's shape depends on the sizes")
        return shape
    dummy = np.broadcast_to(np.empty((), np.int8), s)
    arrays = [np.zeros(i, np.int64) for i in idx_shapes]
    return dummy[build_key(spec, arrays)].shape


def _advanced_shape(s, idx_shapes, spec):
    """The shape of indexing with index tensors over a symbolic shape ``s``, where every
    slice is whole: NumPy's shape at the sizes and at the sizes + 7 tells which dims are
    which symbols' (None otherwise)."""
    if any(type(e) is tuple and e[0] == "s" and e[1:] not in ((None, None, None),
                                                             (None, None, 1)) for e in spec):
        return None
    arrays = [np.zeros(i, np.int64) for i in idx_shapes]

    def at(extra):
        dims = tuple(int.__int__(n) + (extra if type(n) is SymInt else 0) for n in s)
        return np.broadcast_to(np.empty((), np.int8), dims)[build_key(spec, arrays)].shape
    a, b = at(0), at(7)
    out = []
    for m, n in zip(a, b):
        if m == n:
            out.append(m)
            continue
        match = [d for d in s if type(d) is SymInt and int.__int__(d) == m and n - m == 7]
        if len({str(d) for d in match}) != 1:
            return None
        out.append(match[0])
    return tuple(out)


def _basic_shape(s, spec):
    """The shape basic indexing (ints, slices, None, ...) gives over shape ``s``, with
    symbolic sizes kept; None where a length depends on more than they say."""
    dims, out, i = list(s), [], 0
    consumed = sum(1 for e in spec if e is not None and e is not Ellipsis)
    if consumed > len(dims):
        return None
    for e in spec:
        if e is None:
            out.append(1)
        elif e is Ellipsis:
            k = len(dims) - consumed
            out.extend(dims[i:i + k])
            i += k
        elif type(e) is tuple:
            n = slice_length(dims[i], *e[1:])
            if n is None:
                return None
            out.append(n)
            i += 1
        else:
            i += 1
    return tuple(out + dims[i:])


def _is_basic(spec):
    return not any(type(s) is tuple and s[0] == "t" for s in spec)


index_p = Primitive(
    "index", _index_impl, args=("self", "*indices"), saves=("*indices",), dtype=lambda x, *idx, spec: x.dtype,
    shape=_index_shape,
    vjp=lambda g, x, *idx, out, spec: (index_backward(g, idx, spec, x.shape),)
    + (None,) * len(idx),
    # linear in self: the tangent indexed alike (a view of it, where the index is basic)
    jvp=(lambda t, x, *idx, out, spec: bind(index_p, t, *idx, spec=spec),),
    np="{self}[{spec}]", view=True, kind="shape", node="IndexBackward0")


def _index_backward_impl(xp, g, *idx, spec, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    key = build_key(spec, idx)
    if _is_basic(spec):
        out[key] = g
    elif xp is np:
        np.add.at(out, key, g)
    else:
        _add_at(xp, out, key, g)
    return out


def _add_at(xp, out, key, g):
    import cupyx
    cupyx.scatter_add(out, key, g)


index_backward_p = Primitive(
    "index_backward", _index_backward_impl, args=("grad", "*indices"), saves=("*indices",),
    dtype=lambda g, *idx, spec, shape: g.dtype, shape=lambda s, *i, spec, shape: tuple(shape),
    vjp=lambda g, gout, *idx, out, spec, shape: (bind(index_p, g, *idx, spec=spec),)
    + (None,) * len(idx),
    kind="other")


def index_backward(g, idx, spec, shape):
    return bind(index_backward_p, g, *idx, spec=spec, shape=tuple(shape))


def _index_put_impl(xp, x, v, *idx, spec):
    out = x.copy()
    out[build_key(spec, idx)] = v
    return out


def _index_put_inplace(xp, x, v, *idx, spec):
    x[build_key(spec, idx)] = v


def _index_put_dtype(x, v, *idx, spec):
    return x.dtype


index_put_p = Primitive(
    "index_put", _index_put_impl, args=("self", "values", "*indices"), saves=("*indices",), dtype=_index_put_dtype,
    shape=lambda s, v, *i, spec: tuple(s),
    vjp=lambda g, x, v, *idx, out, spec: (
        bind(index_put_p, g, 0.0, *idx, spec=spec), bind(index_p, g, *idx, spec=spec))
    + (None,) * len(idx),
    inplace=_index_put_inplace, kind="other", node="IndexPutBackward0")


def _view_scatter_impl(xp, base, src, steps):
    out = base.copy()
    region = out
    for prim, params in steps:
        region = prim.impl(xp, region, **params)
    region[...] = src
    return out


view_scatter_p = Primitive(
    "view_scatter", _view_scatter_impl, args=("self", "src"),
    dtype=lambda b, s, steps: b.dtype, shape=lambda b, s, steps: tuple(b),
    vjp=(lambda g, b, s, out, steps: view_scatter(g, 0.0, steps),
         lambda g, b, s, out, steps: apply_view_steps(g, steps)),
    node="CopySlices", kind="other")


def view_scatter(base, src, steps):
    """``base`` with the view reached by ``steps`` replaced by ``src`` (CopySlices)."""
    return bind(view_scatter_p, base, src, steps=steps)


# gather --------------------------------------------------------------------------

def _gather_key(xp, index, dim):
    """The advanced index that reads ``index`` along ``dim``: an open grid of ``arange``s
    for the other dimensions (``indices(sparse=True)``, which CuPy has not)."""
    n = index.ndim
    grids = [xp.arange(k).reshape((1,) * i + (k,) + (1,) * (n - i - 1))
             for i, k in enumerate(index.shape)]
    grids[dim] = index
    return tuple(grids)


def _gather_impl(xp, x, index, dim):
    if index.shape[dim] and x.size and not recording(xp):    # (a host read: see recording)
        _in_bounds(index, dim, x.shape[dim])
    return x[_gather_key(xp, index, dim)]


def _gather_dtype(x, index, dim):
    if index.dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    return x.dtype


def _gather_shape(s, i, dim):
    if len(s) != len(i) and len(s):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d, (a, b) in enumerate(zip(s, i)):
        if d != dim and b > a:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(i)} to "
                               f"be smaller than self {list(s)} apart from dimension {dim}")
    return tuple(i)


gather_p = Primitive(
    "gather", _gather_impl, args=("self", "index"), dtype=_gather_dtype, shape=_gather_shape,
    vjp=(lambda g, x, i, out, dim: bind(scatter_add_zeros_p, g, i, dim=dim, shape=x.shape),
         None),
    saves=("index",), kind="other")


def _in_bounds(index, dim, lim):
    """PyTorch's check of gather's and scatter's indices: each in ``[0, lim)`` (a negative
    one does not count from the end there)."""
    bad = index[(index < 0) | (index >= lim)]
    if bad.size:
        raise RuntimeError(f"index {int(bad.reshape(-1)[0])} is out of bounds for dimension "
                           f"{dim} with size {lim}")


def check_scatter_index(name, input, dim, index):
    """Outside a trace, ``name``'s (scatter's) error for an index outside ``[0, size)``."""
    if _hooks.tracer is None and type(index) is Tensor and index.numel() and input.ndim:
        lim = input.shape[dim]
        bad = index[(index < 0) | (index >= lim)]
        if bad.numel():
            raise op_error(name, f"index {int(bad.reshape(-1)[0].item())} is out of bounds for "
                                 f"dimension {dim} with size {lim}")


def _scatter_add_zeros_impl(xp, g, index, dim, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    key = _gather_key(xp, index, dim)
    if xp is np:
        np.add.at(out, key, g)
    else:
        _add_at(xp, out, key, g)
    return out


scatter_add_zeros_p = Primitive(
    "scatter_add_zeros", _scatter_add_zeros_impl, args=("grad", "index"),
    dtype=lambda g, i, dim, shape: g.dtype, shape=lambda s, i, dim, shape: tuple(shape),
    vjp=(lambda g, gout, i, out, dim, shape: bind(gather_p, g, i, dim=dim), None),
    saves=("index",), node="ScatterAddBackward0", kind="other")


# public functions --------------------------------------------------------------------

def _indices_on(tensors, x):
    """Index tensors on ``x``'s device: PyTorch takes CPU indices for a cuda tensor (lists
    and NumPy arrays in a key become CPU tensors too)."""
    kind = type(x._data)
    if all(type(t._data) is kind for t in tensors):
        return tensors
    if kind is not np.ndarray:
        return [t if type(t._data) is kind else t.to(x.device) for t in tensors]
    raise op_error("index", f"indices should be either on cpu or on the same device as the "
                            f"indexed tensor ({x.device})")


def _byte_masks(key, name):
    """``key`` with each uint8 tensor made a boolean mask, as PyTorch reads one (with its
    deprecation warning); for a write (``name``), PyTorch's error."""
    keys = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(k, Tensor) and k.dtype is dtypes.uint8 for k in keys):
        return key
    if name is not None:
        raise op_error(name, "masked_fill_ only supports boolean masks, but got mask with "
                             "dtype unsigned char")
    warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                  "torch.bool instead.", UserWarning, stacklevel=3)
    fixed = tuple(k.bool() if isinstance(k, Tensor) and k.dtype is dtypes.uint8 else k
                  for k in keys)
    return fixed if isinstance(key, tuple) else fixed[0]


def index(input, key):
    key = _byte_masks(key, None)
    if is_mask_key(key):        # the result's size is the number of True values
        graph_break("a boolean-mask index x[mask]")
    spec, tensors = parse_key(key)
    if tensors:
        tensors = _indices_on(tensors, input)
    return bind(index_p, input, *tensors, spec=spec)


def setitem(target, key, value):
    """``target[key] = value``. A basic key writes through the view ``target[key]``, as
    PyTorch's ``copy_`` into it does, so a base that records history gets ``CopySlices``."""
    _byte_masks(key, "setitem")
    spec, tensors = parse_key(key)
    if tensors:
        tensors = _indices_on(tensors, target)
    if tensors or not _gm.grad_enabled or not (
            target._requires_grad or isinstance(value, Tensor) and value._requires_grad
            or target._base is not None and target._base._requires_grad):
        return inplace(index_put_p, "setitem", target, value, *tensors, spec=spec)
    # A leaf target gets the error for a view of a leaf here, which is also PyTorch's text.
    inplace(index_put_p, "setitem", bind(index_p, target, spec=spec), value, spec=(Ellipsis,))
    return target


@method("fill_")
def _fill_(self, value):
    return inplace(index_put_p, "fill_", self, value, spec=(Ellipsis,))


@method("zero_")
def _zero_(self):
    return _fill_(self, 0)


@method("copy_")
def _copy_(self, src, non_blocking=False):
    if isinstance(src, Tensor) and src.device != self.device:
        src = src.to(self.device)
    return inplace(index_put_p, "copy_", self, src, spec=(Ellipsis,))


@method
def gather(input, dim, index):
    if 0 in index.shape:    # PyTorch checks only dim of an empty index, not its dtype or rank
        norm_dim(dim, input.ndim)
        return input.reshape(-1)[:0].reshape(index.shape)   # empty, still in input's graph
    if max(input.ndim, index.ndim) <= 1 and min(input.ndim, index.ndim) == 0:
        # a 0-d tensor counts as 1-d here (PyTorch's ensure_nonempty_dim)
        return gather(input.reshape(-1), dim, index.reshape(-1)).reshape(index.shape)
    return bind(gather_p, input, index, dim=norm_dim(dim, input.ndim))


@method
def scatter_add(input, dim, index, src):
    if input.ndim == 0 and index.ndim == 0:     # a 0-d tensor is one element along dim 0
        src = src.reshape(1) if src.ndim == 0 else src
        return scatter_add(input.reshape(1), dim, index.reshape(1), src).reshape(())
    d = norm_dim(dim, input.ndim)
    check_scatter_index("scatter_add", input, d, index)
    return input + bind(scatter_add_zeros_p, src, index, dim=d, shape=input.shape)


@method
def index_select(input, dim, index):
    if index.ndim > 1:
        raise op_error("index_select", "index_select(): Index is supposed to be a vector")
    if index.dtype.is_floating_point:
        raise op_error("index_select", "index_select(): Expected dtype int32/int64 for index")
    d = norm_dim(dim, input.ndim)
    if input.ndim and _hooks.tracer is None and type(index) is Tensor and index.numel() and (
            bool((index < 0).any()) or bool((index >= input.shape[d]).any())):
        raise op_error("index_select", "index out of range in self", IndexError)
    return bind(index_p, input, index.reshape(-1), spec=(slice_all,) * d + (("t", 0),)) \
        if input.ndim else input


slice_all = ("s", None, None, None)


inplace_views.view_scatter = view_scatter     # an in-place write through a view rebases with it
