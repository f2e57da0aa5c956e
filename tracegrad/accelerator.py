"""``tracegrad.accelerator``: PyTorch's device-agnostic ``torch.accelerator``.

The one accelerator tracegrad drives is a CUDA GPU (through CuPy): with one,
``current_accelerator()`` is ``device("cuda")`` and the functions act on the current GPU
through ``tracegrad.cuda``; without one (no CuPy, or no GPU), as in a CPU build of PyTorch,
``is_available()`` is False, ``current_accelerator()`` None, ``device_count()`` 0, and the
functions that need a device raise PyTorch's RuntimeError. The common idiom

    device = acc if (acc := torch.accelerator.current_accelerator()) else torch.device("cpu")

therefore picks "cpu" or "cuda" honestly.
"""
import contextlib

from . import cuda
from .device import as_device, device

_NONE = "Cannot access accelerator device when none is available."

__all__ = ["current_accelerator", "current_device_idx", "current_device_index",
           "current_stream", "device_count", "device_index", "empty_cache", "is_available",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated",
           "memory_reserved", "reset_peak_memory_stats", "set_device_idx", "set_device_index",
           "synchronize"]


def is_available():
    return cuda.is_available()


def device_count():
    return cuda.device_count()


def current_accelerator(check_available=False):
    """``device("cuda")`` when a GPU is usable, else None (``check_available`` is accepted
    for PyTorch's signature: tracegrad's only accelerator is checked either way)."""
    return device("cuda") if cuda.is_available() else None


def _need():
    if not cuda.is_available():
        raise RuntimeError(_NONE)


def _index(dev):
    if dev is None or isinstance(dev, int):
        return dev
    d = as_device(dev)
    if d.type != "cuda":
        raise ValueError(f"{d} doesn't match the current accelerator cuda.")
    return d.index


def current_device_index():
    _need()
    return cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device, /):
    _need()
    idx = _index(device)
    if idx is not None:
        cuda.set_device(idx)


set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device, /):
    """Make GPU ``device`` current inside the block (None: a no-op, as in PyTorch)."""
    if device is None:
        yield
        return
    _need()
    with cuda.device(device):
        yield


def synchronize(device=None, /):
    _need()
    cuda.synchronize(_index(device))


def current_stream(device=None, /):
    _need()
    return cuda.current_stream(_index(device))


def empty_cache():
    _need()
    cuda.empty_cache()


def _memory(fn):
    def stat(device_index=None, /):
        _need()
        return fn(_index(device_index))
    stat.__name__ = fn.__name__
    return stat


memory_allocated = _memory(cuda.memory_allocated)
memory_reserved = _memory(cuda.memory_reserved)
max_memory_allocated = _memory(cuda.max_memory_allocated)
max_memory_reserved = _memory(cuda.max_memory_reserved)
reset_peak_memory_stats = _memory(cuda.reset_peak_memory_stats)
