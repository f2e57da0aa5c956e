"""Devices: ``cpu`` holds NumPy arrays, ``cuda:N`` holds CuPy arrays.

Every op is written once against an array module ``xp``; ``xp_of(array)``
picks NumPy or CuPy from the array itself. CuPy is imported lazily, the first
time a cuda device is asked for; without CuPy or a GPU that first time raises
one clear error, and nothing else changes.

An op that touches a cuda array checks, as PyTorch does, that all its tensors
live on one device (``one_device``): only ops on the GPU path pay for it.
"""
import contextlib
import threading

import numpy as np

_cupy = None

SAME_DEVICE = ("Expected all tensors to be on the same device, but found at least two devices, "
               "{} and {}!")


class device:
    __slots__ = ("type", "index")

    def __init__(self, type_or_str="cpu", index=None):
        if isinstance(type_or_str, device):
            self.type, self.index = type_or_str.type, type_or_str.index
            return
        s = str(type_or_str)
        if ":" in s:
            s, idx = s.split(":", 1)
            index = int(idx)
        if s not in ("cpu", "cuda"):
            raise RuntimeError(
                f"Expected one of cpu, cuda device type at start of device string: {type_or_str}")
        if s == "cuda" and index is None:
            index = 0
        self.type, self.index = s, index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __enter__(self):
        """``with tracegrad.device("cuda"):``: the default device inside the block, as
        ``set_default_device`` sets it (PyTorch's device context manager)."""
        _default.outer.append(_default.device)
        _default.device = self
        return self

    def __exit__(self, *exc):
        _default.device = _default.outer.pop()

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"


CPU = device("cpu")


class _Default(threading.local):
    device = CPU        # where factory functions create a tensor given no device=

    def __init__(self):
        self.outer = []     # the defaults that ``with device(...)`` blocks replaced


_default = _Default()


def set_default_device(dev):
    """PyTorch's ``set_default_device``: factory functions (``zeros``, ``randn``, ``tensor``,
    ...) called without ``device=`` create on ``dev`` in this thread (None: the CPU)."""
    _default.device = CPU if dev is None else as_device(dev)


def get_default_device():
    return _default.device


def device_or_default(dev):
    """``dev`` as a device, or the default device where it is None (factory functions)."""
    return _default.device if dev is None else as_device(dev)



def cupy():
    """The CuPy module, or a clear error where CuPy or a GPU is missing."""
    global _cupy
    if _cupy is None:
        try:
            import cupy as cp
        except ImportError as e:
            raise RuntimeError(
                "tracegrad: device 'cuda' needs CuPy and an NVIDIA GPU; CuPy is not installed "
                "(pip install 'tracegrad[cuda]'), use device='cpu'") from e
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # CUDA driver missing
            raise RuntimeError(f"tracegrad: device 'cuda' is not available: {e}") from e
        if n == 0:
            raise RuntimeError("tracegrad: device 'cuda' is not available: no GPU found")
        _cupy = cp
        for fn in _on_load:
            fn(cp)
    return _cupy


_on_load = []       # run once CuPy loads: the layers above hook it here (cuda's peak counter)


def on_cupy_load(fn):
    """Run ``fn(cupy)`` once tracegrad has loaded CuPy (now, where it has): how ``cuda``'s
    memory statistics hook the load without this module importing the layer above it."""
    _on_load.append(fn)
    if _cupy is not None:
        fn(_cupy)


def loaded_cupy():
    """CuPy where a cuda device has been used already, else None (never imports it)."""
    return _cupy


def is_available():
    try:
        cupy()
    except RuntimeError:
        return False
    return True


def device_count():
    return cupy().cuda.runtime.getDeviceCount() if is_available() else 0


def as_device(d):
    if d is None:
        return CPU
    if isinstance(d, device):
        return d
    if isinstance(d, int):
        return device("cuda", d)
    return device(d)


def xp_of(array):
    return np if type(array) is np.ndarray or isinstance(array, np.generic) else cupy()


def recording(xp):
    """Whether the current stream of ``xp`` (CuPy) records a CUDA graph, when a check that
    reads a device value on the host cannot run: a replayed step goes without it, as
    PyTorch's CUDA kernels check such things only by a device assert."""
    return xp is not np and xp.cuda.get_current_stream().is_capturing()


def device_of(array):
    if type(array) is np.ndarray:
        return CPU
    return device("cuda", array.device.id)


class DeviceMismatch(RuntimeError):
    """Tensors of one op on different devices (the op's name is added by the caller)."""


def one_device(args, arrays, cpu_scalars):
    """CuPy, current on the device of an op whose ``arrays`` (the ``_data`` of the tensors
    among ``args``, and other values) include a cuda array, once every tensor is on that
    device. The common device is the first cuda one, as in PyTorch's TensorIterator; with
    ``cpu_scalars`` (elementwise ops) a 0-d CPU tensor that needs no gradient is copied to it,
    as PyTorch lets CPU scalars into CUDA kernels (``arrays`` is updated). Anything else on
    another device raises ``DeviceMismatch`` with PyTorch's message.

    An op on ``cuda:N`` makes N CuPy's current device (its kernels launch on the current one).
    """
    common = None
    host = []
    for i, a in enumerate(arrays):
        if getattr(args[i], "_data", None) is not a:
            continue                    # not a tensor's array: a Python scalar, None, ...
        if type(a) is np.ndarray:
            host.append(i)
            continue
        idx = a.device.id
        if common is None:
            common = idx
        elif idx != common:
            raise DeviceMismatch(SAME_DEVICE.format(f"cuda:{common}", f"cuda:{idx}"))
    cp = cupy()
    for i in host:
        a = arrays[i]
        if not (cpu_scalars and a.ndim == 0 and not _needs_grad(args[i])):
            raise DeviceMismatch(SAME_DEVICE.format(f"cuda:{common}", "cpu"))
        with cp.cuda.Device(common):
            arrays[i] = cp.asarray(a)
    if cp.cuda.runtime.getDevice() != common:
        cp.cuda.Device(common).use()
    return cp


def _needs_grad(t):
    """A CPU scalar whose gradient would come back from the device: not taken (the engine
    does not move gradients between devices)."""
    return t._requires_grad and _grad_enabled()


def _grad_enabled():
    """On, autograd's default, until ``autograd.grad_mode`` installs its own reader."""
    return True


def ask_grad_mode(is_grad_enabled):
    """Where ``_needs_grad`` reads the grad mode: ``autograd.grad_mode`` installs its
    ``is_grad_enabled`` here when it loads, so this module does not import the layer above."""
    global _grad_enabled
    _grad_enabled = is_grad_enabled


def mixed_devices(tensors):
    """PyTorch's same-device message for ``tensors`` on more than one device, else None
    (read after a failure, where the cost does not matter). CPU scalars beside a cuda tensor
    do not count: ``one_device`` takes them."""
    on_gpu = any(type(t._data) is not np.ndarray for t in tensors)
    devices = []
    for t in tensors:
        if on_gpu and type(t._data) is np.ndarray and t._data.ndim == 0:
            continue
        d = device_of(t._data)
        if d not in devices:
            devices.append(d)
    if len(devices) < 2:
        return None
    cuda = [d for d in devices if d.type == "cuda"]
    common = cuda[0] if cuda else devices[0]
    other = next(d for d in devices if d != common)
    return SAME_DEVICE.format(common, other)


def to_device(array, dev):
    """``array`` on device ``dev`` (no copy when it is already there)."""
    if dev.type == "cpu":
        return array if type(array) is np.ndarray else cupy().asnumpy(array)
    cp = cupy()
    if dev.index >= cp.cuda.runtime.getDeviceCount():
        raise RuntimeError(f"CUDA error: invalid device ordinal (asked for {dev})")
    with cp.cuda.Device(dev.index):
        if type(array) is np.ndarray:
            return cp.asarray(array)
        if array.device.id == dev.index:
            return array
        return array.copy()     # another GPU's: CuPy's asarray would hand it back as it is


def on_device(dev):
    """A block in which ``dev`` is CuPy's current device (CuPy allocates and launches on the
    current one); nothing for the CPU."""
    return contextlib.nullcontext() if dev.type == "cpu" else cupy().cuda.Device(dev.index)


def xp_for(dev):
    return np if dev.type == "cpu" else cupy()
