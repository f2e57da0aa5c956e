"""Tensor's conversions (to Python values, NumPy, other dtypes and devices) and the
queries that read only its array's dtype and layout (``is_floating_point``, ``stride``...).

``TensorConversions`` holds the methods; ``tensor.py`` sets each on ``Tensor`` itself (so
``Tensor.__dict__`` has them, where ``install_method`` and the profiler look), after the
class is made. Reading a value (``item``, ``bool(t)``, ``tolist``) inside
``tracegrad.compile`` records a guard on it; ``numpy()`` there is unsupported.
"""
import numpy as np

from . import _hooks, dtypes
from .device import CPU, as_device, to_device

_hook_state = _hooks.state


class TensorConversions:
    """The methods ``Tensor`` takes from this module (never instantiated, never a base)."""
    __slots__ = ()

    # dtype and layout of the array ------------------------------------------------------
    def is_complex(self):
        return self._data.dtype.kind == "c"

    def is_conj(self):
        return False

    def is_neg(self):
        return False

    def is_signed(self):
        return self._data.dtype.kind in "fic"

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def element_size(self):
        return self._data.itemsize

    def stride(self, dim=None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[dim]

    def is_contiguous(self, memory_format=None):
        """Whether the array is laid out in ``memory_format``'s order: row-major by default;
        for ``channels_last`` (_3d), the channels innermost (NHWC), which a rank other than 4
        (5) is not, as PyTorch answers. Arrays here are row-major whatever format a
        conversion asked for, so ``channels_last`` is True only where the two coincide
        (one channel, or one pixel)."""
        a = self._data
        order = _CHANNELS_LAST.get(getattr(memory_format, "name", None))
        if order is None:       # contiguous_format, preserve_format
            return bool(a.flags.c_contiguous)
        return a.ndim == len(order) and bool(a.transpose(order).flags.c_contiguous)

    def data_ptr(self):
        return self._data.ctypes.data if type(self._data) is np.ndarray else self._data.data.ptr

    # Python values and NumPy -------------------------------------------------------------
    def numpy(self, *, force=False):
        if _hooks.tracer is not None:
            _hooks.tracer.unsupported("Tensor.numpy()")
        if self._requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if type(self._data) is not np.ndarray:
            if not force:
                raise TypeError(
                    f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
                    f"copy the tensor to host memory first.")
            return to_device(self._data, CPU)
        return self._data

    def __array__(self, dtype=None, copy=None):
        a = self.detach().numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        value = self._data.reshape(()).item()
        if _hooks.tracer is not None:       # inside tracegrad.compile: a data-dependent guard
            _hooks.tracer.guard(self, "value", value)
        return value

    def tolist(self):
        value = to_device(self._data, CPU).tolist()
        if _hooks.tracer is not None:
            _hooks.tracer.guard(self, "value", value)
        return value

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                "Boolean value of Tensor with more than one value is ambiguous")
        value = bool(self._data.reshape(()).item())
        if _hooks.tracer is not None:
            _hooks.tracer.guard(self, "bool", value)
        return value

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        n = self.shape[0] if _hook_state.tracer is not None else self._data.shape[0]
        return (self[i] for i in range(n))      # range() of a dynamic size specialises

    def __format__(self, spec):
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    # other devices and dtypes (``to`` is in tensor.py) -----------------------------------
    def cpu(self, memory_format=None):
        return self.to("cpu")

    def is_pinned(self, device=None):
        """Whether this CPU tensor's memory is page-locked (False without a GPU)."""
        from .device import loaded_cupy
        cp = loaded_cupy()
        if cp is None or type(self._data) is not np.ndarray or self._data.size == 0:
            return False
        try:
            attrs = cp.cuda.runtime.pointerGetAttributes(self._data.ctypes.data)
        except Exception:   # noqa: BLE001 - memory CUDA does not know: not pinned
            return False
        return attrs.type == cp.cuda.runtime.memoryTypeHost

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        return self.to(as_device("cuda" if device is None else device if not isinstance(device, int)
                                 else f"cuda:{device}"))

    def type(self, dtype=None, non_blocking=False):
        """The legacy type name, or this tensor converted to a dtype, a type name
        (``"torch.DoubleTensor"``) or a legacy type (``tracegrad.LongTensor``)."""
        if dtype is None:
            return dtypes.type_name(self.dtype, self.device.type)
        if isinstance(dtype, str):
            dtype, device_type = dtypes.from_type_name(dtype)
            return self.to(device_type if device_type != self.device.type else self.device,
                           dtype)
        return self.to(getattr(dtype, "dtype", dtype))

    def float(self, memory_format=None):
        return self.to(dtypes.float32)

    def double(self, memory_format=None):
        return self.to(dtypes.float64)

    def half(self, memory_format=None):
        return self.to(dtypes.float16)

    def long(self, memory_format=None):
        return self.to(dtypes.int64)

    def int(self, memory_format=None):
        return self.to(dtypes.int32)

    def bool(self, memory_format=None):
        return self.to(dtypes.bool)

    def type_as(self, other):
        return self.to(other.dtype)

    def equal(self, other):
        return self.shape == other.shape and bool((self._data == other._data).all())


# the dims of channels_last (_3d) from outermost to innermost
_CHANNELS_LAST = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}
