"""``nn.modules.pooling``: PyTorch's path to layers defined in ``nn/pooling.py``."""
from ..pooling import (  # noqa: F401
    _MaxPoolNd, _AvgPoolNd, MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
    AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AdaptiveAvgPool1d,
    AdaptiveAvgPool2d, AdaptiveAvgPool3d, _MaxUnpoolNd, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d,
    _LPPoolNd, LPPool1d, LPPool2d, LPPool3d, FractionalMaxPool2d, FractionalMaxPool3d,
)

__all__ = [
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "LPPool1d", "LPPool2d", "LPPool3d", "FractionalMaxPool2d", "FractionalMaxPool3d",
]
