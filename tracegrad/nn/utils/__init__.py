"""``nn.utils``: gradient clipping and parameter/vector conversion, as ``torch.nn.utils``.

Only the functions that work on plain tensors are here (no ``weight_norm``,
``spectral_norm``, ``parametrize``), plus ``rnn``'s padding and packing.
"""
from . import rnn  # noqa: F401 - nn.utils.rnn, as PyTorch's path
from .clip_grad import (
    clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = [
    "clip_grad_norm", "clip_grad_norm_", "clip_grads_with_norm_", "clip_grad_value_",
    "get_total_norm", "parameters_to_vector", "vector_to_parameters",
]
