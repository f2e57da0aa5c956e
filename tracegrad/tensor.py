"""The eager ``Tensor``: an array (NumPy or CuPy) plus its autograd state.

Math methods and operators are attached by ``tracegrad.ops`` from the same
functions users call as ``tracegrad.exp(x)``; this file holds the state,
attributes and the autograd hooks, and ``tensor_convert.py`` the conversions to
Python values and NumPy and the dtype/device shorthands. What needs the layers above
is installed by them: ``Tensor(...)`` by ``creation``, ``to`` by ``ops.elementwise``
(beside ``convert``), and ``backward`` runs the engine through ``autograd.graph``'s slot.
"""
import warnings

import numpy as np

from . import _hooks, dtypes
from .autograd import grad_mode
from .autograd import graph as _graph
from .autograd.graph import _HookDict, _Version, add_hook, grad_accumulator
from .device import CPU, as_device, device_of, to_device
from .tensor_convert import TensorConversions

_DTYPE_OF = {d.np: d for d in dtypes.ALL}   # NumPy dtype -> tracegrad dtype, for _make
_gm = grad_mode._state
_INFERENCE_THREADS = grad_mode.INFERENCE_THREADS
_hook_state = _hooks.state
_TRACING = _hooks.TRACING


class Size(tuple):
    """A tensor's shape: a tuple that prints as ``tracegrad.Size([2, 3])``."""

    def __repr__(self):
        return f"tracegrad.Size([{', '.join(map(str, self))}])"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead.")


class memory_format:
    """PyTorch's memory formats (``contiguous_format``, ``channels_last``, ...), accepted
    wherever PyTorch takes one. Arrays here have one layout (row-major), so every format
    gives the same values; only the strides PyTorch would report differ."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return (_memory_format, (self.name,))


def _memory_format(name):
    return globals()[name]


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


def parse_to_args(args, kwargs):
    """``(device, dtype)`` from the arguments of ``Tensor.to`` / ``Module.to``: a device, a
    dtype, both, or a tensor to copy them from (``non_blocking`` and ``memory_format`` are
    accepted and ignored)."""
    dev = dt = None
    for a in list(args) + [v for k, v in kwargs.items()
                           if k not in ("non_blocking", "memory_format")]:
        if isinstance(a, memory_format):
            continue
        if isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, dtypes.dtype):
            dt = a
        elif a is not None and not isinstance(a, bool):
            dev = as_device(a)
    return dev, dt


class Tensor:
    __slots__ = ("_data", "_requires_grad", "_grad", "_grad_fn", "_output_nr", "_vc_", "_base",
                 "_view_steps", "_view_version", "_backward_hooks", "_post_acc_hooks",
                 "_grad_acc", "_retains_grad", "_is_inference", "dtype", "__weakref__")

    # construction ------------------------------------------------------------
    @classmethod
    def _make(cls, data, grad_fn=None, requires_grad=False, vc=None, output_nr=0, dtype=None):
        """A tensor of ``data``; ``dtype``, where the caller knows it, is ``data``'s dtype."""
        t = object.__new__(cls)
        t._data = data
        t.dtype = dtype or _DTYPE_OF.get(data.dtype) or dtypes.from_numpy(data.dtype)
        t._grad_fn = grad_fn
        t._requires_grad = requires_grad or grad_fn is not None
        t._grad = None
        t._output_nr = output_nr
        t._vc_ = vc
        t._base = t._view_steps = t._backward_hooks = t._post_acc_hooks = t._grad_acc = None
        t._retains_grad = False
        t._is_inference = _gm.inference if _INFERENCE_THREADS.n else False
        return t

    # ``Tensor(...)``, the legacy constructor, is ``creation``'s ``__new__``, installed there
    def __init__(self, *args, **kwargs):
        pass

    # metadata -----------------------------------------------------------------
    @property
    def shape(self):
        if _TRACING.n:
            tracer = _hook_state.tracer
            if tracer is not None:  # inside a trace: the IR's shape (symbolic where dynamic)
                return Size(tracer.shape_of(self))
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return self.shape
        if _TRACING.n and _hook_state.tracer is not None:
            return self.shape[dim]
        return self._data.shape[dim]

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    def numel(self):
        if _TRACING.n and _hook_state.tracer is not None:
            return self.shape.numel()
        return int(self._data.size)

    nelement = numel

    @property
    def device(self):
        return device_of(self._data)

    @property
    def is_cuda(self):
        return type(self._data) is not np.ndarray

    @property
    def is_cpu(self):
        return type(self._data) is np.ndarray

    # Devices, layouts and kinds tracegrad never makes: PyTorch's predicates, always False
    is_xpu = is_mps = is_meta = is_ipu = is_xla = is_maia = is_mtia = is_vulkan = \
        is_sparse = is_sparse_csr = is_quantized = is_mkldnn = is_nested = \
        property(lambda self: False)

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        if _hook_state.tracer is not None:      # a dynamic size specialises (int())
            return int(self.shape[0])
        return self._data.shape[0]

    def __hash__(self):
        return id(self)

    # autograd state -------------------------------------------------------------
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            return self
        if requires_grad and self.is_inference() and not grad_mode._state.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        if requires_grad and self._data.dtype.kind != "f":
            raise RuntimeError(
                f"only Tensors of floating point and complex dtype can require gradients "
                f"(got {self.dtype})")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def grad_fn(self):
        if self._base is not None and self._view_version != self._vc.value:
            self._refresh_view()    # installed by ops.inplace_views, a layer above
        return self._grad_fn

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def output_nr(self):
        return self._output_nr

    @property
    def grad(self):
        if self._grad_fn is not None and not self._retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' "
                                   f"to a tensor of size '{list(self.shape)}'. Please ensure that "
                                   f"the gradient and the tensor are the same size")
            if value.dtype is not self.dtype:
                raise RuntimeError(f"attempting to assign a gradient with dtype '{value.dtype}' to "
                                   f"a tensor with dtype '{self.dtype}'. Please ensure that the "
                                   f"gradient and the tensor have the same dtype")
        if _hooks.tracer is not None:       # inside tracegrad.compile: the variant sets it too
            _hooks.tracer.grad_written(self)
        self._grad = value

    @property
    def retains_grad(self):
        return self._retains_grad

    def retain_grad(self):
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        self._grad_fn._set_retain_grad(self._output_nr, self)
        self._retains_grad = True

    @property
    def _vc(self):
        """The version counter of this tensor's storage, shared with its views. It is made on
        first use: most tensors (a backward's intermediate gradients) are never saved for a
        backward nor written in place, and never need one."""
        vc = self._vc_
        if vc is None:
            vc = self._vc_ = _Version()
        return vc

    @_vc.setter
    def _vc(self, vc):
        self._vc_ = vc

    @property
    def _version(self):
        return self._vc.value

    def is_inference(self):
        # a view of an inference tensor is one too, whatever mode it was taken in
        return self._is_inference or (self._base is not None and self._base._is_inference)

    @property
    def data(self):
        """A tensor sharing storage, detached, with its own version counter."""
        t = Tensor._make(self._data)
        if _hooks.tracer is not None:
            _hooks.tracer.detached(self, t)
        return t

    @data.setter
    def data(self, value):
        if _hooks.tracer is not None:
            _hooks.tracer.unsupported("assigning to Tensor.data")
        self._data = value._data
        self.dtype = value.dtype

    def detach(self):
        t = Tensor._make(self._data, vc=self._vc)
        t._is_inference = self.is_inference()
        if _hooks.tracer is not None:
            _hooks.tracer.detached(self, t)
        return t

    def detach_(self):
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._requires_grad = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        _graph.run_backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def register_hook(self, hook):
        """``hook(grad)`` runs when this tensor's gradient is computed; may return a new grad."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        fn = self.grad_fn
        if fn is not None:
            return fn._add_tensor_hook(self._output_nr, hook)
        if self._backward_hooks is None:
            self._backward_hooks = _HookDict()
        return add_hook(self._backward_hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """``hook(tensor)`` runs after the gradient was accumulated into this leaf's ``.grad``."""
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = _HookDict()
        return add_hook(self._post_acc_hooks, hook)

    def _grad_edge(self):
        """The (node, output_nr) through which this tensor receives its gradient."""
        fn = self._grad_fn if self._base is None else self.grad_fn   # a view may need a refresh
        if fn is not None:
            return fn, self._output_nr
        if self._requires_grad:
            return grad_accumulator(self), 0
        return None, 0

    # printing, copying, pickling, dtype and device moves --------------------------
    def __repr__(self):
        from ._tensor_str import tensor_repr
        return tensor_repr(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        t = type(self)._make(self._data.copy())
        t._requires_grad = self._requires_grad
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, proto):
        return (_rebuild, (to_device(self._data, CPU), str(self.device), self._requires_grad))

    def pin_memory(self, device=None):
        """A copy in page-locked host memory (``cupyx.empty_like_pinned``), which a GPU
        reads faster; without a GPU PyTorch's error."""
        from .device import cupy
        if type(self._data) is not np.ndarray:
            raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
        try:
            cupy()
        except RuntimeError as e:
            raise RuntimeError(f"Cannot access accelerator device when none is available. ({e})") \
                from None
        import cupyx
        pinned = cupyx.empty_like_pinned(self._data)
        pinned[...] = self._data
        return Tensor._make(pinned, dtype=self.dtype)


def _rebuild(array, device, requires_grad):
    t = Tensor._make(to_device(array, as_device(device)))
    t._requires_grad = requires_grad
    return t


# Saved tensors unpack into tensors of this class (``autograd.graph`` sits below this module)
_graph.Tensor, _graph.no_grad = Tensor, grad_mode.no_grad

# Conversions, and the queries of the array's dtype and layout (tensor_convert.py)
for _name, _method in vars(TensorConversions).items():
    if callable(_method):
        setattr(Tensor, _name, _method)
del _name, _method
