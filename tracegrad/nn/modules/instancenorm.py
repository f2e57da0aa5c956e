"""``nn.modules.instancenorm``: PyTorch's path to layers defined in ``nn/normalization.py``."""
from ..normalization import (  # noqa: F401
    _InstanceNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
)

from ..lazy import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d  # noqa: F401

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]
