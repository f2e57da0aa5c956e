"""Tensor methods (and their functions) that PyTorch programs use and that are composites of
the shape and reduction ops: ``repeat``, ``tile``, ``ravel``, ``Tensor.unfold`` (sliding
windows), ``vdot``, ``split_with_sizes``, ``sum_to_size``, ``chain_matmul``, ``asarray``,
the method forms of ``swapaxes``/``swapdims``/``negative``/``matrix_power``/``prelu``,
``ndimension``, ``nbytes``, ``short``, and in-place forms written through ``copy_``
(``tril_``, ``triu_``, ``round_``, ``nan_to_num_``). Gradients are those of the ops they are
made of (``repeat``: expand then reshape, so its gradient sums the copies)."""
import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .core import op_error, sum_to_shape
from .declare import install_method, method
from .reduce_ops import sum
from .index_ops import index_select
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


def chain_matmul(*matrices):
    """The product of the matrices, left to right (``linalg.multi_dot``)."""
    from ..linalg_more import multi_dot
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


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


def _copy_into(name, fn):
    def apply(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    apply.__name__ = name
    return apply


def _install():
    from .elementwise import neg, round
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

    def matrix_power(self, n):
        from ..linalg import matrix_power as mp
        return mp(self, n)

    def prelu(self, weight):
        from ..nn.functional import prelu as f
        return f(self, weight)
    install_method("matrix_power", matrix_power)
    install_method("prelu", prelu)


_install()

__all__ = ["repeat", "tile", "ravel", "vdot", "split_with_sizes", "sum_to_size", "chain_matmul",
           "asarray"]
