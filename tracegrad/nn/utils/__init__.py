"""``nn.utils``: gradient clipping, parameter/vector conversion, the pre-hook forms of
``weight_norm`` and ``spectral_norm``, as ``torch.nn.utils``, and ``rnn``'s padding and
packing (no ``parametrize`` or ``parametrizations``)."""
from . import rnn  # noqa: F401 - nn.utils.rnn, as PyTorch's path
from .clip_grad import (
    clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm

__all__ = [
    "clip_grad_norm", "clip_grad_norm_", "clip_grads_with_norm_", "clip_grad_value_",
    "get_total_norm", "parameters_to_vector", "vector_to_parameters", "weight_norm",
    "remove_weight_norm", "spectral_norm", "remove_spectral_norm",
]
