"""``autocast``: PyTorch's region switch for mixed precision, which here casts nothing.

Why no casting: tracegrad's kernels are NumPy's (and CuPy's), where float16 matmuls are
slower than float32 ones on a CPU and no bfloat16 exists, so the switch would cost speed and
change numbers without saving anything. The state (enabled, dtype) is kept per device type so
``is_autocast_enabled``/``get_autocast_dtype`` answer as PyTorch's do.
"""
import functools
import warnings

from .. import dtypes

_state = {}         # device type -> (enabled, dtype) inside an autocast region
_warned = []


def is_autocast_available(device_type):
    return device_type in ("cpu", "cuda")


def is_autocast_enabled(device_type="cuda"):
    return _state.get(device_type, (False, None))[0]


class autocast:
    """``with autocast("cuda"):`` or ``@autocast("cpu")``: PyTorch's signature and nesting;
    ops inside run in their inputs' dtypes (see the module docstring)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}'; tracegrad supports 'cpu' and 'cuda'")
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
            if dtype not in (dtypes.float16, dtypes.float32):
                raise RuntimeError(f"autocast: unsupported dtype {dtype}; in autocast only "
                                   f"float16 (and float32, which changes nothing) can be named "
                                   f"(tracegrad has no bfloat16)")
        if enabled and device_type == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("CUDA is not available. Disabling autocast.", stacklevel=2)
                enabled = False
        self.device, self.fast_dtype, self._enabled = device_type, dtype, bool(enabled)
        self._cache_enabled = True if cache_enabled is None else cache_enabled

    def __enter__(self):
        self._prev = _state.get(self.device)
        prev_dtype = self._prev[1] if self._prev else None
        _state[self.device] = (self._enabled, self.fast_dtype or prev_dtype)
        if self._enabled and not _warned:
            _warned.append(True)
            warnings.warn("tracegrad.autocast casts nothing: ops run in their inputs' dtypes "
                          "(float32 stays float32)", stacklevel=2)
        return self

    def __exit__(self, *exc):
        if self._prev is None:
            _state.pop(self.device, None)
        else:
            _state[self.device] = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def in_region(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return in_region
