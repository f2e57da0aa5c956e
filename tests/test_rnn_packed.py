"""``nn.RNN``/``LSTM``/``GRU`` over a ``PackedSequence`` against PyTorch.

Each case builds the PyTorch module, copies its weights into the tracegrad one, packs the
same padded input (which requires grad) in both libraries and compares the packed output
(data, batch sizes, sorted and unsorted indices), the final states, and the gradients of the
same weighted sum of everything with respect to every parameter, the padded input and the
initial state.
"""
import itertools

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn

torch = pytest.importorskip("torch")

TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}
LENGTHS = {True: [5, 3, 2], False: [2, 5, 3]}       # by enforce_sorted


def _pair(name, dtype, *args, **kwargs):
    """The same module in both libraries, in ``dtype``, with PyTorch's weights."""
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype))
    mine = getattr(nn, name)(*args, **kwargs).to(getattr(tg, dtype))
    assert list(mine.state_dict()) == list(ref.state_dict())
    mine.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    return ref, mine


def _states(out):
    """The final states of a layer's result, as a list."""
    return list(out) if isinstance(out, tuple) else [out]


def _x(*shape, seed=0, dtype="float64"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _np(t):
    return t.detach().numpy()


def _compare(ref, mine, dtype, lengths, batch_first, enforce_sorted, hx_arrays):
    """Run both modules on the same packed input (and initial state) and compare outputs,
    states and gradients."""
    tol = TOL[dtype]
    T, B = max(lengths), len(lengths)
    padded = _x(*((B, T, ref.input_size) if batch_first else (T, B, ref.input_size)),
                dtype=dtype)
    t_pad = torch.tensor(padded, requires_grad=True)
    m_pad = tg.tensor(padded, requires_grad=True)
    t_packed = torch.nn.utils.rnn.pack_padded_sequence(t_pad, lengths, batch_first,
                                                       enforce_sorted)
    m_packed = nn.utils.rnn.pack_padded_sequence(m_pad, lengths, batch_first, enforce_sorted)
    t_hx = m_hx = None
    if hx_arrays is not None:
        t_hx = [torch.tensor(a, requires_grad=True) for a in hx_arrays]
        m_hx = [tg.tensor(a, requires_grad=True) for a in hx_arrays]
    wrap = (lambda hs: tuple(hs)) if isinstance(ref, torch.nn.LSTM) else (lambda hs: hs[0])
    t_out, t_h = ref(t_packed, None if t_hx is None else wrap(t_hx))
    m_out, m_h = mine(m_packed, None if m_hx is None else wrap(m_hx))

    assert isinstance(m_out, nn.utils.rnn.PackedSequence)
    assert m_out.batch_sizes.tolist() == t_out.batch_sizes.tolist()
    for ours, theirs in ((m_out.sorted_indices, t_out.sorted_indices),
                         (m_out.unsorted_indices, t_out.unsorted_indices)):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert ours.tolist() == theirs.tolist()
    t_all = [t_out.data] + _states(t_h)
    m_all = [m_out.data] + _states(m_h)
    assert len(t_all) == len(m_all)
    rng = np.random.default_rng(1)
    t_loss = m_loss = 0
    for a, b in zip(t_all, m_all):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(b), _np(a), **tol)
        w = rng.standard_normal(tuple(a.shape)).astype(dtype)
        t_loss = t_loss + (a * torch.tensor(w)).sum()
        m_loss = m_loss + (b * tg.tensor(w)).sum()
    t_loss.backward()
    m_loss.backward()
    np.testing.assert_allclose(m_pad.grad.numpy(), t_pad.grad.numpy(), **tol, err_msg="input")
    for a, b in zip(t_hx or [], m_hx or []):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **tol, err_msg="hx")
    t_params = dict(ref.named_parameters())
    for name, p in mine.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), **tol,
                                   err_msg=name)


def _hx(ref, batch, dtype, seed=2):
    d = ref.num_layers * (2 if ref.bidirectional else 1)
    real = ref.proj_size if getattr(ref, "proj_size", 0) else ref.hidden_size
    h0 = _x(d, batch, real, seed=seed, dtype=dtype)
    if isinstance(ref, torch.nn.LSTM):
        return [h0, _x(d, batch, ref.hidden_size, seed=seed + 1, dtype=dtype)]
    return [h0]


GRID = list(itertools.product(["RNN", "LSTM", "GRU"], [1, 2], [False, True], [False, True],
                              [True, False], [False, True], ["float64", "float32"]))


@pytest.mark.parametrize("name,num_layers,bidirectional,batch_first,enforce_sorted,with_hx,"
                         "dtype", GRID)
def test_packed_layer_matches_torch(name, num_layers, bidirectional, batch_first,
                                    enforce_sorted, with_hx, dtype):
    ref, mine = _pair(name, dtype, 3, 4, num_layers=num_layers, bidirectional=bidirectional)
    lengths = LENGTHS[enforce_sorted]
    hx = _hx(ref, len(lengths), dtype) if with_hx else None
    _compare(ref, mine, dtype, lengths, batch_first, enforce_sorted, hx)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("with_hx", [False, True])
def test_packed_projected_lstm_matches_torch(dtype, with_hx):
    ref, mine = _pair("LSTM", dtype, 3, 5, num_layers=2, bidirectional=True, proj_size=2)
    hx = _hx(ref, 3, dtype) if with_hx else None
    _compare(ref, mine, dtype, [2, 5, 3], True, False, hx)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_layer_batch_first_is_irrelevant_for_packed_input(name):
    ref, mine = _pair(name, "float64", 3, 4, num_layers=2, bidirectional=True,
                      batch_first=True)
    _compare(ref, mine, "float64", [2, 5, 3], False, False, _hx(ref, 3, "float64"))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_packed_nonlinearity_relu_and_no_bias(name):
    kwargs = dict(bias=False) if name != "RNN" else dict(nonlinearity="relu", bias=False)
    ref, mine = _pair(name, "float64", 3, 4, num_layers=2, bidirectional=True, **kwargs)
    _compare(ref, mine, "float64", [1, 4, 4, 2], True, False, None)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_packed_dropout_between_layers(name):
    # p=1 zeros the first layer's output in both libraries, so it compares exactly
    ref, mine = _pair(name, "float64", 3, 4, num_layers=2, bidirectional=True, dropout=1.0)
    _compare(ref, mine, "float64", [2, 5, 3], False, False, None)
    # p=0.5: fresh masks, gradients reach every parameter
    tg.manual_seed(0)
    layer = getattr(nn, name)(3, 4, num_layers=2, dropout=0.5)
    packed = nn.utils.rnn.pack_sequence([tg.randn(n, 3) for n in (2, 5, 3)], False)
    a, b = layer(packed)[0].data, layer(packed)[0].data
    assert not np.allclose(_np(a), _np(b))
    (a.sum() + b.sum()).backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all()
               for p in layer.parameters())
    layer.eval()
    np.testing.assert_array_equal(_np(layer(packed)[0].data), _np(layer(packed)[0].data))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_pad_packed_output_matches_torch(name, batch_first):
    ref, mine = _pair(name, "float64", 3, 4, bidirectional=True)
    seqs = [_x(n, 3, seed=n) for n in (2, 5, 3)]
    t_out = ref(torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], False))[0]
    m_out = mine(nn.utils.rnn.pack_sequence([tg.tensor(s) for s in seqs], False))[0]
    t_pad, t_len = torch.nn.utils.rnn.pad_packed_sequence(t_out, batch_first)
    m_pad, m_len = nn.utils.rnn.pad_packed_sequence(m_out, batch_first)
    assert m_len.tolist() == t_len.tolist() == [2, 5, 3]
    assert tuple(m_pad.shape) == tuple(t_pad.shape)
    np.testing.assert_allclose(_np(m_pad), _np(t_pad), **TOL["float64"])
    padded = _np(m_pad) if batch_first else _np(m_pad).transpose(1, 0, 2)
    for b, n in enumerate([2, 5, 3]):
        assert (padded[b, n:] == 0).all()


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_packed_double_backward_matches_torch(name):
    ref, mine = _pair(name, "float64", 3, 4, num_layers=2, bidirectional=True)
    seqs = [_x(n, 3, seed=n) for n in (2, 5, 3)]
    t_seqs = [torch.tensor(s, requires_grad=True) for s in seqs]
    m_seqs = [tg.tensor(s, requires_grad=True) for s in seqs]
    t_out, t_h = ref(torch.nn.utils.rnn.pack_sequence(t_seqs, False))
    m_out, m_h = mine(nn.utils.rnn.pack_sequence(m_seqs, False))
    t_loss = (t_out.data ** 2).sum() + (_states(t_h)[0] ** 3).sum()
    m_loss = (m_out.data ** 2).sum() + (_states(m_h)[0] ** 3).sum()
    t_params, m_params = list(ref.parameters()), list(mine.parameters())
    t_g = torch.autograd.grad(t_loss, t_params, create_graph=True)
    m_g = tg.autograd.grad(m_loss, m_params, create_graph=True)
    t_gg = sum((g ** 2).sum() for g in t_g)
    m_gg = sum((g ** 2).sum() for g in m_g)
    t_gg.backward()
    m_gg.backward()
    np.testing.assert_allclose(_np(m_gg), _np(t_gg), rtol=1e-10)
    for a, b in zip(t_seqs, m_seqs):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **TOL["float64"])
    for a, b in zip(t_params, m_params):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **TOL["float64"])


def test_packed_tutorial_training_loop_matches_torch():
    """Embedding -> pack -> LSTM -> pad -> Linear -> CrossEntropyLoss -> SGD, three steps."""
    vocab, emb, hidden, classes = 11, 5, 6, 4
    torch.manual_seed(0)

    def build(lib):
        return (lib.nn.Embedding(vocab, emb, padding_idx=0),
                lib.nn.LSTM(emb, hidden, batch_first=True, bidirectional=True),
                lib.nn.Linear(2 * hidden, classes))

    t_mods = build(torch)
    m_mods = build(tg)
    for t_mod, m_mod in zip(t_mods, m_mods):
        m_mod.load_state_dict({k: tg.tensor(v.detach().numpy())
                               for k, v in t_mod.state_dict().items()})
    rng = np.random.default_rng(0)
    lengths = [3, 6, 2, 5]
    tokens = np.zeros((4, 6), np.int64)
    targets = np.full((4, 6), -100, np.int64)
    for b, n in enumerate(lengths):
        tokens[b, :n] = rng.integers(1, vocab, n)
        targets[b, :n] = rng.integers(0, classes, n)

    def run(lib, mods):
        e, rnn, head = mods
        R = lib.nn.utils.rnn
        params = [p for m in mods for p in m.parameters()]
        opt = lib.optim.SGD(params, lr=0.5)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            packed = R.pack_padded_sequence(e(lib.tensor(tokens)), lib.tensor(lengths),
                                            batch_first=True, enforce_sorted=False)
            out, _ = rnn(packed)
            padded, _ = R.pad_packed_sequence(out, batch_first=True)
            logits = head(padded)
            loss = lib.nn.CrossEntropyLoss()(logits.reshape(-1, classes),
                                             lib.tensor(targets).reshape(-1))
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        return losses, [_np(p) for p in params]

    t_losses, t_params = run(torch, t_mods)
    m_losses, m_params = run(tg, m_mods)
    np.testing.assert_allclose(m_losses, t_losses, **TOL["float32"])
    for a, b in zip(t_params, m_params):
        np.testing.assert_allclose(b, a, **TOL["float32"])


def test_packed_input_errors():
    lstm = nn.LSTM(3, 4)
    packed = nn.utils.rnn.pack_sequence([tg.randn(n, 3) for n in (2, 5, 3)], False)
    with pytest.raises(RuntimeError, match="hidden"):
        lstm(packed, (tg.randn(1, 2, 4), tg.randn(1, 2, 4)))
    with pytest.raises(RuntimeError, match="LSTM expects hx"):
        lstm(packed, tg.randn(1, 3, 4))
    with pytest.raises(RuntimeError, match="input_size"):
        nn.GRU(2, 4)(packed)
    out, (h, c) = lstm(packed)
    assert tuple(out.data.shape) == (10, 4) and tuple(h.shape) == tuple(c.shape) == (1, 3, 4)
