"""``nn.modules.loss``: PyTorch's path to layers defined in ``nn/loss.py``."""
from ..loss import (  # noqa: F401
    _Loss, _WeightedLoss, L1Loss, MSELoss, NLLLoss, CrossEntropyLoss, BCELoss,
    BCEWithLogitsLoss, SmoothL1Loss, HuberLoss, KLDivLoss, MarginRankingLoss,
    HingeEmbeddingLoss, CosineEmbeddingLoss, SoftMarginLoss, MultiLabelSoftMarginLoss,
    MultiLabelMarginLoss, MultiMarginLoss, GaussianNLLLoss, PoissonNLLLoss, TripletMarginLoss,
    TripletMarginWithDistanceLoss, NLLLoss2d, CTCLoss,
)

__all__ = [
    "L1Loss", "MSELoss", "NLLLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss",
    "SmoothL1Loss", "HuberLoss", "KLDivLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
    "CosineEmbeddingLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss",
    "MultiMarginLoss", "GaussianNLLLoss", "PoissonNLLLoss", "TripletMarginLoss",
    "TripletMarginWithDistanceLoss", "NLLLoss2d", "CTCLoss",
]
