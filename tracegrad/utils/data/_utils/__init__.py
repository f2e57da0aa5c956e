"""Helpers of the ``DataLoader`` under PyTorch's paths: ``collate`` and ``worker``."""
from . import collate, worker  # noqa: F401
