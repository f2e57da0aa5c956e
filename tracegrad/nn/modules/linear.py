"""``nn.modules.linear``: PyTorch's path to layers defined in ``nn/linear.py``."""
from ..lazy import LazyLinear  # noqa: F401
from ..linear import Bilinear, Identity, Linear  # noqa: F401

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear"]
