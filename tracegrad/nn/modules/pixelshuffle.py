"""``nn.modules.pixelshuffle``: PyTorch's path to layers defined in ``nn/pixelshuffle.py``."""
from ..pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
