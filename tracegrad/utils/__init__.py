"""Utilities: ``tracegrad.utils.hooks``, ``tracegrad.utils.data`` (datasets, DataLoader) and
``tracegrad.utils.checkpoint`` (activation checkpointing)."""
from . import checkpoint, data, hooks  # noqa: F401
