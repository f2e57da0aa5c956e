"""Utilities (``tracegrad.utils.hooks``; data loading lands with nn/optim)."""
from . import hooks  # noqa: F401
