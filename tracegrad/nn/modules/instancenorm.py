"""``nn.modules.instancenorm``: PyTorch's path to layers defined in ``nn/normalization.py``."""
from ..normalization import (  # noqa: F401
    _InstanceNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
)

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
