"""PyTorch's ``torch.signal.windows``."""
__all__ = []
