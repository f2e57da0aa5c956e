"""``nn.modules.batchnorm``: PyTorch's path to layers defined in ``nn/normalization.py``."""
from ..normalization import _BatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from ..syncbatchnorm import SyncBatchNorm  # noqa: F401

from ..lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, _LazyNormBase  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d",
           "LazyBatchNorm2d", "LazyBatchNorm3d"]
