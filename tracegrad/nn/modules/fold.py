"""``nn.modules.fold``: PyTorch's path to layers defined in ``nn/fold.py``."""
from ..fold import Fold, Unfold  # noqa: F401

__all__ = ["Fold", "Unfold"]
