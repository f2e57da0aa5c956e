"""``nn.modules.channelshuffle``: PyTorch's path to ``ChannelShuffle``, defined in
``nn/channelshuffle.py``."""
from ..channelshuffle import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]
