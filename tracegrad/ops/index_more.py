"""Indexing's long tail: take, select, the ``*_scatter`` family, index_add/index_copy/
index_put, masked_scatter, tensor_split and h/v/dsplit, unravel_index, narrow_copy and
fill_diagonal_.

All are composites of the indexing primitives (``index_ops``): reading is ``index`` (a view
for basic keys; its adjoint accumulates, as PyTorch's take/index_select backward), writing
is ``index_put`` (its adjoint zeroes the written region for ``self`` and reads it for the
values), and an accumulating write is ``index_backward`` (NumPy's ``add.at``, whose adjoint
is a read again). So each gradient is PyTorch's, and the compiler sees known primitives.
``masked_scatter`` is a primitive of its own (with ``masked_gather``, its adjoint for the
source), so its result's shape never depends on the mask's values and a trace runs through.
Checks of the arguments give PyTorch's errors, naming the op.
"""
from .. import _hooks, dtypes
from ..tensor import Tensor
from .core import Primitive, bind, inplace, op_error
from .declare import install_method, method
from .elementwise import clone, where
from .index_ops import index as index_fn  # the name ``index`` is PyTorch's argument
from .index_ops import index_backward_p, index_p, index_put_p, parse_key
from .inplace_methods import torch_name, write_result
from .more_ops import diagonal, diagonal_scatter_p
from .rules import broadcast, norm_dim
from .shape_ops import broadcast_to, narrow, reshape, unsqueeze

_ALL = slice(None)


def _eager():
    """Whether values may be read (no trace is recording)."""
    return _hooks.tracer is None


def _along(dim, key):
    """The key that applies ``key`` at dimension ``dim``."""
    return (_ALL,) * dim + (key,)


def _index_vector(name, idx):
    """``idx`` as a vector of positions, with PyTorch's checks (``name``: index_add or
    index_copy, whose messages differ)."""
    if not isinstance(idx, Tensor) or idx.dtype not in (dtypes.int64, dtypes.int32):
        got = torch_name(idx.dtype) if isinstance(idx, Tensor) else type(idx).__name__
        raise op_error(name, f"{name}_(): Expected a long tensor for index, but got {got}"
                       if name == "index_copy" else
                       f"{name}_(): Expected dtype int32/int64 for index but got: {got}")
    if idx.ndim > 1:
        raise op_error(name, f"{name}_(): Index is supposed to be a vector, but got dim: "
                             f"{idx.ndim} with type: {torch_name(idx.dtype)} and size: "
                             f"{list(idx.shape)}", IndexError)
    return idx.reshape(-1)


def _check_bounds(name, idx, dim, size):
    if _eager() and idx.numel():
        lo, hi = int(idx.min().item()), int(idx.max().item())
        bad = hi if hi >= size else lo if lo < 0 else None     # no negatives, as PyTorch
        if bad is not None:
            raise op_error(name, f"{name}_(): index {bad} is out of bounds for dimension {dim} "
                                 f"with size {size}" if name == "index_copy" else
                           "index out of range in self", IndexError)


# reading ------------------------------------------------------------------------------

@method
def take(input, index):  # noqa: A002 - PyTorch's name
    """The elements of the flattened input at ``index`` (negative counts from the end)."""
    if index.dtype is not dtypes.int64:
        raise op_error("take", f"take(): Expected a long tensor for index, but got "
                               f"{torch_name(index.dtype)}")
    n = input.numel()
    if _eager() and index.numel():
        for v in (int(index.min().item()), int(index.max().item())):
            if not -n <= v < n:
                raise op_error("take", f"out of range: tried to access index {v} on a tensor "
                                       f"of {n} elements.", IndexError)
    flat = reshape(input, (-1,))
    spec, tensors = parse_key(index.reshape(-1))
    return reshape(bind(index_p, flat, *tensors, spec=spec), tuple(index.shape))


@method
def select(input, dim, index):  # noqa: A002
    """The slice at ``index`` along ``dim``, that dimension removed (a view)."""
    if input.ndim == 0:
        raise op_error("select", "select() cannot be applied to a 0-dim tensor.", IndexError)
    d = norm_dim(dim, input.ndim)
    size = input.shape[d]
    i = int(index)
    if not -size <= i < size:
        raise op_error("select", f"select(): index {i} out of range for tensor of size "
                                 f"{list(input.shape)} at dimension {dim}", IndexError)
    return index_fn(input, _along(d, i % size))


# writing a region -----------------------------------------------------------------------

def _scatter_into(input, src, key):
    """``input`` with ``input[key]`` replaced by ``src``, whose shape must be the region's."""
    region = tuple(index_fn(input, key).shape)
    if tuple(src.shape) != region:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(region)}")
    spec, tensors = parse_key(key)
    return bind(index_put_p, input, src.to(input.dtype), *tensors, spec=spec)


@method
def select_scatter(input, src, dim, index):  # noqa: A002
    """``input`` with the slice ``select(dim, index)`` replaced by ``src``."""
    d = norm_dim(dim, input.ndim)
    size = input.shape[d]
    i = int(index)
    if not -size <= i < size:
        raise op_error("select_scatter", f"select(): index {i} out of range for tensor of size "
                                         f"{list(input.shape)} at dimension {dim}", IndexError)
    return _scatter_into(input, src, _along(d, i % size))


@method
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with ``input[start:end:step]`` along ``dim`` replaced by ``src``."""
    d = norm_dim(dim, input.ndim)
    return _scatter_into(input, src, _along(d, slice(start, end, step)))


@method
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with its ``offset`` diagonal over (dim1, dim2) replaced by ``src``."""
    d1, d2 = norm_dim(dim1, input.ndim), norm_dim(dim2, input.ndim)
    region = tuple(diagonal(input, offset, d1, d2).shape)
    if tuple(src.shape) != region:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(region)}")
    params = dict(offset=int(offset), dim1=d1, dim2=d2, shape=tuple(input.shape))
    from ..creation import ones
    mask = bind(diagonal_scatter_p, ones(region, dtype=dtypes.bool, device=input.device),
                **params)
    return where(mask, bind(diagonal_scatter_p, src.to(input.dtype), **params), input)


# index_add, index_copy, index_put --------------------------------------------------------

def _same_dtype(name, input, source, text):
    if source.dtype is not input.dtype:
        raise op_error(name, text.format(self=torch_name(input.dtype),
                                         source=torch_name(source.dtype)))


def _along_index(name, input, dim, idx, source):
    """The key ``(:, ..., idx)`` at ``dim``, checked against ``source`` as PyTorch does."""
    d = norm_dim(dim, input.ndim)
    idx = _index_vector(name, idx)
    if source.ndim < input.ndim:        # a 0-d index's source lacks the dimension
        source = unsqueeze(source, d)
    if source.shape[d] != idx.shape[0]:
        if name == "index_copy":
            raise op_error(name, f"index_copy_(): Number of indices ({idx.shape[0]}) should be "
                                 f"equal to source.size(dim) ({source.shape[d]})", IndexError)
        raise op_error(name, f"{name}_(): Number of indices ({idx.shape[0]}) should be equal to "
                             f"source.size(dim): ({source.shape[d]}), for dim: {dim}")
    _check_bounds(name, idx, d, input.shape[d])
    return _along(d, idx), source


@method
def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """``input`` plus ``alpha * source`` added at ``index`` along ``dim`` (repeats add up)."""
    _same_dtype("index_add", input, source,
                "index_add_(): self ({self}) and source ({source}) must have the same scalar "
                "type")
    if input.ndim == 0:     # one element along dim 0
        return reshape(index_add(reshape(input, (1,)), dim, index, reshape(source, (-1,)),
                                 alpha=alpha), ())
    key, source = _along_index("index_add", input, dim, index, source)
    if alpha != 1:
        source = source * alpha
    spec, tensors = parse_key(key)
    return input + bind(index_backward_p, source, *tensors, spec=spec, shape=tuple(input.shape))


@method
def index_copy(input, dim, index, source):  # noqa: A002
    """``input`` with the slices at ``index`` along ``dim`` replaced by ``source``'s."""
    _same_dtype("index_copy", input, source,
                "index_copy_(): self and source expected to have the same dtype, but got "
                "(self) {self} and (source) {source}")
    if input.ndim == 0:     # one element along dim 0
        return reshape(index_copy(reshape(input, (1,)), dim, index, reshape(source, (-1,))), ())
    key, source = _along_index("index_copy", input, dim, index, source)
    spec, tensors = parse_key(key)
    return bind(index_put_p, input, source, *tensors, spec=spec)


@method
def index_put(input, indices, values, accumulate=False):
    """``input`` with ``input[indices] = values`` (``+=``, repeats adding up, when
    ``accumulate``); ``indices`` is a tuple of index tensors."""
    _same_dtype("index_put", input, values,
                "Index put requires the source and destination dtypes match, got {self} for the "
                "destination and {source} for the source.")
    for k, i in enumerate(indices):
        if not isinstance(i, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got "
                            f"{type(i).__name__}")
    key = tuple(indices)
    spec, tensors = parse_key(key)
    if not accumulate:
        return bind(index_put_p, input, values, *tensors, spec=spec)
    region = tuple(index_fn(input, key).shape)
    values = broadcast_to(values, region)
    return input + bind(index_backward_p, values, *tensors, spec=spec, shape=tuple(input.shape))


# masked_scatter ---------------------------------------------------------------------------
# Two primitives, so that the result's shape never depends on the data (a trace runs through):
# the write, and its adjoint for ``source`` (the masked gradient, in order, at the front of a
# zero tensor of source's shape), each the other's adjoint.

def _masked_scatter_impl(xp, x, mask, source):
    mask = xp.broadcast_to(mask, x.shape)
    n = int(mask.sum())
    if source.size < n:
        raise RuntimeError("masked_scatter: Number of elements of source < number of ones in "
                           "mask")
    out = x.copy()
    out[mask] = source.reshape(-1)[:n]
    return out


def _masked_gather_impl(xp, g, mask, shape):
    picked = g[xp.broadcast_to(mask, g.shape)]
    out = xp.zeros(int(xp.prod(xp.asarray(shape, dtype="int64"))), dtype=g.dtype)
    out[:picked.size] = picked
    return out.reshape(shape)


def _zeros_like_aval(aval, like):
    from ..creation import zeros
    return zeros(aval.shape, dtype=like.dtype, device=like.device)


masked_scatter_p = Primitive(
    "masked_scatter", _masked_scatter_impl, args=("self", "mask", "source"),
    dtype=lambda x, m, s: x.dtype, shape=lambda s, m, src: tuple(s), saves=("mask",),
    vjp=(lambda g, x, m, s, out: where(m, 0.0, g), None,
         lambda g, x, m, s, out: bind(masked_gather_p, g, m, shape=tuple(s.shape))),
    kind="other", node="MaskedScatterBackward0")
masked_gather_p = Primitive(
    "masked_gather", _masked_gather_impl, args=("grad", "mask"),
    dtype=lambda g, m, shape: g.dtype, shape=lambda s, m, shape: tuple(shape), saves=("mask",),
    vjp=(lambda gg, g, m, out, shape: bind(masked_scatter_p, _zeros_like_aval(g, gg), m, gg),
         None),
    kind="other")


@method
def masked_scatter(input, mask, source):
    """``input`` with the places where ``mask`` is True filled, in order, from ``source``."""
    if mask.dtype is not dtypes.bool:
        raise op_error("masked_scatter", f"masked_scatter_ only supports boolean masks, but got "
                                         f"mask with dtype {torch_name(mask.dtype)}")
    if source.dtype is not input.dtype:
        raise op_error("masked_scatter", f"masked_scatter: expected self and source to have "
                                         f"same dtypes but got{torch_name(input.dtype)} and "
                                         f"{torch_name(source.dtype)}")
    shape = broadcast(input.shape, mask.shape)
    return bind(masked_scatter_p, broadcast_to(input, shape), mask, source)


# splitting ----------------------------------------------------------------------------------

def _section_bounds(n, sections):
    """The (start, stop) of ``sections`` near-equal parts of ``n`` (the first n % s longer)."""
    size, extra = divmod(n, sections)
    bounds, start = [], 0
    for k in range(sections):
        stop = start + size + (k < extra)
        bounds.append((start, stop))
        start = stop
    return bounds


@method
def tensor_split(input, indices_or_sections, dim=0):
    """Views of ``input`` split along ``dim``: into that many near-equal parts (an int), or
    at the given indices (a sequence; slice semantics, so past the end gives empty parts)."""
    d = norm_dim(dim, input.ndim)
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype is not dtypes.int64:
            raise op_error("tensor_split", f"tensor_split expected tensor_indices_or_sections to "
                                           f"have dtype of long, but got {torch_name(spec.dtype)}")
        spec = int(spec.item()) if spec.ndim == 0 else [int(v) for v in spec.tolist()]
    if isinstance(spec, int):
        if spec <= 0:
            raise op_error("tensor_split", f"number of sections must be larger than 0, got {spec}")
        bounds = _section_bounds(input.shape[d], spec)
    else:
        cuts = [int(v) for v in spec]
        bounds = list(zip([0] + cuts, cuts + [None]))
    return tuple(index_fn(input, _along(d, slice(a, b))) for a, b in bounds)


def _directional_split(name, input, sections, dim, min_ndim):
    if input.ndim < min_ndim:
        raise op_error(name, f"torch.{name} requires a tensor with at least {min_ndim} dimension, "
                             f"but got a tensor with {input.ndim} dimensions!")
    if isinstance(sections, int) and (sections == 0 or input.shape[dim] % sections):
        raise op_error(name, f"torch.{name} attempted to split along dimension {dim}, but the "
                             f"size of the dimension {input.shape[dim]} is not divisible by the "
                             f"split_size {sections}!")
    return tensor_split(input, sections, dim)


@method
def hsplit(input, indices_or_sections):
    """``tensor_split`` along dim 1 (dim 0 of a vector); an int must divide it evenly."""
    return _directional_split("hsplit", input, indices_or_sections,
                              1 if input.ndim > 1 else 0, 1)


@method
def vsplit(input, indices_or_sections):
    """``tensor_split`` along dim 0 of a matrix or more; an int must divide it evenly."""
    return _directional_split("vsplit", input, indices_or_sections, 0, 2)


@method
def dsplit(input, indices_or_sections):
    """``tensor_split`` along dim 2 of a 3-d tensor or more; an int must divide it evenly."""
    return _directional_split("dsplit", input, indices_or_sections, 2, 3)


# unravel_index, narrow_copy, fill_diagonal_ --------------------------------------------------

def unravel_index(indices, shape):
    """The coordinates of flat ``indices`` in a tensor of ``shape`` (int64 tensors, one per
    dimension; an index wraps around the number of elements, as PyTorch's)."""
    if not isinstance(indices, Tensor):
        raise TypeError(f"unravel_index(): argument 'indices' must be Tensor, not "
                        f"{type(indices).__name__}")
    if indices.dtype.is_floating_point or indices.dtype is dtypes.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got tracegrad."
                        f"{indices.dtype.name}")
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    flat = indices.to(dtypes.int64)
    coords, stride = [], 1
    for size in reversed(shape):
        coords.append(flat.div(stride, rounding_mode="floor").remainder(size))
        stride *= size
    return tuple(reversed(coords))


@method
def narrow_copy(input, dim, start, length):
    """``narrow``, copied (no storage shared)."""
    return clone(narrow(input, dim, start, length))


def _diagonal_positions(shape, wrap):
    """The coordinates ``numpy.fill_diagonal`` writes (PyTorch's fill_diagonal_ too)."""
    import numpy as np
    rows, cols = shape[0], shape[-1]
    if len(shape) == 2:
        step = cols + 1
        end = rows * cols if wrap else min(rows, cols) * cols
    else:
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = int(np.prod(shape))
    return np.unravel_index(np.arange(0, end, step), shape)


@method("fill_diagonal_")
def _fill_diagonal_(self, fill_value, wrap=False):
    """Write ``fill_value`` on the main diagonal, in place (``wrap``: a tall matrix's diagonal
    starts again every ncols + 1 rows, as NumPy's)."""
    if self.ndim < 2:
        raise op_error("fill_diagonal_", "dimensions must larger than 1")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise op_error("fill_diagonal_", "all dimensions of input must be of equal length")
    from ..creation import tensor
    positions = [tensor(p, dtype=dtypes.int64, device=self.device)
                 for p in _diagonal_positions(tuple(self.shape), wrap)]
    spec = tuple(("t", k) for k in range(len(positions)))
    return inplace(index_put_p, "fill_diagonal_", self, fill_value, *positions, spec=spec)


def _install_inplace_forms():
    for fn in (index_add, index_copy, index_put, masked_scatter):
        name = fn.__name__ + "_"

        def apply(self, *args, _fn=fn, _name=name, **kwargs):
            return write_result(self, _name, lambda x: _fn(x, *args, **kwargs))
        apply.__name__ = apply.__qualname__ = name
        apply.__doc__ = f"In-place ``{fn.__name__}``: writes into ``self``, returns it."
        install_method(name, apply)


_install_inplace_forms()

__all__ = ["take", "select", "select_scatter", "slice_scatter", "diagonal_scatter", "index_add",
           "index_copy", "index_put", "masked_scatter", "tensor_split", "hsplit", "vsplit",
           "dsplit", "unravel_index", "narrow_copy"]
