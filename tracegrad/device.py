"""Devices: ``cpu`` holds NumPy arrays, ``cuda:N`` holds CuPy arrays.

Every op is written once against an array module ``xp``; ``xp_of(array)``
picks NumPy or CuPy from the array itself. CuPy is imported lazily, the first
time a cuda device is asked for.
"""
import numpy as np

_cupy = None


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

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"


CPU = device("cpu")


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


def device_of(array):
    if type(array) is np.ndarray:
        return CPU
    return device("cuda", array.device.id)


def to_device(array, dev):
    """``array`` on device ``dev`` (no copy when it is already there)."""
    if dev.type == "cpu":
        return array if type(array) is np.ndarray else cupy().asnumpy(array)
    cp = cupy()
    if dev.index >= cp.cuda.runtime.getDeviceCount():
        raise RuntimeError(f"CUDA error: invalid device ordinal (asked for {dev})")
    with cp.cuda.Device(dev.index):
        if type(array) is not np.ndarray and array.device.id == dev.index:
            return array
        return cp.asarray(array)


def xp_for(dev):
    return np if dev.type == "cpu" else cupy()
