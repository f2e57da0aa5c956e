"""``nn.modules.module``: PyTorch's path to layers defined in ``nn/module.py``."""
from ..module import Module  # noqa: F401

__all__ = ["Module"]
