"""In-place ops and views: ``inplace`` writes a primitive's result into its target.

The autograd history is rewritten as PyTorch does (the target's new node takes its old value
as input; a written view gives its base a CopySlices history), under PyTorch's checks (a
leaf that requires grad, an inference tensor). A view remembers the steps that made it
(``_view_steps``), so that its history can be rebuilt from its base after a write.
"""
import warnings

import numpy as np

from .. import _hooks, dtypes
from ..autograd import grad_mode
from ..autograd.graph import SavedTensor
from ..tensor import Tensor
from . import binding
from .binding import _device_xp, _keep_quiet_filter, _record, bind
from .op_errors import _explain_failure, op_error

_gm = grad_mode._state


def check_inplace(target, name):
    if _gm.grad_enabled and target._requires_grad:
        if target._grad_fn is None and target._base is None:
            raise op_error(name, "a leaf Variable that requires grad is being used in an in-place "
                                 "operation.")
        if target._base is not None and target._base._requires_grad \
                and target._base._grad_fn is None:
            raise op_error(name, "a view of a leaf Variable that requires grad is being used in an "
                                 "in-place operation.")
    if target.is_inference() and not _gm.inference:     # a view of one counts too
        raise op_error(name, "Inplace update to inference tensor outside InferenceMode is not "
                             "allowed. You can make a clone to get a normal tensor before doing "
                             "inplace update.")


def inplace(prim, name, target, *others, **params):
    """Run ``prim(target, *others)`` and write the result into ``target``.

    The autograd history is rewritten as PyTorch does: ``target`` gets the op's
    node (with its old value as input), and when ``target`` is a view its base
    gets a node that scatters the new view value into the old base.
    """
    if batched_inplace is not None:     # a vmap is active: a batched tensor may take part
        done = batched_inplace(prim, name, target, others, params)
        if done is not None:
            return done
    if _hooks.tracer is not None:       # inside tracegrad.compile: record it functionally
        _hooks.tracer.inplace(prim, target, others, params,
                              lambda: _inplace(prim, name, target, *others, **params))
        return target
    if forward_inplace is not None:     # a dual level is open: the tangent is written too
        return forward_inplace(prim, name, target, others, params, _inplace)
    return _inplace(prim, name, target, *others, **params)


# ``autograd.forward_ad`` sets this while a dual level is open (the bind hook does not see an
# in-place write: ``_inplace`` binds the op to a private copy of the target's history)
forward_inplace = None
# ``tracegrad._vmap`` sets this while a vmap runs: an in-place op on a batched tensor is
# computed by the batching rules and written into the physical tensor; None when none takes
# part (the op then goes on as usual)
batched_inplace = None


def _inplace(prim, name, target, *others, **params):
    check_inplace(target, name)
    differentiable = target._requires_grad or any(
        isinstance(o, Tensor) and o._requires_grad for o in others)
    recording = _gm.grad_enabled and prim.vjp is not None and (
        differentiable or (target._base is not None and target._base._requires_grad))
    dt = target.dtype
    try:
        res_dt = prim.dtype(target, *others, **params)
    except (RuntimeError, TypeError) as e:
        raise op_error(name, str(e)) from None
    if res_dt.is_floating_point and not dt.is_floating_point or (
            res_dt is not dtypes.bool and dt is dtypes.bool):
        raise op_error(name, f"result type {res_dt.name.capitalize()} can't be cast to the desired "
                             f"output type {dt.name.capitalize()}")
    if not recording and prim.inplace_impl is not None:
        if not warnings.filters or warnings.filters[0] is not binding._quiet_filter:
            _keep_quiet_filter()    # quiet like PyTorch, as in apply_plain
        arrays = [o._data if isinstance(o, Tensor) else o for o in others]
        try:
            shape = prim.shape(target.shape, *[getattr(o, "shape", ()) for o in others], **params)
            if tuple(shape) != target.shape:
                raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the "
                                   f"broadcast shape {list(shape)}")
            xp = np
            if type(target._data) is not np.ndarray:    # the same-device check (GPU path)
                both = [target._data] + arrays
                xp = _device_xp(prim, (target,) + others, both)
                arrays = both[1:]
            prim.inplace_impl(xp, target._data, *arrays, **params)
        except Exception as exc:  # noqa: BLE001
            raise _explain_failure(prim, (target,) + others, params, exc) from None
        target._vc.value += 1
        if target._base is not None:
            target._view_version = target._vc.value
        return target
    old_data = target._data
    if recording and 0 in prim._save_idx:
        old_data = old_data.copy()    # the node saves the value from before the write
    old_fn = target.grad_fn
    old = Tensor._make(old_data, grad_fn=old_fn, requires_grad=target._requires_grad)
    old._output_nr = target._output_nr
    # The node is recorded apart from computing ``new``, because it must not save the private
    # ``new`` as its result: PyTorch saves ``target`` itself (after the write, below), so that a
    # later in-place write to it is caught, and a saved_tensors_hooks pack hook runs once.
    prev, _gm.grad_enabled = _gm.grad_enabled, False
    try:
        new = bind(prim, old, *others, **params)
    finally:
        _gm.grad_enabled = prev
    if recording and differentiable and res_dt.is_floating_point:
        _record(prim, new, (old,) + others, params, save_result=False)   # inputs before the write
    if new.shape != target.shape:
        raise op_error(name, f"output with shape {list(target.shape)} doesn't match the broadcast "
                             f"shape {list(new.shape)}")
    try:
        target._data[...] = new._data
    except ValueError as exc:
        raise op_error(name, str(exc)) from None
    target._vc.value += 1
    node = new._grad_fn
    if node is not None:
        if target._base is None:
            _move_retain_grad(target, old_fn, node)
            target._grad_fn, target._output_nr, target._requires_grad = node, 0, True
        else:
            _rebase_view(target, new)
        if prim.saves_result:
            node.saved[-1] = SavedTensor(target, is_output=True)
    if target._base is not None:
        target._view_version = target._vc.value
    return target


def _move_retain_grad(t, old_fn, new_fn):
    """``t`` is about to get ``new_fn`` as its grad_fn: its retain_grad goes along, as PyTorch's
    ``update_tensor_hooks_on_new_gradfn`` moves it (tensor hooks stay on the old node)."""
    if not t._retains_grad:
        return
    kept = old_fn._retain_grad if old_fn is not None else None
    if kept:
        ref = kept.get(t._output_nr)
        if ref is not None and ref() is t:
            del kept[t._output_nr]
            if not kept:
                old_fn._retain_grad = None    # the engine's fast path checks for None
    new_fn._set_retain_grad(0, t)


# ``index_ops.view_scatter``, which writes a view's new value into its base (CopySlices):
# ``index_ops`` sets it when imported, as its primitives are declared above this module.
view_scatter = None


def _rebase_view(view, new_value):
    """After an in-place write through ``view``, give its base a CopySlices history."""
    base = view._base
    old_base = Tensor._make(base._data, grad_fn=base.grad_fn, requires_grad=base._requires_grad)
    old_base._output_nr = base._output_nr
    new_base = view_scatter(old_base, new_value, view._view_steps)
    _move_retain_grad(base, old_base._grad_fn, new_base._grad_fn)
    base._grad_fn, base._output_nr, base._requires_grad = new_base._grad_fn, 0, True
    fresh = apply_view_steps(base, view._view_steps)._grad_fn
    _move_retain_grad(view, view._grad_fn, fresh)
    view._grad_fn, view._output_nr, view._requires_grad = fresh, 0, True


def apply_view_steps(x, steps):
    for prim, params in steps:
        x = bind(prim, x, **params)
    return x


def refresh_view(view):
    """A view whose base was written in place takes its history from the base anew."""
    base = view._base
    view._view_version = view._vc.value
    if base._requires_grad and _gm.grad_enabled:
        fresh = apply_view_steps(base, view._view_steps)._grad_fn
        _move_retain_grad(view, view._grad_fn, fresh)
        view._grad_fn, view._output_nr, view._requires_grad = fresh, 0, True


# A view written through since its ``grad_fn`` was read refreshes it (``Tensor.grad_fn``):
# installed from here, as ``tensor`` sits below the op layer.
Tensor._refresh_view = refresh_view
