"""How a gradient lands in a leaf's ``.grad``: PyTorch's AccumulateGrad.

Without ``create_graph``, a leaf that has a ``.grad`` gets the new gradient added
into it in place (the same tensor over the same buffer, its version bumped), and
a leaf without one takes the incoming gradient itself when nothing else holds it
(PyTorch "steals" it when its use count says so; here ``sys.getrefcount`` says
so), else a copy. With ``create_graph``, ``.grad`` is a new tensor each time, part
of the graph. The engine calls ``accumulate_grad`` with the node's gradient buffer and
keeps no other reference to the gradient, so that the count means what it says.
"""
import sys

import numpy as np

from .. import _hooks

Tensor = None       # tracegrad.tensor.Tensor, set on first use (tensor imports this package)


def tensor_type():
    """``tracegrad.tensor.Tensor`` (imported late: ``tensor`` imports this package)."""
    global Tensor
    if Tensor is None:
        from ..tensor import Tensor as T
        Tensor = T
    return Tensor


def accumulate_grad(var, grads, create_graph):
    """Add ``grads[0]`` into ``var.grad`` as PyTorch's AccumulateGrad does, then run the post
    hooks. Without ``create_graph`` an existing ``.grad`` is updated in place (same tensor, same
    buffer), and a first gradient that nothing else holds becomes ``.grad`` without a copy;
    with it, ``.grad`` is a new tensor that is part of the graph. ``grads`` is the engine's
    buffer for the node: the slot is cleared so that the buffer's reference does not count."""
    g = grads[0]
    grads[0] = None
    tracer = _hooks.tracer if _hooks.TRACING.n else None    # the thread's, while any traces
    if tracer is not None:      # inside tracegrad.compile: the variant sets .grad too
        tracer.grad_written(var, reads=True)
    old = var._grad
    if old is None:
        if create_graph:
            from ..ops.elementwise import clone
            var._grad = clone(g)    # a new tensor (PyTorch's CopyBackwards), never an alias of g
        else:
            new = _steal(g) if tracer is None else None
            var._grad = _copy_of(g) if new is None else new
    elif tracer is not None:    # the same update, recorded: in place where eager's is
        if create_graph or not _traced_add(old, g):
            var._grad = old + g
    elif create_graph or not _add_in_place(old._data, g._data):
        var._grad = old + g
    else:
        old._vc.value += 1
    g = None
    if var._post_acc_hooks:
        for fn in list(var._post_acc_hooks.values()):
            fn(var)


def _copy_of(g):
    t = g.detach()
    d = g._data
    if type(d) is np.ndarray:
        t._data = d.copy()      # never alias a gradient another leaf may receive
    else:
        with d.device:          # CuPy copies onto the current device: make it the gradient's
            t._data = d.copy()
    return t


def _traced_add(old, g):
    """``old.add_(g)`` as an op a trace records, where ``_add_in_place`` would take it."""
    if old.shape != g.shape or not np.can_cast(g._data.dtype, old._data.dtype, "same_kind"):
        return False
    from .grad_mode import no_grad
    with no_grad():
        old.add_(g)
    return True


def _add_in_place(old, new):
    """``old += new`` (PyTorch's ``variable_grad += new_grad``) when ``old`` can take it as it
    is: writable, the same shape, a dtype ``new`` casts to; else False, and nothing done."""
    if old.shape != new.shape:
        return False
    if type(old) is np.ndarray:
        if not old.flags.writeable or not np.can_cast(new.dtype, old.dtype, "same_kind"):
            return False
        np.add(old, new, out=old)
        return True
    if old.dtype != new.dtype:
        return False
    with old.device:    # a CuPy array: its kernel runs on the current device
        old += new
    return True


# What ``sys.getrefcount`` says, on this interpreter, for an object held exactly as ``_steal``
# expects a gradient to be; measured, as CPython versions count arguments differently.
def _held_by_a_caller_and_a_parameter():
    probe = object()
    return _refcount_of_parameter(probe)


def _refcount_of_parameter(x):
    return sys.getrefcount(x)


class _Slot:
    __slots__ = ("value",)


def _held_by_a_slot_and_a_local():
    holder = _Slot()
    holder.value = object()
    value = holder.value
    return sys.getrefcount(value)


_CALLER_AND_PARAMETER = _held_by_a_caller_and_a_parameter()
_SLOT_AND_LOCAL = _held_by_a_slot_and_a_local()


def _steal(g):
    """A new tensor over ``g``'s array when nothing but the caller holds ``g``, nothing but
    ``g`` holds the array (no other tensor, no view of it), and the array is a plain owner of
    contiguous, writable memory (or a reshape of one that nothing else holds); else None.
    PyTorch's AccumulateGrad checks the same through the gradient's use count."""
    if (sys.getrefcount(g) > _CALLER_AND_PARAMETER      # accumulate_grad's local, and g here
            or g._base is not None or g._requires_grad):
        return None
    data = g._data      # held by g and this local
    if (type(data) is not np.ndarray or sys.getrefcount(data) > _SLOT_AND_LOCAL
            or not data.flags.c_contiguous or not data.flags.writeable):
        return None
    base = data.base    # a view: taken when it is the whole of an array nothing else holds
    if base is not None and (type(base) is not np.ndarray or base.base is not None
                             or sys.getrefcount(base) > _SLOT_AND_LOCAL
                             or base.size != data.size):
        return None
    t = tensor_type()._make(data)
    t._is_inference = g._is_inference
    return t


def accumulate_nonleaf(t, g, create_graph):
    """``backward(inputs=[t])`` for a non-leaf ``t``: its ``.grad`` is the sum, out of place."""
    if g is None:
        return
    if t._grad is None:
        t._grad = g if create_graph else g.detach()
    else:
        t._grad = t._grad + g
