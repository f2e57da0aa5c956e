"""``nn.modules.lazy``: PyTorch's path to ``LazyModuleMixin`` (defined in ``nn/lazy.py``)."""
from ..lazy import LazyModuleMixin  # noqa: F401

__all__ = ["LazyModuleMixin"]
