"""One node of a backward pass with everything around it (the engine's general path): its
tensors' hooks and ``retain_grad``, its pre-hooks, the capture of ``grad(inputs=...)``, the
node itself (with its missing gradients made zeros where it asks), its post-hooks and
anomaly mode's NaN check."""
from . import grad_mode
from .accumulate import accumulate_grad, accumulate_nonleaf
from .anomaly_mode import _Anomaly, report
from .graph import AccumulateGrad

_gm = grad_mode._state


def _run_node(node, grads, cap, captured, inputs, needed, accumulate, retain_graph, create_graph):
    """Hooks, capture and the node itself; returns the gradients for its next edges."""
    nothing = ()
    if all(g is None for g in grads):
        return nothing if type(node) is AccumulateGrad else [None] * len(node.next_functions)
    _call_tensor_hooks(node, grads)
    if node._pre_hooks:
        for fn in list(node._pre_hooks.values()):
            r = fn(tuple(grads))
            if r is not None:
                grads = list(r)
    if cap is not None:
        for nr, ks in cap.items():
            for k in ks:
                captured[k] = grads[nr]
    if type(node) is AccumulateGrad:
        if accumulate and (inputs is None or cap is not None) and grads[0] is not None:
            accumulate_grad(node.variable, grads, create_graph)
        return nothing
    if accumulate and cap is not None:      # backward(inputs=[non_leaf]) fills its .grad
        for nr, ks in cap.items():
            accumulate_nonleaf(inputs[ks[0]], grads[nr], create_graph)
    if needed is not None and node not in needed:
        return [None] * len(node.next_functions)
    out = _apply(node, grads)
    if not retain_graph:
        node.release()
    return out


def _materialize(node, grads):
    from ..creation import zeros
    for i, g in enumerate(grads):
        if g is None:
            shape, dt, dev = node._out_meta[i]
            grads[i] = zeros(shape, dtype=_dtype_of(dt), device=dev)
    return grads


def _dtype_of(np_dtype):
    from ..dtypes import from_numpy
    return from_numpy(np_dtype)


def _call_tensor_hooks(node, grads):
    if type(node) is AccumulateGrad:
        hooks = node.variable._backward_hooks
        hooks = {0: hooks} if hooks else None
    else:
        hooks = node._tensor_pre_hooks
    if hooks:
        for nr, d in hooks.items():
            for fn in list(d.values()):
                if grads[nr] is None:
                    continue
                r = fn(grads[nr])
                if r is not None:
                    grads[nr] = _check_hook_result(fn, grads[nr], r)
    if node._retain_grad:
        for nr, ref in node._retain_grad.items():
            t = ref()
            g = grads[nr]
            if t is None or g is None:
                continue
            if t._grad is None:
                from ..ops.elementwise import clone
                t._grad = clone(g) if _gm.grad_enabled else g.detach().clone()
            else:
                t._grad = t._grad + g


def _hook_name(fn):
    return getattr(fn, "__name__", type(fn).__name__)


def _check_hook_result(fn, old, new):
    """A tensor hook may replace the gradient, but only with one of the same size and type."""
    from ..tensor import Tensor
    if not isinstance(new, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
    if new.shape != old.shape:
        raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size of value")
    if new.dtype is not old.dtype:
        raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the type of value (was "
                           f"{old.type()} got {new.type()})")
    return new


def _check_nan(node, grads):
    for i, g in enumerate(grads):
        if g is not None and g.dtype.is_floating_point and bool(g.isnan().any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def _apply(node, grads):
    if node._materialize and any(g is None for g in grads):
        grads = _materialize(node, grads)
    try:
        out = node.apply(grads)
    except Exception:
        if _Anomaly.enabled:
            report(node)
        raise
    if node._post_hooks:
        for fn in list(node._post_hooks.values()):
            r = fn(tuple(out), tuple(grads))
            if r is not None:
                if len(r) != len(out):
                    raise RuntimeError(f"hook '{_hook_name(fn)}' has returned an incorrect number "
                                       f"of values (got {len(r)}, but expected {len(out)})")
                out = list(r)
    if _Anomaly.enabled and _Anomaly.check_nan:
        try:
            _check_nan(node, out)
        except RuntimeError:
            report(node)
            raise
    return out
