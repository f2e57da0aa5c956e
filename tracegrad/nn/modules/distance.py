"""``nn.modules.distance``: PyTorch's path to layers defined in ``nn/distance.py``."""
from ..distance import CosineSimilarity, PairwiseDistance  # noqa: F401

__all__ = ["PairwiseDistance", "CosineSimilarity"]
