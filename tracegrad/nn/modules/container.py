"""``nn.modules.container``: PyTorch's path to layers defined in ``nn/container.py``."""
from ..container import (  # noqa: F401
    Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict, Container,
)

__all__ = ["Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]
