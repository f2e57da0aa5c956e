"""``tracegrad.backends``: PyTorch's ``torch.backends`` flags, with honest values.

tracegrad computes with NumPy on the CPU and with its own CUDA kernels (through CuPy) on a
GPU; it never calls cuDNN, MPS or oneDNN. So ``cudnn.is_available()``,
``mps.is_available()`` and ``mkldnn.is_available()`` are False, while the flags programs
set (``cudnn.benchmark = True``, ``cudnn.deterministic``, ``cuda.matmul.allow_tf32``, ...)
are plain attributes with PyTorch's defaults that can be set and read back, and change
nothing: tracegrad's results do not depend on them. ``cpu.get_cpu_capability()`` names the
vector instructions NumPy dispatches to on this machine.
"""
from . import cpu, cuda, cudnn, mkldnn, mps  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps"]

_matmul_precision = ["highest"]


def get_float32_matmul_precision():
    """``tracegrad.get_float32_matmul_precision()``: the precision last set ("highest")."""
    return _matmul_precision[0]


def set_float32_matmul_precision(precision):
    """``tracegrad.set_float32_matmul_precision``: recorded, with PyTorch's effect on
    ``cuda.matmul.allow_tf32``; tracegrad's float32 matmuls stay float32 at every setting."""
    if precision not in ("highest", "high", "medium"):
        import warnings
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _matmul_precision[0] = precision
    cuda.matmul.allow_tf32 = precision != "highest"
