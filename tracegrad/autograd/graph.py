"""The backward graph: nodes, saved tensors, hooks.

A ``Node`` is one backward function. ``next_functions`` holds one edge
``(node, output_nr)`` per input of the forward op, ``(None, 0)`` for inputs that
need no gradient. Leaves that require grad end in an ``AccumulateGrad`` node.

Saved tensors are ``SavedTensor`` records: they remember the version of the
tensor at save time and refuse to unpack after an in-place change, apply the
active ``saved_tensors_hooks``, and are freed after a backward without
``retain_graph``.
"""
import itertools
import re
import threading
import weakref

from .. import _hooks
from .._hooks import Census
from .anomaly_mode import _Anomaly, forward_stack

_seq = itertools.count()

# ``tracegrad.tensor.Tensor``, which unpacked saved tensors are made of, and
# ``grad_mode.no_grad``, which a pack hook runs under: ``tensor`` sets them when it is
# imported, as it sits above this module (a tensor holds nodes and hooks).
Tensor = None
no_grad = None

# ``autograd.engine.backward``, which ``Tensor.backward`` runs: the engine sets it when it is
# imported, as it sits above the tensor (it makes the root gradients with creation functions).
run_backward = None

# Nodes that PyTorch implements in C++ report a qualified ``name()``; code compares against it.
_CPP_NODES = frozenset(("AccumulateGrad", "CopySlices", "Error", "GraphRoot"))

FREED_ERROR = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward.")


class RemovableHandle:
    """Returned by every ``register_*hook``; ``remove()`` takes the hook out."""
    _ids = itertools.count()

    def __init__(self, hooks_dict):
        self.id = next(RemovableHandle._ids)
        self._ref = weakref.ref(hooks_dict) if hooks_dict is not None else None

    def remove(self):
        d = self._ref() if self._ref is not None else None
        if d is not None:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(dict):
    """A dict that a weakref can point at (hook handles hold it weakly)."""
    __slots__ = ("__weakref__",)


def add_hook(owner_dict, fn):
    if _hooks.state.tracer is not None:     # inside tracegrad.compile
        _hooks.state.tracer.hook_registered()
    handle = RemovableHandle(owner_dict)
    owner_dict[handle.id] = fn
    return handle


class Node:
    """One backward function of the autograd graph."""
    _materialize = False     # custom Functions fill missing output grads with zeros
    __slots__ = ("next_functions", "_seq", "_pre_hooks", "_post_hooks", "_tensor_pre_hooks",
                 "_retain_grad", "_anomaly_trace", "_out_meta", "_metadata", "__weakref__")

    def __init__(self, next_functions, out_meta):
        self.next_functions = next_functions
        self._out_meta = out_meta          # ((shape, np dtype, xp), ...) per output
        self._seq = next(_seq)
        self._pre_hooks = self._post_hooks = self._tensor_pre_hooks = None
        self._retain_grad = None
        self._anomaly_trace = forward_stack() if _Anomaly.enabled else None
        self._metadata = None

    @property
    def metadata(self):
        """A dict for the user's notes on this node (made on first use)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def name(self):
        n = type(self).__name__
        return "torch::autograd::" + n if n in _CPP_NODES else n

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def num_outputs(self):
        return len(self._out_meta)

    def apply(self, grads):
        """Gradients for the forward inputs from gradients of the forward outputs."""
        raise NotImplementedError

    def __call__(self, *grads):
        res = self.apply(list(grads))
        return res[0] if len(res) == 1 else tuple(res)

    def release(self):
        """Free saved tensors (called after a backward without retain_graph)."""

    # hooks ---------------------------------------------------------------
    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` runs after the node; may return new grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        return add_hook(self._post_hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before the node; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return add_hook(self._pre_hooks, fn)

    def _add_tensor_hook(self, output_nr, fn):
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        return add_hook(self._tensor_pre_hooks.setdefault(output_nr, _HookDict()), fn)

    def _set_retain_grad(self, output_nr, tensor):
        if self._retain_grad is None:
            self._retain_grad = {}
        self._retain_grad[output_nr] = weakref.ref(tensor)


class AccumulateGrad(Node):
    """The sink for a leaf: adds the incoming gradient into ``variable.grad``."""
    __slots__ = ("variable",)

    def __init__(self, variable):
        data = variable._data
        Node.__init__(self, (), ((data.shape, data.dtype, None),))
        self.variable = variable

    def apply(self, grads):
        raise RuntimeError("AccumulateGrad is applied by the engine")


def grad_accumulator(t):
    """The one AccumulateGrad node of leaf ``t`` (shared by every op that uses it)."""
    acc = t._grad_acc() if t._grad_acc is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._grad_acc = weakref.ref(acc)
    return acc


# saved tensors ----------------------------------------------------------------

class _HooksState(threading.local):
    def __init__(self):
        self.stack = []
        self.disabled = None


_hooks_state = _HooksState()
_PACKING = Census()     # saved_tensors_hooks blocks open now, in any thread


def packing():
    """Whether a ``saved_tensors_hooks`` block is open in this thread (``SavedTensor`` asks
    the same inline, on its hot path)."""
    return bool(_PACKING.n and _hooks_state.stack)


def _packed(pack, t):
    """``pack(t)`` as PyTorch runs it: without recording gradients, and with no hook applied
    to what its own ops save (a pack hook that computes, ``v.to(float16)``, would recurse).
    Inside a trace, the hook runs untraced, on the trace run's real values: it is the user's
    memory policy, not part of the function (it may copy to NumPy, say)."""
    stack, _hooks_state.stack = _hooks_state.stack, []
    tracer = _hooks.state.tracer
    try:
        with no_grad():
            if tracer is None:
                return pack(t)
            with tracer.suspended():
                return pack(t)
    finally:
        _hooks_state.stack = stack


class saved_tensors_hooks:
    """``with saved_tensors_hooks(pack, unpack):`` packs every tensor saved for backward."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if _hooks_state.disabled:
            raise RuntimeError(_hooks_state.disabled)
        _hooks_state.stack.append((self.pack_hook, self.unpack_hook))
        _PACKING.add(1)
        return self

    def __exit__(self, *exc):
        _hooks_state.stack.pop()
        _PACKING.add(-1)


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors live in host memory and return to their device on unpack."""

    def __init__(self, pin_memory=False):
        def pack(t):
            return (t.device, t.cpu())

        def unpack(packed):
            dev, t = packed
            return t.to(dev)
        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    def __init__(self, error_message):
        self.msg = error_message

    def __enter__(self):
        self.prev = _hooks_state.disabled
        _hooks_state.disabled = self.msg

    def __exit__(self, *exc):
        _hooks_state.disabled = self.prev


def _describe(array):
    from ..device import device_of
    from ..dtypes import from_numpy, type_name
    dt = type_name(from_numpy(array.dtype), device_of(array).type)
    return f"[{dt} [{', '.join(map(str, array.shape))}]]"


class _Version:
    """A version counter, shared by a tensor and its views (``Tensor._vc``)."""
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class SavedTensor:
    """A tensor saved for backward, checked against in-place change on unpack."""
    __slots__ = ("tensor", "data", "vc", "version", "packed", "unpack_hook", "output_nr",
                 "is_output", "meta")

    def __init__(self, t, is_output=False):
        if t._is_inference or t._base is not None and t._base._is_inference:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. Please do not use Tensors created "
                "in inference mode in computation tracked by autograd. To work around this, you "
                "can make a clone to get a normal tensor and use it in autograd, or use "
                "`tracegrad.no_grad()` instead of `tracegrad.inference_mode()`.")
        vc = t._vc_
        if vc is None:
            vc = t._vc_ = _Version()
        self.vc = vc
        self.version = vc.value
        self.is_output = is_output
        self.output_nr = t._output_nr
        self.unpack_hook = self.meta = None
        if _PACKING.n and _hooks_state.stack:     # the thread-local read only when needed
            self.tensor = self.data = None
            pack, self.unpack_hook = _hooks_state.stack[-1]
            if t._requires_grad:     # what unpack gives back gets t's autograd identity
                self.meta = (None if is_output else t._grad_fn, t._output_nr, t._grad_acc)
            self.packed = _packed(pack, t)
        elif is_output:
            self.tensor = self.packed = None
            self.data = t._data      # no strong ref to the output itself: no cycle through grad_fn
        else:
            self.data = self.packed = None
            self.tensor = t

    def unpack(self, node):
        if self.vc.value != self.version:
            origin = self._origin(node)
            array = self.tensor._data if self.tensor is not None else self.data
            desc = _describe(array) if array is not None else "a saved tensor"
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {desc}{origin} is at version {self.vc.value}; expected "
                f"version {self.version} instead. It was saved for {node.name()}. Hint: enable "
                f"anomaly detection to find the operation that failed to compute its gradient, "
                f"with tracegrad.autograd.set_detect_anomaly(True, check_nan=False).")
        if self.unpack_hook is not None:
            return self._with_history(self.unpack_hook(self.packed), node)
        if self.is_output:
            return Tensor._make(self.data, node, vc=self.vc, output_nr=self.output_nr)
        return self.tensor

    def _origin(self, node):
        """PyTorch's ", which is output N of Op," where Op made the value as it is now."""
        if self.is_output:
            fn, nr = node, self.output_nr
        elif self.tensor is not None:
            fn, nr = self.tensor._grad_fn, self.tensor._output_nr
        else:
            fn, nr = self.meta[:2] if self.meta is not None else (None, 0)
        if fn is None:
            return ""
        return f", which is output {nr} of {re.sub(r'Backward[0-9]*$', '', fn.name())},"

    def _with_history(self, t, node):
        """As PyTorch: the unpacked value is a new tensor with the saved one's grad_fn (or,
        for a leaf, its grad accumulator), whatever the unpack hook returned."""
        if not isinstance(t, Tensor):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(t).__name__}")
        if self.meta is None:
            return t
        fn, output_nr, grad_acc = self.meta
        out = Tensor._make(t._data, grad_fn=node if self.is_output else fn, requires_grad=True,
                           vc=t._vc, output_nr=output_nr)
        if out._grad_fn is None:
            out._grad_acc = grad_acc
        return out
