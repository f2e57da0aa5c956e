"""Kept for imports of the old module path: ``tracegrad.utils.data.distributed`` is the home."""
from .data.distributed import DistributedSampler  # noqa: F401

__all__ = ["DistributedSampler"]
