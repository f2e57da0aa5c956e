"""``nn.modules.dropout``: PyTorch's path to layers defined in ``nn/dropout.py``."""
from ..dropout import _DropoutNd, Dropout, Dropout1d, Dropout2d, Dropout3d  # noqa: F401
from ..dropout import AlphaDropout, FeatureAlphaDropout  # noqa: F401

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]
