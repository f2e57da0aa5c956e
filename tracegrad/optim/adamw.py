"""``optim.adamw``: PyTorch's path to ``AdamW`` (defined with ``Adam`` in ``adam.py``)."""
from .adam import AdamW  # noqa: F401

__all__ = ["AdamW"]
