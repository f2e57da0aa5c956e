"""PyTorch's ``torch.masked``: reductions and normalizations over the elements a mask keeps."""
__all__ = []
