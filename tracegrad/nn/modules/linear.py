"""``nn.modules.linear``: PyTorch's path to layers defined in ``nn/linear.py``."""
from ..linear import Bilinear, Identity, Linear  # noqa: F401

__all__ = ["Identity", "Linear", "Bilinear"]
