"""``nn.functional``'s channel-wise dropouts: ``dropout1d``, ``dropout2d``, ``dropout3d``.

Each zeroes whole channels: one keep-or-drop draw per (sample, channel), broadcast over the
spatial dims, the kept channels scaled by ``1/(1-p)`` so the expected output equals the
input (PyTorch's ``feature_dropout``). The identity when not training or when ``p == 0``;
zeros (with zero gradients) when ``p == 1``. Input ranks, errors and warnings are
PyTorch's: ``dropout1d`` takes (C, L) or (N, C, L) and raises on anything else;
``dropout2d`` wants (N, C, H, W) and reads a 3-D input as (N, C, L), with PyTorch's
warning; ``dropout3d`` takes (C, D, H, W) or (N, C, D, H, W). The mask is a random op, so
under ``tracegrad.compile`` every call draws a new one.
"""
import warnings

from ... import creation
from ...ops.core import op_error


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _warn_unusual_rank(input, spatial):
    """PyTorch's deprecation warning of ``dropout2d``/``dropout3d`` for an input of a rank
    other than ``spatial + 1`` or ``spatial + 2``."""
    lo, hi = spatial + 1, spatial + 2
    if input.ndim not in (lo, hi):
        name = f"dropout{spatial}d"
        warnings.warn(f"{name}: Received a {input.ndim}-D input to {name}, which is deprecated "
                      f"and will result in an error in a future release. To retain the "
                      f"behavior and silence this warning, please use dropout instead. Note "
                      f"that {name} exists to provide channel-wise dropout on inputs with "
                      f"{spatial} spatial dimensions, a channel dimension, and an optional batch "
                      f"dimension (i.e. {lo}D or {hi}D inputs).", stacklevel=3)


def _feature_dropout(input, p, training, inplace, batched=True):
    """Drop channels (dim 1 of a batch, dim 0 of one sample) with probability ``p``."""
    if not training or p == 0.0 or input.numel() == 0:
        return input
    lead = 2 if batched else 1
    if input.ndim < lead:
        raise op_error("feature_dropout", "Feature dropout requires at least 2 dimensions in "
                                          "the input")
    if p == 1.0:        # 1/(1-p) would be inf; every channel is dropped
        scale = creation.zeros((), dtype=input.dtype, device=input.device)
    else:
        shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
        keep = creation.rand(shape, dtype=input.dtype, device=input.device) >= p
        scale = keep.to(input.dtype) * (1.0 / (1.0 - p))
    return input.mul_(scale) if inplace else input * scale


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (C, L) or (N, C, L) input (see the module docstring)."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           f"input. Note that dropout1d exists to provide channel-wise dropout "
                           f"on inputs with 1 spatial dimension, a channel dimension, and an "
                           f"optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, batched=input.ndim == 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) input (see the module docstring)."""
    _check_p(p)
    _warn_unusual_rank(input, 2)
    if input.ndim == 3:     # PyTorch keeps reading (C, H, W) as (N, C, L) for now
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim. This behavior will change "
                      "in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout "
                      "behavior, please switch to using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (C, D, H, W) or (N, C, D, H, W) input."""
    _check_p(p)
    _warn_unusual_rank(input, 3)
    return _feature_dropout(input, p, training, inplace, batched=input.ndim == 5)


def feature_dropout(input, p, train, inplace=False):
    """``torch.feature_dropout``: channel-wise dropout on (N, C, ...)."""
    _check_p(p)
    return _feature_dropout(input, p, train, inplace)
