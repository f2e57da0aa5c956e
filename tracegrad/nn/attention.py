"""Attention: ``MultiheadAttention``, as PyTorch's, and ``scaled_dot_product_attention``
(defined in ``nn.functional``, named here too as ``torch.nn.attention`` users expect).

``MultiheadAttention`` keeps PyTorch's parameter layout: one ``in_proj_weight``
``(3E, E)`` when query, key and value share ``embed_dim``, else ``q_proj_weight``,
``k_proj_weight``, ``v_proj_weight``; ``in_proj_bias``; the output projection is the
``Linear`` ``out_proj``; ``bias_k``/``bias_v`` with ``add_bias_kv``. Its masks follow
``nn.MultiheadAttention``'s convention, the opposite of sdpa's: True = masked out.

Everything is a composition of tracegrad ops, so it differentiates and compiles as is.
``SDPBackend``/``sdpa_kernel`` are accepted for PyTorch code that picks a kernel; the
composition is PyTorch's math kernel, so the choice changes nothing.
"""
import contextlib
import enum
import math

from .. import creation, dtypes
from ..ops import matmul
from ..ops.shape_ops import cat
from . import functional as F, init
from .functional._attention import (  # noqa: F401 - nn.attention's names, as PyTorch's
    _weights_and_values, scaled_dot_product_attention,
)
from .linear import Linear
from .module import Module
from .parameter import Parameter


def _float_mask(mask, name, dtype):
    """MultiheadAttention's masks as an additive float mask: a bool True becomes -inf."""
    if mask is None:
        return None
    if mask.dtype is dtypes.bool:
        return creation.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            mask, float("-inf"))
    if not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


class MultiheadAttention(Module):
    """``MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
    add_zero_attn=False, kdim=None, vdim=None, batch_first=False)``.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(attn_output, attn_weights)``;
    the weights are ``None`` unless ``need_weights``, averaged over heads unless
    ``average_attn_weights=False``.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kw = dict(device=device, dtype=dtype)
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(creation.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(creation.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(creation.empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(creation.empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(creation.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        # PyTorch's NonDynamicallyQuantizableLinear is a Linear that only quantisation tells
        # apart; a plain Linear has the same parameters and state_dict keys
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(creation.empty(1, 1, embed_dim, **kw))
            self.bias_v = Parameter(creation.empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _project(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None,) * 3 if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise AssertionError(f"query, key and value should be all 2-D (unbatched) or all "
                                 f"3-D (batched), got {query.ndim}-D, {key.ndim}-D and "
                                 f"{value.ndim}-D tensors")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask` "
                               "to create this mask.")
        if batched and self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        # from here: query (L, N, E), key (S, N, kdim), value (S, N, vdim)
        L, N, E = query.shape
        H, hd = self.num_heads, self.head_dim
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but "
                                 f"got {E}")
        q, k, v = self._project(query, key, value)
        dtype = q.dtype
        attn_mask = _float_mask(attn_mask, "attn_mask", dtype)
        key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask", dtype)
        if attn_mask is not None:
            S0 = key.shape[0]
            if attn_mask.ndim == 2:
                if tuple(attn_mask.shape) != (L, S0):
                    raise RuntimeError(f"The shape of the 2D attn_mask is "
                                       f"{list(attn_mask.shape)}, but should be {[L, S0]}.")
                attn_mask = attn_mask.unsqueeze(0)
            elif attn_mask.ndim == 3:
                if tuple(attn_mask.shape) != (N * H, L, S0):
                    raise RuntimeError(f"The shape of the 3D attn_mask is "
                                       f"{list(attn_mask.shape)}, but should be "
                                       f"{[N * H, L, S0]}.")
            else:
                raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
        if self.bias_k is not None:
            k = cat([k, self.bias_k.expand(1, N, E)], 0)
            v = cat([v, self.bias_v.expand(1, N, E)], 0)
            attn_mask = F.pad(attn_mask, (0, 1)) if attn_mask is not None else None
            key_padding_mask = F.pad(key_padding_mask, (0, 1)) \
                if key_padding_mask is not None else None
        # heads: (N * H, L, hd)
        q = q.reshape(L, N * H, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], N * H, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], N * H, hd).transpose(0, 1)
        if self.add_zero_attn:
            k = cat([k, creation.zeros(N * H, 1, hd, dtype=dtype, device=k.device)], 1)
            v = cat([v, creation.zeros(N * H, 1, hd, dtype=dtype, device=v.device)], 1)
            attn_mask = F.pad(attn_mask, (0, 1)) if attn_mask is not None else None
            key_padding_mask = F.pad(key_padding_mask, (0, 1)) \
                if key_padding_mask is not None else None
        S = k.shape[1]
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (N, S):
                raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                                     f"{tuple(key_padding_mask.shape)}")
            kpm = key_padding_mask.reshape(N, 1, 1, S).expand(N, H, 1, S).reshape(N * H, 1, S)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm
        dropout_p = self.dropout if self.training else 0.0
        scores = matmul(q * (1.0 / math.sqrt(hd)), k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        out, weights = _weights_and_values(scores, v, dropout_p)
        out = out.transpose(0, 1).reshape(L * N, E)
        out = self.out_proj(out).reshape(L, N, E)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        elif not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        weights = weights.reshape(N, H, L, S)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights


class SDPBackend(enum.IntEnum):
    """PyTorch's attention kernels, by their numbers. tracegrad has one: the composition
    above, which is PyTorch's ``MATH`` backend."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Choose the kernels ``scaled_dot_product_attention`` may use inside the block.

    A no-op here: every call runs the math composition, whichever backends are named (the
    values are still checked, so a typo fails as it does in PyTorch)."""
    listed = list(backends) if isinstance(backends, (list, tuple, set)) else [backends]
    for b in listed:
        if not isinstance(b, SDPBackend):
            raise TypeError(f"sdpa_kernel: expected backends to be SDPBackend or a list of "
                            f"SDPBackend, got {type(b).__name__}")
    yield
