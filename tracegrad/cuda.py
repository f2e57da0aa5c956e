"""``tracegrad.cuda``: whether a GPU (through CuPy) is usable."""
from .device import device_count, is_available  # noqa: F401


def synchronize():
    if is_available():
        from .device import cupy
        cupy().cuda.Device().synchronize()
