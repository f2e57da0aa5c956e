"""``nn.modules.normalization``: PyTorch's path to layers defined in ``nn/normalization.py``."""
from ..normalization import LayerNorm, GroupNorm, LocalResponseNorm, RMSNorm  # noqa: F401

__all__ = ["LayerNorm", "GroupNorm", "LocalResponseNorm", "RMSNorm"]
