"""``tracegrad.backends.cudnn``: PyTorch's cuDNN flags. tracegrad never calls cuDNN, so
``is_available()`` is False and ``version()`` None; the flags keep PyTorch's defaults, can
be set (``cudnn.benchmark = True``) and read back, and change no result."""
import contextlib

enabled = True
benchmark = False
benchmark_limit = None      # PyTorch's value where cuDNN is absent
deterministic = False
allow_tf32 = True
fp32_precision = "none"

_FLAGS = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32",
          "fp32_precision")


def is_available():
    return False


def version():
    return None


def is_acceptable(tensor):
    """Whether cuDNN would take ``tensor``: never, here."""
    return False


def set_flags(_enabled=None, _benchmark=None, _benchmark_limit=None, _deterministic=None,
              _allow_tf32=None, _fp32_precision="none"):
    """Set the flags given (None keeps one); returns the old values, in this order."""
    g = globals()
    old = tuple(g[name] for name in _FLAGS)
    for name, value in zip(_FLAGS, (_enabled, _benchmark, _benchmark_limit, _deterministic,
                                    _allow_tf32, _fp32_precision)):
        if value is not None:
            g[name] = value
    return old


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True, fp32_precision="none", depthwise_kernel="auto"):
    """The flags set inside the block, the old ones given back after."""
    old = set_flags(enabled, benchmark, benchmark_limit, deterministic, allow_tf32,
                    fp32_precision)
    try:
        yield
    finally:
        g = globals()
        for name, value in zip(_FLAGS, old):
            g[name] = value
