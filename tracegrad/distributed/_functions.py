"""Collectives as autograd ``Function``s, for code that must also run under ``compile``.

A custom ``Function`` is recorded by the tracer as one primitive whose
implementation runs ``forward`` on every compiled call, so a collective written
this way happens at run time, compiled or eager, and is never frozen into a
trace. ``SyncBatchNorm`` and DDP's buffer broadcast use these.
"""
from ..autograd.function import Function
from ..tensor import Tensor

# The default group travels as this name, not None: the tracer reads a None argument of a
# Function as the place of a tensor.
_WORLD = "WORLD"


def _group(name):
    return None if isinstance(name, str) and name == _WORLD else name


class AllReduceSum(Function):
    """``all_reduce(SUM)`` out of place; the gradient of a sum over ranks is the sum over
    ranks of the gradients."""

    @staticmethod
    def forward(ctx, x, group):
        from .collectives import all_reduce
        ctx.group = group
        out = Tensor._make(x._data.copy())    # a fresh, writable, contiguous buffer
        all_reduce(out, group=_group(group))
        return out

    @staticmethod
    def backward(ctx, g):
        return AllReduceSum.apply(g, ctx.group), None


class Broadcast(Function):
    """``broadcast(src)`` out of place (no gradient: used for buffers)."""

    @staticmethod
    def forward(ctx, x, src, group):
        from .collectives import broadcast
        out = Tensor._make(x._data.copy())    # a fresh, writable, contiguous buffer
        broadcast(out, src, group=_group(group))
        return out

    @staticmethod
    def backward(ctx, g):
        return None, None, None


def all_reduce_sum(x, group=None):
    return AllReduceSum.apply(x, _WORLD if group is None else group)


def broadcast_from(x, src=0, group=None):
    return Broadcast.apply(x, src, _WORLD if group is None else group)
