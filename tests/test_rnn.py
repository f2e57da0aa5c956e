"""``nn.RNN``/``LSTM``/``GRU`` and their cells against PyTorch.

Each case builds the PyTorch module, copies its ``state_dict`` into the tracegrad one, runs
both on the same float64 input (and initial state) and compares outputs, final states and
the gradients of a weighted sum with respect to the input, the initial state and every
parameter. A compiled LSTM step over a fixed sequence length is checked against eager.
"""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn

from tolerances import close


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _pair(name, *args, **kwargs):
    """The same module in both libraries, float64, with PyTorch's weights."""
    torch = _torch()
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(*args, **kwargs).double()
    mine = getattr(nn, name)(*args, **kwargs).double()
    assert list(mine.state_dict()) == list(ref.state_dict())
    mine.load_state_dict({k: tg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    return torch, ref, mine


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


# float64 recurrences of at most 6 steps through at most 2 layers: a step is the gates'
# matmuls (input 3-8 plus hidden 4-5 terms), sigmoids, tanh and products, about 32 roundings,
# and backpropagation through time retraces them: 2 x 12 x 32 in all. The gates squash and the
# default weights are small, so a step does not amplify a difference it carries.
TOL = close("float64", n_ops=2 * 12 * 32, scale=8)


def _check(torch, ref, mine, inputs, tol=TOL):
    """Forward both modules on ``inputs`` (numpy arrays, or tuples of them, or None), compare
    every output, then the gradients of the same weighted sum."""
    def convert(lib_tensor, x):
        if x is None:
            return None
        if isinstance(x, tuple):
            return tuple(convert(lib_tensor, v) for v in x)
        return lib_tensor(x)
    t_in = convert(lambda a: torch.tensor(a, requires_grad=True), inputs)
    m_in = convert(lambda a: tg.tensor(a, requires_grad=True), inputs)
    t_out, m_out = _flat(ref(*t_in)), _flat(mine(*m_in))
    assert len(t_out) == len(m_out)
    rng = np.random.default_rng(1)
    t_loss, m_loss = 0, 0
    for a, b in zip(t_out, m_out):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **tol)
        w = rng.standard_normal(tuple(a.shape))
        t_loss = t_loss + (a * torch.tensor(w)).sum()
        m_loss = m_loss + (b * tg.tensor(w)).sum()
    t_loss.backward()
    m_loss.backward()
    for a, b in zip(_flat(t_in), _flat(m_in)):
        if a is not None:
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **tol)
    t_params = dict(ref.named_parameters())
    for name, p in mine.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), **tol,
                                   err_msg=name)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


CASES = {
    "rnn_tanh": ("RNN", (3, 4), {}),
    "rnn_relu_2layer": ("RNN", (3, 4), dict(num_layers=2, nonlinearity="relu")),
    "rnn_bidir_batch_first": ("RNN", (3, 4), dict(bidirectional=True, batch_first=True)),
    "lstm": ("LSTM", (3, 4), {}),
    "lstm_2layer_bidir": ("LSTM", (3, 4), dict(num_layers=2, bidirectional=True)),
    "lstm_batch_first_nobias": ("LSTM", (3, 5), dict(batch_first=True, bias=False)),
    "lstm_proj": ("LSTM", (3, 5), dict(proj_size=2, num_layers=2, bidirectional=True)),
    "gru": ("GRU", (3, 4), {}),
    "gru_2layer_bidir_batch_first": ("GRU", (3, 4), dict(num_layers=2, bidirectional=True,
                                                         batch_first=True)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent_layer_matches_torch(case):
    name, args, kwargs = CASES[case]
    torch, ref, mine = _pair(name, *args, **kwargs)
    L, N = 5, 2
    shape = (N, L, args[0]) if kwargs.get("batch_first") else (L, N, args[0])
    _check(torch, ref, mine, (_x(*shape),))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_initial_state_matches_torch(name):
    torch, ref, mine = _pair(name, 3, 4, num_layers=2, bidirectional=True)
    h0 = _x(4, 2, 4, seed=2)
    hx = (h0, _x(4, 2, 4, seed=3)) if name == "LSTM" else h0
    _check(torch, ref, mine, (_x(6, 2, 3), hx))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_input_matches_torch(name):
    torch, ref, mine = _pair(name, 3, 4, num_layers=2)
    _check(torch, ref, mine, (_x(5, 3),))
    h0 = _x(2, 4, seed=2)
    hx = (h0, _x(2, 4, seed=3)) if name == "LSTM" else h0
    torch, ref, mine = _pair(name, 3, 4, num_layers=2)
    _check(torch, ref, mine, (_x(5, 3), hx))


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(name):
    torch, ref, mine = _pair(name, 3, 4)
    _check(torch, ref, mine, (_x(2, 3),))
    h0 = _x(2, 4, seed=2)
    hx = (h0, _x(2, 4, seed=3)) if name == "LSTMCell" else h0
    torch, ref, mine = _pair(name, 3, 4)
    _check(torch, ref, mine, (_x(2, 3), hx))
    torch, ref, mine = _pair(name, 3, 4)             # unbatched
    _check(torch, ref, mine, (_x(3),))


def test_rnn_cell_relu_matches_torch():
    torch, ref, mine = _pair("RNNCell", 3, 4, nonlinearity="relu")
    _check(torch, ref, mine, (_x(5, 3),))


def test_parameter_names_shapes_and_init_bounds():
    torch = _torch()
    for name, kwargs in [("LSTM", dict(num_layers=2, bidirectional=True, proj_size=3)),
                         ("GRU", dict(num_layers=3, bias=False)),
                         ("RNN", dict(bidirectional=True))]:
        ref = getattr(torch.nn, name)(5, 8, **kwargs)
        mine = getattr(nn, name)(5, 8, **kwargs)
        assert [(k, tuple(v.shape)) for k, v in mine.state_dict().items()] == \
            [(k, tuple(v.shape)) for k, v in ref.state_dict().items()]
        assert repr(mine) == repr(ref)
        for p in mine.parameters():
            values = p.detach().numpy()
            assert np.abs(values).max() <= 1 / np.sqrt(8)
            assert np.ptp(values) > 0                   # drawn, not filled
            # uniform on +-0.354 has std 0.204; a bias of 8 values can fall below 0.1 by chance
            assert values.size < 20 or values.std() > 0.1
    for name in ["RNNCell", "LSTMCell", "GRUCell"]:
        ref, mine = getattr(torch.nn, name)(5, 8), getattr(nn, name)(5, 8)
        assert [(k, tuple(v.shape)) for k, v in mine.state_dict().items()] == \
            [(k, tuple(v.shape)) for k, v in ref.state_dict().items()]


def test_dropout_between_layers():
    tg.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = tg.randn(6, 2, 3)
    a, b = lstm(x)[0], lstm(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())   # fresh masks each call
    lstm.eval()
    a, b = lstm(x)[0], lstm(x)[0]
    # bit for bit: in eval, no mask is drawn and the same code on the same input rounds alike
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    one = nn.LSTM(3, 4, num_layers=1, dropout=0.0)
    # one layer: dropout has no layer to apply between, so training draws nothing either
    np.testing.assert_array_equal(one(x)[0].detach().numpy(), one(x)[0].detach().numpy())


def test_wrong_shapes_raise():
    lstm = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="input_size"):
        lstm(tg.randn(5, 2, 2))
    with pytest.raises(RuntimeError, match="hidden"):
        lstm(tg.randn(5, 2, 3), (tg.randn(1, 3, 4), tg.randn(1, 3, 4)))
    with pytest.raises(ValueError, match="proj_size"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")


def test_compiled_lstm_step_matches_eager():
    """An LSTM over a fixed sequence length, then a linear head: the compiled function gives
    eager's loss and gradients (inputs and parameters), and a second call hits the cache."""
    tg.manual_seed(0)
    lstm = nn.LSTM(3, 5, num_layers=2, batch_first=True)
    head = nn.Linear(5, 2)
    params = list(lstm.parameters()) + list(head.parameters())

    def step(x, y):
        out, (h, c) = lstm(x)
        return ((head(out[:, -1]) - y) ** 2).mean() + (c * c).mean()

    compiled = tg.compile(step)
    x = tg.randn(4, 7, 3, requires_grad=True)
    y = tg.randn(4, 2)
    results = []
    for fn in (step, compiled, compiled):
        for p in params:
            p.grad = None
        x.grad = None
        loss = fn(x, y)
        loss.backward()
        results.append((loss.item(), x.grad.numpy().copy(),
                        [p.grad.numpy().copy() for p in params]))
    # float32, 7 steps through 2 layers and back: the compiled program may fuse and reorder
    # the same roundings (2 x 14 x 32 of them), on gradients of order one
    tol = close("float32", n_ops=2 * 14 * 32, scale=1)
    for loss, gx, gp in results[1:]:
        np.testing.assert_allclose(loss, results[0][0], **tol)
        np.testing.assert_allclose(gx, results[0][1], **tol)
        for a, b in zip(gp, results[0][2]):
            np.testing.assert_allclose(a, b, **tol)
    assert compiled.stats["compiles"] == 1 and compiled.stats["cache_hits"] >= 1
