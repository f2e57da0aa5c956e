"""``nn.modules.flatten``: PyTorch's path to layers defined in ``nn/linear.py``."""
from ..linear import Flatten, Unflatten  # noqa: F401

__all__ = ["Flatten", "Unflatten"]
