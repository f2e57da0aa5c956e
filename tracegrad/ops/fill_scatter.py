"""``index_fill``/``scatter`` (with their in-place forms) and ``tril_indices``/``triu_indices``.

Both fills are compositions: a boolean mask of the written places (built from ``index``, so
it compiles without reading data) picks the new values with ``where``, and the ``_`` forms
``copy_`` the result in, which bumps the version counter as every in-place op does.
"""
import numpy as np

from .. import dtypes
from .._hooks import state as _hook_state
from ..tensor import Tensor
from .core import op_error
from .declare import method
from .elementwise import where
from .index_ops import scatter_add
from .rules import norm_dim


@method
def index_fill(input, dim, index, value):
    """``input`` with the slices ``index`` along ``dim`` set to ``value``."""
    from ..creation import arange
    if index.dtype.is_floating_point or index.ndim > 1:
        raise op_error("index_fill", f"index_fill_(): Expected a 0-D or 1-D int64 index, got "
                                     f"{index.ndim}-D {index.dtype.name}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise op_error("index_fill", f"index_fill_ only supports a 0-dimensional value tensor, "
                                     f"but got tensor with {value.ndim} dimension(s).")
    if input.ndim == 0:
        return where(index.reshape(-1) == 0, value, input.reshape(1)).reshape(()).to(input.dtype)
    d = norm_dim(dim, input.ndim)
    n = input.shape[d]
    index = index.reshape(1, -1)
    index = where(index < 0, index + n, index)      # negative indices count from the end
    hit = (arange(n, device=input.device).reshape(-1, 1) == index).any(1)
    hit = hit.reshape((1,) * d + (n,) + (1,) * (input.ndim - d - 1))
    out = where(hit, value, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


@method("index_fill_")
def _index_fill_(self, dim, index, value):
    return self.copy_(index_fill(self, dim, index, value))


@method
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """``input`` with ``out[index[i]][j] = src[i][j]`` along ``dim`` (or ``value``);
    ``reduce="add"``/``"multiply"`` combine with what is there instead.

    Where ``index`` names a place twice, PyTorch leaves unspecified which ``src`` value
    wins; this composition would sum them, so it refuses instead (outside compile) unless
    ``reduce`` says how to combine."""
    from ..creation import ones, zeros
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src          # scatter(dim, index, value): the scalar overload
    if (src is None) == (value is None):
        raise op_error("scatter", "scatter() expects exactly one of src (a tensor) or value "
                                  "(a number)", TypeError)
    if reduce not in (None, "add", "multiply"):
        raise op_error("scatter", f"reduce argument must be either add or multiply, got "
                                  f"{reduce!r}")
    if index.dtype.is_floating_point:
        raise op_error("scatter", f"scatter(): Expected dtype int64 for index, got "
                                  f"{index.dtype.name}")
    d = norm_dim(dim, max(input.ndim, 1))
    count = scatter_add(zeros(input.shape, device=input.device), d, index,
                        ones(index.shape, device=input.device))
    hit = count > 0
    if src is None:
        if reduce == "add":
            out = input + count * value
        elif reduce == "multiply":
            out = input * value ** count
        else:
            out = where(hit, value, input)
        return out if out.dtype is input.dtype else out.to(input.dtype)
    if src.shape != index.shape:            # only src's leading index.shape part is read
        src = src[tuple(slice(0, n) for n in index.shape)]
    if reduce != "add" and _hook_state.tracer is None and bool((count > 1).any()):
        raise op_error("scatter", "scatter: index names a place more than once, and which src "
                                  "value lands there is unspecified; use scatter_add, or "
                                  "reduce='add', for a defined result")
    placed = scatter_add(zeros(input.shape, dtype=src.dtype, device=input.device), d, index,
                         src)
    if reduce == "add":
        out = input + placed
    elif reduce == "multiply":
        out = where(hit, input * placed, input)
    else:
        out = where(hit, placed, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)


@method("scatter_")
def _scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    return self.copy_(scatter(self, dim, index, src, value, reduce=reduce))


def _indices(np_fn, row, col, offset, dtype, device):
    from ..creation import tensor
    if row < 0 or col < 0:
        raise op_error(np_fn.__name__, f"row must be non-negative, got{row}" if row < 0
                       else f"col must be non-negative, got{col}")
    rows, cols = np_fn(row, offset, col)
    return tensor(np.stack([rows, cols]).reshape(2, -1), dtype=dtype or dtypes.int64,
                  device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, col) coordinates, in row-major order, of the lower triangle of a
    ``row x col`` matrix (``offset`` > 0 takes diagonals above the main one in)."""
    return _indices(np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, col) coordinates, in row-major order, of the upper triangle."""
    return _indices(np.triu_indices, row, col, offset, dtype, device)


__all__ = ["index_fill", "scatter", "tril_indices", "triu_indices"]
