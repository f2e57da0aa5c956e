"""``ChannelShuffle``: ShuffleNet's channel permutation as a layer (``F.channel_shuffle``)."""
from . import functional as F
from .module import Module


class ChannelShuffle(Module):
    """Splits the channels into ``groups`` and interleaves them."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
