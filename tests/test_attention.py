"""``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` and the Transformer layers
against PyTorch: the same float64 inputs and weights (copied through ``state_dict``) give
the same outputs and the same gradients for the inputs and every parameter."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.nn import functional as F

from tolerances import close

# float64 through at most two Transformer layers (model width 8, feed-forward 16, sequences
# of 5): per layer the attention's dot products, softmax and weighted sums, two layer norms
# and the feed-forward are about 64 dependent roundings, and the backward as many again, so
# 256 in all; PyTorch's exp and its matmuls' summation order differ from NumPy's. Values and
# gradients are of order one to ten.
TOL = close("float64", n_ops=256, scale=16)


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _grads_match(t_outs, m_outs, t_leaves, m_leaves, tol=TOL):
    """Compare outputs, then the gradients of one weighted sum of them."""
    torch = _torch()
    rng = np.random.default_rng(7)
    t_loss = m_loss = 0
    for a, b in zip(t_outs, m_outs):
        if a is None:
            assert b is None
            continue
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **tol)
        w = rng.standard_normal(tuple(a.shape))
        t_loss = t_loss + (a * torch.tensor(w)).sum()
        m_loss = m_loss + (b * tg.tensor(w)).sum()
    t_loss.backward()
    m_loss.backward()
    for name, a, b in zip(range(len(t_leaves)), t_leaves, m_leaves):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **tol, err_msg=str(name))


def _leaves(*arrays):
    torch = _torch()
    return ([torch.tensor(a, requires_grad=True) for a in arrays],
            [tg.tensor(a, requires_grad=True) for a in arrays])


# scaled_dot_product_attention ------------------------------------------------------------


def _bool_mask(L, S, seed=3):
    m = np.random.default_rng(seed).random((L, S)) > 0.4
    m[:, 0] = True          # every query may attend somewhere
    return m


SDPA = {
    "plain": lambda M, L, S: {},
    "causal": lambda M, L, S: dict(is_causal=True),
    "bool_mask": lambda M, L, S: dict(attn_mask=M.tensor(_bool_mask(L, S))),
    "float_mask": lambda M, L, S: dict(attn_mask=M.tensor(_x(L, S, seed=4))),
    "float_mask_inf": lambda M, L, S: dict(attn_mask=M.tensor(
        np.where(_bool_mask(L, S), 0.0, -np.inf))),
    "scale": lambda M, L, S: dict(scale=0.3),
    "broadcast_mask": lambda M, L, S: dict(attn_mask=M.tensor(
        np.stack([_bool_mask(L, S, seed) for seed in (1, 2)])[:, None])),
}


@pytest.mark.parametrize("case", sorted(SDPA))
def test_sdpa_matches_torch(case):
    torch = _torch()
    L, S = (5, 5) if "causal" in case else (4, 6)
    t_in, m_in = _leaves(_x(2, 3, L, 8), _x(2, 3, S, 8, seed=1), _x(2, 3, S, 7, seed=2))
    t_out = torch.nn.functional.scaled_dot_product_attention(*t_in, **SDPA[case](torch, L, S))
    m_out = F.scaled_dot_product_attention(*m_in, **SDPA[case](tg, L, S))
    _grads_match([t_out], [m_out], t_in, m_in)


@pytest.mark.parametrize("mask", ["bool", "float"])
def test_sdpa_causal_and_a_mask_both_apply_as_torch(mask):
    # PyTorch 2.13's kernels apply both (its math path, taken when v's head dim differs from
    # q's, still refuses): here both apply whatever the head dims
    torch = _torch()
    t_in, m_in = _leaves(_x(2, 3, 5, 8), _x(2, 3, 5, 8, seed=1), _x(2, 3, 5, 8, seed=2))
    m = _bool_mask(5, 5) if mask == "bool" else _x(5, 5, seed=4)
    t_out = torch.nn.functional.scaled_dot_product_attention(
        *t_in, attn_mask=torch.tensor(m), is_causal=True)
    m_out = F.scaled_dot_product_attention(*m_in, attn_mask=tg.tensor(m), is_causal=True)
    _grads_match([t_out], [m_out], t_in, m_in)


def test_sdpa_gqa_matches_torch():
    torch = _torch()
    t_in, m_in = _leaves(_x(2, 4, 3, 8), _x(2, 2, 5, 8, seed=1), _x(2, 2, 5, 8, seed=2))
    t_out = torch.nn.functional.scaled_dot_product_attention(*t_in, enable_gqa=True)
    m_out = F.scaled_dot_product_attention(*m_in, enable_gqa=True)
    _grads_match([t_out], [m_out], t_in, m_in)


def test_sdpa_fully_masked_row_is_zero_like_torch():
    torch = _torch()
    mask = _bool_mask(4, 6)
    mask[2] = False
    t_in, m_in = _leaves(_x(1, 4, 8), _x(1, 6, 8, seed=1), _x(1, 6, 8, seed=2))
    t_out = torch.nn.functional.scaled_dot_product_attention(*t_in, attn_mask=torch.tensor(mask))
    m_out = F.scaled_dot_product_attention(*m_in, attn_mask=tg.tensor(mask))
    assert np.all(m_out.detach().numpy()[0, 2] == 0)
    _grads_match([t_out], [m_out], t_in, m_in)


def test_sdpa_dropout_keeps_the_mean_and_draws_fresh_masks():
    tg.manual_seed(0)
    q, k, v = tg.randn(1, 1, 64, 4), tg.randn(1, 1, 64, 4), tg.ones(1, 1, 64, 4)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not np.allclose(a.numpy(), b.numpy())
    # rows of weights sum to 1 before dropout, so with v = 1 the mean output stays near 1
    assert abs(a.numpy().mean() - 1.0) < 0.15


# MultiheadAttention ----------------------------------------------------------------------


def _pair(name, *args, **kwargs):
    torch = _torch()
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(*args, **kwargs).double()
    mine = getattr(nn, name)(*args, **kwargs).double()
    assert list(mine.state_dict()) == list(ref.state_dict())
    for (k, a), (_, b) in zip(mine.state_dict().items(), ref.state_dict().items()):
        assert tuple(a.shape) == tuple(b.shape), k
    mine.load_state_dict({k: tg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    return torch, ref, mine


def _param_leaves(ref, mine):
    t = dict(ref.named_parameters())
    names = [n for n, _ in mine.named_parameters()]
    return [t[n] for n in names], [dict(mine.named_parameters())[n] for n in names]


MHA = {
    "default": (dict(), dict()),
    "batch_first": (dict(batch_first=True), dict()),
    "no_weights": (dict(), dict(need_weights=False)),
    "per_head_weights": (dict(), dict(average_attn_weights=False)),
    "kdim_vdim": (dict(kdim=5, vdim=3), dict()),
    "no_bias": (dict(bias=False), dict()),
    "bias_kv_zero_attn": (dict(add_bias_kv=True, add_zero_attn=True), dict()),
    "key_padding_mask": (dict(), dict(key_padding_mask="bool")),
    "float_key_padding_mask": (dict(batch_first=True), dict(key_padding_mask="float")),
    "attn_mask_bool": (dict(), dict(attn_mask="bool")),
    "attn_mask_float_3d": (dict(), dict(attn_mask="float3d")),
    "both_masks_no_weights": (dict(add_bias_kv=True), dict(attn_mask="bool",
                                                           key_padding_mask="bool",
                                                           need_weights=False)),
    "causal_hint": (dict(), dict(attn_mask="causal", is_causal=True)),
}


def _mha_kwargs(M, kw, N, L, S, H):
    kw = dict(kw)
    if kw.get("key_padding_mask") == "bool":
        m = np.zeros((N, S), bool)
        m[0, -2:] = True
        kw["key_padding_mask"] = M.tensor(m)
    elif kw.get("key_padding_mask") == "float":
        kw["key_padding_mask"] = M.tensor(_x(N, S, seed=5))
    if kw.get("attn_mask") == "bool":
        kw["attn_mask"] = M.tensor(~_bool_mask(L, S))     # True = masked out in MHA
    elif kw.get("attn_mask") == "float3d":
        kw["attn_mask"] = M.tensor(_x(N * H, L, S, seed=6))
    elif kw.get("attn_mask") == "causal":
        kw["attn_mask"] = M.tensor(np.triu(np.ones((L, S), bool), 1))
    return kw


@pytest.mark.parametrize("case", sorted(MHA))
def test_multihead_attention_matches_torch(case):
    ctor, call = MHA[case]
    E, H, N, L, S = 8, 2, 3, 4, 4 if "causal" in case else 5
    torch, ref, mine = _pair("MultiheadAttention", E, H, **ctor)
    kdim, vdim = ctor.get("kdim", E), ctor.get("vdim", E)
    bf = ctor.get("batch_first", False)
    shapes = [(N, L, E), (N, S, kdim), (N, S, vdim)] if bf else \
        [(L, N, E), (S, N, kdim), (S, N, vdim)]
    t_in, m_in = _leaves(*[_x(*s, seed=i) for i, s in enumerate(shapes)])
    t_out = ref(*t_in, **_mha_kwargs(torch, call, N, L, S, H))
    m_out = mine(*m_in, **_mha_kwargs(tg, call, N, L, S, H))
    tp, mp = _param_leaves(ref, mine)
    _grads_match(list(t_out), list(m_out), t_in + tp, m_in + mp)


def test_multihead_attention_unbatched_and_self_attention():
    torch, ref, mine = _pair("MultiheadAttention", 6, 3)
    t_in, m_in = _leaves(_x(4, 6))
    t_out = ref(t_in[0], t_in[0], t_in[0], key_padding_mask=torch.tensor([0, 0, 1, 0]).bool())
    m_out = mine(m_in[0], m_in[0], m_in[0], key_padding_mask=tg.tensor([0, 0, 1, 0]).bool())
    tp, mp = _param_leaves(ref, mine)
    _grads_match(list(t_out), list(m_out), t_in + tp, m_in + mp)


def test_multihead_attention_state_dict_keys():
    torch = _torch()
    for kwargs in [dict(), dict(kdim=3, vdim=5), dict(add_bias_kv=True, bias=False)]:
        ref, mine = torch.nn.MultiheadAttention(8, 2, **kwargs), nn.MultiheadAttention(8, 2,
                                                                                       **kwargs)
        assert [(k, tuple(v.shape)) for k, v in mine.state_dict().items()] == \
            [(k, tuple(v.shape)) for k, v in ref.state_dict().items()]


# Transformer layers ----------------------------------------------------------------------


LAYERS = {
    "encoder_post_norm": ("TransformerEncoderLayer", dict()),
    "encoder_pre_norm_gelu_batch_first": ("TransformerEncoderLayer",
                                          dict(norm_first=True, activation="gelu",
                                               batch_first=True)),
    "decoder_post_norm": ("TransformerDecoderLayer", dict()),
    "decoder_pre_norm_batch_first": ("TransformerDecoderLayer",
                                     dict(norm_first=True, batch_first=True)),
}


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train_p0"])
@pytest.mark.parametrize("case", sorted(LAYERS))
def test_transformer_layer_matches_torch(case, train):
    name, kwargs = LAYERS[case]
    d, H, N, L, S = 8, 2, 2, 4, 5
    torch, ref, mine = _pair(name, d, H, dim_feedforward=16, dropout=0.0 if train else 0.1,
                             **kwargs)
    ref.train(train)
    mine.train(train)
    bf = kwargs.get("batch_first", False)
    shape = (lambda n: (N, n, d)) if bf else (lambda n: (n, N, d))
    causal = np.triu(np.ones((L, L), bool), 1)
    if name == "TransformerEncoderLayer":
        t_in, m_in = _leaves(_x(*shape(L)))
        kpm = np.zeros((N, L), bool)
        kpm[1, -1] = True
        t_out = ref(t_in[0], src_mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(kpm))
        m_out = mine(m_in[0], src_mask=tg.tensor(causal), src_key_padding_mask=tg.tensor(kpm))
    else:
        t_in, m_in = _leaves(_x(*shape(L)), _x(*shape(S), seed=1))
        kpm = np.zeros((N, S), bool)
        kpm[0, 0] = True
        t_out = ref(*t_in, tgt_mask=torch.tensor(causal),
                    memory_key_padding_mask=torch.tensor(kpm))
        m_out = mine(*m_in, tgt_mask=tg.tensor(causal), memory_key_padding_mask=tg.tensor(kpm))
    if not train:
        keep = np.ones(m_out.shape[:2], bool)
        if name == "TransformerEncoderLayer":
            # PyTorch's eval fast path writes zeros at padded positions; compare the others
            keep = ~kpm if bf else ~kpm.T
        np.testing.assert_allclose(m_out.detach().numpy()[keep], t_out.detach().numpy()[keep],
                                   **TOL)
        return
    tp, mp = _param_leaves(ref, mine)
    _grads_match([t_out], [m_out], t_in + tp, m_in + mp)


def test_transformer_encoder_stack_matches_torch_and_compiles():
    torch = _torch()
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    ref = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(8),
                                      enable_nested_tensor=False).double()
    mine = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                            batch_first=True), 2,
                                 norm=nn.LayerNorm(8)).double()
    assert list(mine.state_dict()) == list(ref.state_dict())
    mine.load_state_dict({k: tg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    mask = np.triu(np.ones((5, 5), bool), 1)
    t_in, m_in = _leaves(_x(3, 5, 8))
    t_out = ref(t_in[0], mask=torch.tensor(mask))
    m_out = mine(m_in[0], mask=tg.tensor(mask))
    tp, mp = _param_leaves(ref, mine)
    _grads_match([t_out], [m_out], t_in + tp, m_in + mp)

    compiled = tg.compile(mine)
    x = tg.tensor(_x(3, 5, 8), requires_grad=True)
    out = compiled(x, mask=tg.tensor(mask))
    (out * out).sum().backward()
    eager_x = tg.tensor(_x(3, 5, 8), requires_grad=True)
    eager = mine(eager_x, mask=tg.tensor(mask))
    (eager * eager).sum().backward()
    # the compiled program may fuse and reorder the same sums: the bound against PyTorch
    np.testing.assert_allclose(out.detach().numpy(), eager.detach().numpy(), **TOL)
    np.testing.assert_allclose(x.grad.numpy(), eager_x.grad.numpy(), **TOL)


def test_transformer_state_dict_keys_and_mask():
    torch = _torch()
    ref = torch.nn.Transformer(8, 2, 1, 1, 16, batch_first=True)
    mine = nn.Transformer(8, 2, 1, 1, 16, batch_first=True)
    assert [(k, tuple(v.shape)) for k, v in mine.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in ref.state_dict().items()]
    # exact: zeros and -inf, built, not computed
    np.testing.assert_array_equal(nn.Transformer.generate_square_subsequent_mask(4).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    ref_layer = torch.nn.TransformerEncoderLayer(8, 2, activation=torch.nn.GELU())
    mine_layer = nn.TransformerEncoderLayer(8, 2, activation=nn.GELU())
    assert list(mine_layer.state_dict()) == list(ref_layer.state_dict())
    assert [n for n, _ in mine_layer.named_children()] == \
        [n for n, _ in ref_layer.named_children()]


def test_transformer_encoder_layer_dropout_trains_randomly():
    tg.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = tg.randn(4, 2, 8)
    assert not np.allclose(layer(x).detach().numpy(), layer(x).detach().numpy())
    layer.eval()
    # bit for bit: without dropout, the same code on the same input rounds the same way
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
