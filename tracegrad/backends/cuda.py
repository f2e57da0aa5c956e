"""``tracegrad.backends.cuda``: PyTorch's CUDA math flags. ``is_built()`` says whether
tracegrad's CUDA support (CuPy) is installed; the flags keep PyTorch's defaults, can be set
and read back, and change no result: tracegrad's kernels compute in the tensors' dtype
without TF32 or reduced-precision reductions, and its attention has one (math) kernel."""
import contextlib
import importlib.util


def is_built():
    return importlib.util.find_spec("cupy") is not None


class _Matmul:
    """``backends.cuda.matmul``: flags that programs set, kept as plain attributes."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "none"


matmul = _Matmul()
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def flash_sdp_enabled():
    return _sdp["flash"]


def enable_flash_sdp(enabled):
    _sdp["flash"] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled):
    _sdp["mem_efficient"] = bool(enabled)


def math_sdp_enabled():
    return _sdp["math"]


def enable_math_sdp(enabled):
    _sdp["math"] = bool(enabled)


def cudnn_sdp_enabled():
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled):
    _sdp["cudnn"] = bool(enabled)


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """The attention-kernel flags set inside the block (PyTorch's deprecated spelling of
    ``nn.attention.sdpa_kernel``)."""
    old = dict(_sdp)
    _sdp.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient,
                cudnn=enable_cudnn)
    try:
        yield
    finally:
        _sdp.update(old)
