"""Tensor methods (and their functions) that PyTorch programs use and that are composites of
the shape and reduction ops: ``repeat``, ``tile``, ``ravel``, ``Tensor.unfold`` (sliding
windows), ``vdot``, ``split_with_sizes``, ``sum_to_size``, ``asarray``,
the method forms of ``swapaxes``/``swapdims``/``negative``,
``ndimension``, ``nbytes``, ``short``, and in-place forms written through ``copy_``
(``tril_``, ``triu_``, ``round_``, ``nan_to_num_``); the other names PyTorch's OpInfo database
knows (``fill``, ``unsafe_chunk``/``unsafe_split``, ``constant_pad_nd``, ``__rdiv__``,
``__rmod__``, ``new_empty_strided``) and ``nonzero_static``, a primitive of its own: its result's
shape is ``(size, ndim)`` whatever the data, so a trace runs through. Gradients are those of the
ops they are made of (``repeat``: expand then reshape, so its gradient sums the copies)."""
import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .core import Primitive, bind, op_error, sum_to_shape
from .declare import install_method, method
from .reduce_ops import sum
from .index_ops import index_select
from .pad import pad_nd
from .shape_ops import expand, movedim, reshape, split, swapaxes, swapdims


@method
def repeat(input, *sizes):
    """The tensor tiled ``sizes`` times along each dim (more sizes than dims: new leading
    dims), as one expand and one reshape."""
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = tuple(sizes[0])
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < input.ndim:
        raise op_error("repeat", "Number of dimensions of repeat dims can not be smaller than "
                                 "number of dimensions of tensor")
    if any(s < 0 for s in sizes):
        raise op_error("repeat", f"Trying to create tensor with negative dimension: {sizes}")
    shape = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    x = reshape(input, tuple(d for n in shape for d in (1, n)))
    x = expand(x, *(d for r, n in zip(sizes, shape) for d in (r, n)))
    return reshape(x, tuple(r * n for r, n in zip(sizes, shape)))


@method
def tile(input, dims):
    """``repeat`` with ``dims`` padded by leading 1s to the tensor's rank."""
    dims = tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)
    return repeat(input, *((1,) * (input.ndim - len(dims)) + dims))


@method
def ravel(input):
    """The elements as a 1-D tensor (a copy only where a view cannot do)."""
    return reshape(input, (-1,))


def _unfold(self, dimension, size, step):
    """Windows of ``size`` elements every ``step`` along ``dimension``, as a new last dim."""
    from ..creation import arange
    d = dimension % max(self.ndim, 1)
    n = self.shape[d] if self.ndim else 1
    if size > n:
        raise op_error("unfold", f"maximum size for tensor at dimension {d} is {n} but size "
                                 f"is {size}")
    if step <= 0:
        raise op_error("unfold", f"step is {step} but must be > 0")
    count = (n - size) // step + 1
    if self.ndim == 0:          # PyTorch's: a 0-d tensor unfolds to shape (size,)
        return reshape(self, (1,)) if size == 1 else reshape(self, (1,))[:0]
    starts = arange(count, device=self.device) * step
    index = reshape(reshape(starts, (-1, 1)) + arange(size, device=self.device), (-1,))
    x = self if self.ndim else reshape(self, (1,))
    picked = index_select(x, d, index)                      # ..., count * size, ...
    shape = list(x.shape)
    shape[d:d + 1] = [count, size]
    return movedim(reshape(picked, tuple(shape)), d + 1, -1)


install_method("unfold", _unfold)


def vdot(input, other):
    """The dot product of two 1-D tensors."""
    if input.ndim != 1 or other.ndim != 1:
        raise op_error("vdot", f"1D tensors expected, but got {input.ndim}D and "
                               f"{other.ndim}D tensors")
    return sum(input * other)


@method
def split_with_sizes(input, split_sizes, dim=0):
    """``split`` with a list of sizes."""
    return split(input, list(split_sizes), dim)


@method
def sum_to_size(input, *size):
    """``input`` summed down to ``size`` (the adjoint of expanding to its shape)."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    return sum_to_shape(input, tuple(size))


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """A tensor of ``obj``, sharing its memory where ``obj`` is a tensor or a NumPy array of
    the dtype asked (``copy=True`` always copies, ``copy=False`` refuses to)."""
    from ..creation import as_tensor, tensor
    if copy:
        t = tensor(obj.detach().numpy() if isinstance(obj, Tensor) else obj, dtype=dtype,
                   device=device)
    else:
        t = as_tensor(obj, dtype=dtype, device=device)
        if copy is False and isinstance(obj, (Tensor, np.ndarray)):
            same = t._data is (obj._data if isinstance(obj, Tensor) else obj) or \
                np.shares_memory(t._data, obj._data if isinstance(obj, Tensor) else obj)
            if not same:
                raise ValueError("asarray: copy=False but the data must be copied")
    return t.requires_grad_(True) if requires_grad else t


# names PyTorch's OpInfo database knows --------------------------------------------------

def fill(input, value):
    """A tensor of ``input``'s shape and dtype holding ``value`` (``torch.fill``, out of
    place); a tensor ``value`` must be 0-d and gets the sum of the gradient."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise op_error("fill", f"fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value.ndim} dimensions.")
    return input.clone().fill_(value)


@method
def unsafe_chunk(input, chunks, dim=0):
    """``chunk`` (PyTorch's unsafe form skips a view check tracegrad does not make)."""
    return input.chunk(chunks, dim)


@method
def unsafe_split(input, split_size, dim=0):
    """``split`` into parts of ``split_size`` (an int: PyTorch's unsafe form takes no list of
    sizes) (it skips a view check tracegrad does not make)."""
    if not isinstance(split_size, int):
        raise TypeError(f"unsafe_split(): argument 'split_size' must be int, not "
                        f"{type(split_size).__name__}")
    return split(input, split_size, dim)


def constant_pad_nd(input, pad, value=0):
    """``input`` padded by ``value`` (``pad``: before/after pairs from the last dim back;
    a negative amount crops), as ``nn.functional.pad(..., mode="constant")``."""
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise op_error("constant_pad_nd", f"Length of pad must be even but instead it equals "
                                          f"{len(pad)}")
    if len(pad) > 2 * input.ndim:
        raise op_error("constant_pad_nd", f"Length of pad should be no more than twice the "
                                          f"number of dimensions of the input. Pad length is "
                                          f"{len(pad)} while the input has {input.ndim} "
                                          f"dimensions.")
    pairs = tuple((pad[i], pad[i + 1]) for i in reversed(range(0, len(pad), 2)))
    return pad_nd(input, pairs, "constant", value)


def _nonzero_static_impl(xp, x, size, fill_value):
    found = xp.argwhere(x)[:size]
    out = xp.full((size, x.ndim), fill_value, dtype="int64")
    out[:found.shape[0]] = found
    return out


nonzero_static_p = Primitive(
    "nonzero_static", _nonzero_static_impl, args=("self",),
    dtype=lambda x, size, fill_value: dtypes.int64,
    shape=lambda s, size, fill_value: (size, len(s)), kind="other")


@method
def nonzero_static(input, *, size, fill_value=-1):
    """The first ``size`` coordinates of nonzero elements (``nonzero``'s rows), padded with
    ``fill_value`` rows up to ``size``."""
    if not isinstance(size, int) or size < 0:
        raise op_error("nonzero_static", "nonzero_static: 'size' must be an non-negative "
                                         "integer")
    return bind(nonzero_static_p, input, size=size, fill_value=int(fill_value))


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                       requires_grad=False, pin_memory=False):
    from ..creation import empty_strided
    return empty_strided(size, stride, dtype=dtype or self.dtype, layout=layout,
                         device=device or self.device, requires_grad=requires_grad)


def _copy_into(name, fn):
    def apply(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    apply.__name__ = name
    return apply


def _install():
    from .elementwise import neg, round
    from .composite import remainder
    from .more_ops import nan_to_num, tril, triu
    install_method("swapaxes", swapaxes)
    install_method("swapdims", swapdims)
    install_method("negative", neg)
    install_method("ndimension", lambda self: self.ndim)
    install_method("nbytes", property(lambda self: self.numel() * self.element_size()))
    install_method("short", lambda self, memory_format=None: self.to(dtypes.int16))
    for name, fn in (("tril_", tril), ("triu_", triu), ("round_", round),
                     ("nan_to_num_", nan_to_num)):
        install_method(name, _copy_into(name, fn))

    # PyTorch's __rdiv__ multiplies by the reciprocal (its float32 rounding, not division's)
    install_method("__rdiv__", lambda self, other: self.reciprocal() * other)
    install_method("__rmod__", lambda self, other: remainder(other, self))
    install_method("new_empty_strided", _new_empty_strided)


_install()

__all__ = ["repeat", "tile", "ravel", "vdot", "split_with_sizes", "sum_to_size",
           "asarray", "fill", "unsafe_chunk", "unsafe_split", "constant_pad_nd", "nonzero_static"]
