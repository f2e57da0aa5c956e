"""The indexing ops that broadcast their operands first: ``take_along_dim`` (a ``gather``)
and the masked ones, ``masked_fill`` (a ``where``), ``masked_fill_`` and ``masked_select``
(an index by a boolean mask).

They sit above both ``index_ops`` and ``shape_ops``, whose ``narrow``, ``split`` and ``flip``
are indexes: the primitives stay below in ``index_ops``.
"""
from .. import dtypes
from ..tensor import Tensor
from .core import inplace, op_error
from .data_dependent import graph_break
from .declare import method, rename_node
from .elementwise import where
from .index_ops import gather, index, index_put_p
from .rules import norm_dim
from .shape_ops import broadcast_if_needed, broadcast_tensors, broadcast_to


@method
def take_along_dim(input, indices, dim=None):
    """``gather`` after broadcasting ``input`` and ``indices`` against each other in every
    dim but ``dim``, as PyTorch's; without ``dim``, over the flattened input."""
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    d = norm_dim(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise op_error("take_along_dim", f"torch.take_along_dim(): input and indices should "
                                         f"have the same number of dimensions, but got "
                                         f"{input.ndim} dimensions for input, and "
                                         f"{indices.ndim} dimensions for indices")
    shape = [max(a, b) if 1 in (a, b) else a for a, b in zip(input.shape, indices.shape)]
    for k, (a, b) in enumerate(zip(input.shape, indices.shape)):
        if k != d and a != b and 1 not in (a, b):
            raise op_error("take_along_dim", f"The size of tensor a ({a}) must match the size "
                                             f"of tensor b ({b}) at non-singleton dimension {k}")
    want_i = tuple(indices.shape[k] if k == d else shape[k] for k in range(input.ndim))
    want_x = tuple(input.shape[k] if k == d else shape[k] for k in range(input.ndim))
    if indices.shape != want_i:
        indices = broadcast_to(indices, want_i)
    if input.shape != want_x:
        input = broadcast_to(input, want_x)
    # along a dim, a negative index counts from the end (as PyTorch's; gather's do not)
    indices = where(indices < 0, indices + input.shape[d], indices)
    return gather(input, d, indices)


@method
def masked_fill(input, mask, value):
    if mask.dtype is not dtypes.bool:
        raise op_error("masked_fill", f"masked_fill_ only supports boolean masks, but got mask "
                                      f"with dtype {mask.dtype.name}")
    out = where(mask, value, input)
    if out.dtype is not input.dtype:
        return out.to(input.dtype)
    if out._grad_fn is not None:    # PyTorch's masked_fill.Scalar / masked_fill.Tensor
        rename_node(out._grad_fn, "MaskedFillBackward1" if isinstance(value, Tensor)
                    else "MaskedFillBackward0")
    return out


@method("masked_fill_")
def _masked_fill_(self, mask, value):
    if mask.dtype.name != "bool":
        raise op_error("masked_fill_", f"masked_fill_ only supports boolean masks, but got mask "
                                       f"with dtype {mask.dtype.name}")
    mask = broadcast_if_needed(mask, self.shape)
    return inplace(index_put_p, "masked_fill_", self, value, mask, spec=(("t", 0),))


@method
def masked_select(input, mask):
    graph_break("masked_select")
    input, mask = broadcast_tensors(input, mask)
    if input.ndim == 0:     # 0-d: selects as one element (the result is 1-D either way), and
        input, mask = input.reshape(1), mask.reshape(1)     # the trace's shape rule needs a dim
    return index(input, mask)
