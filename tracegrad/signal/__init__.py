"""PyTorch's ``torch.signal``: window functions (``signal.windows``)."""
from . import windows  # noqa: F401
