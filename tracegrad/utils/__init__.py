"""Utilities: ``tracegrad.utils.hooks`` and ``tracegrad.utils.data`` (datasets, DataLoader)."""
from . import data, hooks  # noqa: F401
