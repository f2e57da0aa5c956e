"""Ops whose result's size depends on the values of a tensor: ``nonzero``, ``argwhere``,
``unique``, ``masked_select``, indexing with a boolean mask, ``repeat_interleave`` with a
tensor of counts.

A compiled variant is one graph of fixed (or symbolic, from the inputs' shapes) sizes,
and no size of these results is known before the data is. So inside
``tracegrad.compile`` such an op ends the graph there, as PyTorch's default
(``capture_dynamic_output_shape_ops=False``) does: ``graph_break`` stops the trace
(``Tracer.abandon``), the rest of the call runs eagerly for real (the trace run computed
every value so far, so nothing runs twice), and the function runs eagerly from then on,
with one warning and one line in ``explain()`` naming the op and the user's line. A
variant therefore never replays a size, or a result, of the call it was traced on.

``nonzero``, ``unique`` and ``argwhere`` live here; the others are written beside their kin
and call ``graph_break`` first.
"""
import numpy as np

from .. import _hooks, dtypes
from ..device import xp_of
from ..tensor import Tensor
from .core import op_error, user_frame
from .declare import method


def graph_break(op):
    """Inside a trace, end it before ``op`` (see the module docstring); else nothing."""
    tracer = _hooks.tracer
    if tracer is None:
        return
    f = user_frame()
    site = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "<unknown>"
    if tracer.symbolic:         # a derivative rule: its graph cannot stop part way
        raise op_error(op, "the result's size depends on the data, which a derivative graph "
                           "cannot hold")
    from ..symbolic import deciding_nothing
    tracer.abandon(f"reaches {op} at {site}, whose result's size depends on the values of a "
                   "tensor")
    deciding_nothing()      # sizes met in the eager rest of the call are plain numbers


@method
def argwhere(input):
    graph_break("argwhere")
    return nonzero(input)


@method
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """PyTorch's ``torch.unique``; the values come sorted whatever ``sorted`` says (PyTorch
    sorts on the CPU too unless told not to, and then the order is unspecified)."""
    graph_break("unique")
    data = input._data
    xp = xp_of(data)
    if dim is not None:
        if not -max(input.ndim, 1) <= dim < max(input.ndim, 1):
            raise op_error("unique", f"Dimension out of range (expected to be in range of "
                                     f"[{-input.ndim}, {input.ndim - 1}], but got {dim})",
                           IndexError)
        dim %= max(input.ndim, 1)
    values, inverse, counts = xp.unique(data.reshape(-1) if dim is None else data,
                                        return_inverse=True, return_counts=True, axis=dim)
    out = [Tensor._make(values.astype(data.dtype, copy=False))]
    if return_inverse:
        shape = data.shape if dim is None else (data.shape[dim],)
        out.append(Tensor._make(inverse.reshape(shape).astype(np.int64)))
    if return_counts:
        out.append(Tensor._make(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


@method
def nonzero(input, *, as_tuple=False):
    graph_break("nonzero")
    if input.ndim == 0:     # one element, at no index: (count, 0) indices; as_tuple, one dim
        nz = input._data.reshape(1).nonzero()
        if as_tuple:
            return (Tensor._make(nz[0].astype(np.int64)),)
        return Tensor._make(xp_of(input._data).zeros((len(nz[0]), 0), dtype=np.int64))
    nz = input._data.nonzero()
    if as_tuple:
        return tuple(Tensor._make(a.astype(np.int64)) for a in nz)
    stacked = xp_of(input._data).stack(nz, axis=1) if nz else input._data.reshape(0, 0)
    return Tensor._make(stacked.astype(np.int64))


def is_mask_key(key):
    """Whether a ``__getitem__`` key holds a boolean tensor (its result's size is the
    number of its True values)."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, Tensor) and k.dtype is dtypes.bool for k in keys)


__all__ = ["argwhere", "nonzero", "unique"]
