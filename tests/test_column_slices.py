"""A fused group that reads column slices of a matrix (an LSTM's gates, ``chunk(4, 1)`` of its
[B, 4H] pre-activations) is passed the matrix and reads each slice in it on the CPU tiers
(``kernel.column_slices``): no copy of a slice is made for a C kernel's call, and what it
computes is what eager computes, forward and backward, on the NumPy and the C tier."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import support


def _cell(x, w, c):
    """An LSTM cell's gates from one product: four column slices of ``x @ w``."""
    i, f, g, o = (x @ w).chunk(4, 1)
    c = tg.sigmoid(f) * c + tg.sigmoid(i) * tg.tanh(g)
    return tg.sigmoid(o) * tg.tanh(c), c


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (5, 4 * 7), (6, 7))]


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_gates_read_in_their_matrix_match_eager(backend):
    arrays = _args()
    want = _cell(*[tg.tensor(a) for a in arrays])
    got = tg.compile(_cell, backend=backend)(*[tg.tensor(a) for a in arrays])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g._data, w._data, rtol=1e-6, atol=1e-6)


def test_the_kernel_is_passed_the_matrix_and_copies_nothing(monkeypatch):
    c = tg.compile(_cell, backend="c")
    arrays = [tg.tensor(a) for a in _args(1)]
    c(*arrays)
    variant = c._last
    assert variant.c_kernels, "the C tier did not build"
    # the gates' kernel takes the product four times, one slice of it each
    k = next(k for k in variant.kernel_ir if any(i.source is not None for i in k.inputs))
    sliced = [i for i in k.inputs if i.source is not None]
    assert sorted(i.offset for i in sliced) == [0, 7, 14, 21]
    assert len({i.source_name for i in sliced}) == 1
    assert f"{sliced[0].source_name}, " in variant.python_code.split(f"    {k.name}(")[1]
    assert "* 28 + 21 + j]" in variant.c_source
    copies = []
    real = np.ascontiguousarray
    monkeypatch.setattr(support.np, "ascontiguousarray",
                        lambda *a, **kw: copies.append(a[0].shape) or real(*a, **kw))
    again = _args(2)
    got = c(*[tg.tensor(a) for a in again])
    assert copies == []
    want = _cell(*[tg.tensor(a) for a in again])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g._data, w._data, rtol=1e-6, atol=1e-6)


def test_compiled_lstm_training_steps_match_eager():
    """Several SGD steps of an LSTM over 5 time steps, whole step compiled (its gates read
    in place forward, their gradients joined backward) against eager, from the same weights."""
    def run(compiled):
        tg.manual_seed(0)
        lstm, head = tg.nn.LSTM(3, 8), tg.nn.Linear(8, 2)
        params = list(lstm.parameters()) + list(head.parameters())
        opt = tg.optim.SGD(params, lr=0.5)

        def step(x, y):
            opt.zero_grad()
            out, _ = lstm(x)
            loss = ((head(out) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        step = tg.compile(step) if compiled else step
        rng = np.random.default_rng(3)
        losses = [float(step(tg.tensor(rng.standard_normal((5, 4, 3)).astype(np.float32)),
                             tg.tensor(rng.standard_normal((5, 4, 2)).astype(np.float32))))
                  for _ in range(4)]
        return losses, [p.detach().numpy().copy() for p in params]

    (le, pe), (lc, pc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for got, want in zip(pc, pe):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
