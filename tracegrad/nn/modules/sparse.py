"""``nn.modules.sparse``: PyTorch's path to layers defined in ``nn/sparse.py``."""
from ..sparse import Embedding, EmbeddingBag  # noqa: F401

__all__ = ["Embedding", "EmbeddingBag"]
