"""``nn.modules.upsampling``: PyTorch's path to layers defined in ``nn/upsampling.py``."""
from ..upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d  # noqa: F401

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]
