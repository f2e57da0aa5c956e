"""``tracegrad.amp``: PyTorch's automatic mixed precision API, ``autocast`` and
``GradScaler``.

``autocast`` keeps PyTorch's switches (enabled/disabled, the device's dtype, nesting, use
as a decorator) but casts nothing: ops run in their inputs' dtypes, so a program written for
mixed precision runs in float32 with float32's numbers, and a warning says so once. tracegrad
has no bfloat16, so ``bfloat16`` cannot be asked for (``tracegrad.bfloat16`` does not exist).

``GradScaler`` is PyTorch's loss scaler and works in full: it scales the loss, unscales the
gradients, skips steps whose gradients hold inf/NaN and grows or backs off the scale. As in a
CPU build of PyTorch, ``GradScaler("cuda")`` without a GPU warns and disables itself.
"""
from .autocast_mode import autocast, is_autocast_available, is_autocast_enabled
from .grad_scaler import GradScaler, OptState

__all__ = ["autocast", "GradScaler", "OptState", "is_autocast_available",
           "is_autocast_enabled"]
