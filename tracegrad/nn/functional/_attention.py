"""``scaled_dot_product_attention(q, k, v)``: ``softmax(q @ k^T * scale + bias) @ v`` over
the last two dims, as PyTorch's.

A boolean ``attn_mask`` (True = may attend), a float one (added to the scores) and/or
``is_causal`` (both apply, as PyTorch 2.13's kernels do), dropout on the weights and
grouped-query attention (``enable_gqa``). A query row that may attend to nothing gets zero
weights and a zero output, as PyTorch 2.x returns, instead of NaN. Everything is a
composition of tracegrad ops, so it differentiates and compiles as is; ``nn.attention``'s
``MultiheadAttention`` shares ``_weights_and_values``.
"""
import math

from ... import creation, dtypes
from ...ops import matmul, where
from ._base import dropout, softmax


def _causal_mask(L, S, device):
    """``(L, S)`` bool, True on and below the diagonal (PyTorch's ``tril`` of ones)."""
    rows = creation.arange(L, device=device).unsqueeze(-1)
    cols = creation.arange(S, device=device)
    return cols <= rows


def _repeat_heads(x, times):
    """Repeat each head ``times`` times along dim -3 (``repeat_interleave``)."""
    if times == 1:
        return x
    shape = tuple(x.shape)
    x = x.unsqueeze(-3).expand(*shape[:-2], times, *shape[-2:])
    return x.reshape(*shape[:-3], shape[-3] * times, *shape[-2:])


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value``; ``(..., L, E)``, ``(..., S, E)``,
    ``(..., S, Ev)`` give ``(..., L, Ev)``. ``scale`` defaults to ``1 / sqrt(E)``.

    A boolean ``attn_mask`` keeps the positions that are True; a float one is added to the
    scores. ``dropout_p`` drops attention weights (always, as PyTorch's functional form
    does: pass 0.0 when not training). ``enable_gqa`` lets ``key``/``value`` have fewer
    heads (dim -3) than ``query``, each shared by a group of query heads.
    """
    L, S = query.shape[-2], key.shape[-2]
    if key.shape[-1] != query.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: expected query and key to have the "
                           f"same last dimension, got {query.shape[-1]} and {key.shape[-1]}")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hq % hk or value.shape[-3] != hk:
            raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa the number of "
                               f"query heads ({hq}) must be a multiple of the key/value heads "
                               f"({hk}, {value.shape[-3]})")
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hk)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, key.transpose(-2, -1)) * scale
    keep = _causal_mask(L, S, query.device) if is_causal else None
    if attn_mask is not None:
        if attn_mask.dtype is dtypes.bool:     # with is_causal, both apply (PyTorch 2.13's)
            keep = attn_mask if keep is None else keep & attn_mask
        else:
            scores = scores + attn_mask
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return _weights_and_values(scores, value, dropout_p)[0]


def _weights_and_values(scores, value, dropout_p):
    """Softmax over the last dim (rows with no finite score give zero weights), dropout,
    then the weighted sum of ``value``."""
    if scores.ndim == 0:
        raise RuntimeError("attention scores must have at least one dim")
    dead = scores.detach().amax(-1, keepdim=True) == float("-inf")
    weights = softmax(where(dead, 0.0, scores), dim=-1)
    weights = where(dead, 0.0, weights)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return matmul(weights, value), weights
