"""Large outputs of compiled functions reuse earlier calls' arrays (``support.Outputs``).

A reused array is one nothing refers to any more; these tests hold results, views of them,
values saved for backward and gradients in the ways programs do, and check that no later
call writes into any of them, and that arrays are reused once released.
"""
import threading

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import fused
from tracegrad.codegen.support import Outputs

N = (1 << 20) // 4 + 16     # float32 elements: just over REUSED_BYTES


def test_take_reuses_a_released_array_and_never_a_held_one():
    out = Outputs()
    a = out.take("y", (N,), np.float32)
    b = out.take("y", (N,), np.float32)
    assert a is not b                       # a is held here
    a_id = id(a)
    del a
    c = out.take("y", (N,), np.float32)     # the released one comes back
    assert id(c) == a_id
    d = out.take("y", (N,), np.float32)     # b and c are held: a third, not kept
    assert c is not b and d is not b and d is not c
    view = c[:3]
    del c, d
    e = out.take("y", (N,), np.float32)
    assert e is not b and not np.shares_memory(e, view)
    assert len(out._local.pools["y"]) == Outputs.KEEP


def test_each_thread_takes_its_own_arrays():
    out = Outputs()
    mine = out.take("y", (N,), np.float32)
    ids = []
    mine_id = id(mine)
    del mine
    t = threading.Thread(target=lambda: ids.append(id(out.take("y", (N,), np.float32))))
    t.start()
    t.join()
    assert ids and ids[0] != mine_id
    assert id(out.take("y", (N,), np.float32)) == mine_id


def _compiled_outputs(f):
    return [line for line in f.code.splitlines() if "_outputs.take(" in line]


def test_held_results_and_views_are_never_written_by_later_calls():
    @tg.compile(backend="numpy")
    def f(x, s):
        return tg.tanh(x * s) + s

    x = tg.randn(N)
    held, first = [], []
    for k in range(6):
        y = f(x, tg.tensor(float(k)))
        if k % 2:       # every other result held whole, the others through a view only
            held.append(y)
        else:
            held.append(y[5:9])
        first.append(held[-1].numpy().copy())
        del y
    assert _compiled_outputs(f), f.code
    for h, want in zip(held, first):
        np.testing.assert_array_equal(h.numpy(), want)


def test_released_results_are_reused():
    @tg.compile(backend="numpy")
    def f(x):
        return x * 2 + 1

    x = tg.randn(N)
    seen = set()
    for _ in range(6):
        seen.add(f(x)._data.ctypes.data)    # each result released at once
    assert len(seen) <= 2
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * 2 + 1, rtol=1e-6)


def test_saved_values_and_gradients_survive_later_calls():
    """Two forwards before their backwards (gradient accumulation over micro-batches): the
    first forward's saved values and results are still held when the second runs."""
    @tg.compile(backend="numpy")
    def f(x, w):
        return (tg.sin(x * w) * x).sum()

    w = tg.randn(N, requires_grad=True)
    xs = [tg.randn(N) for _ in range(4)]
    for _ in range(3):
        losses = [f(x, w) for x in xs]
        for loss in losses:
            loss.backward()
        want = sum(np.cos(x.numpy() * w.detach().numpy()) * x.numpy() ** 2 for x in xs)
        np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-4, atol=1e-4)
        w.grad = None


def test_small_outputs_and_gpu_variants_allocate_as_before(monkeypatch):
    @tg.compile(backend="numpy")
    def f(x):
        return x * 2 + 1

    f(tg.randn(100))
    assert not _compiled_outputs(f)
    monkeypatch.setattr(fused, "REUSED_BYTES", 1)

    @tg.compile(backend="numpy")
    def g(x):
        return x * 2 + 1

    g(tg.randn(100))
    assert _compiled_outputs(g)


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_a_training_loop_matches_eager(backend):
    if backend == "c":
        from tracegrad.codegen.build import toolchain, BuildError
        try:
            toolchain()
        except BuildError as e:
            pytest.skip(str(e))
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(N).astype(np.float32) for _ in range(3)]

    def train(step):
        w = tg.tensor(rng.standard_normal(N).astype(np.float32) * 0 + 0.5, requires_grad=True)
        out = []
        for x in data * 2:
            loss, y = step(tg.from_numpy(x), w)
            loss.backward()
            with tg.no_grad():
                w -= 0.01 * w.grad
            w.grad = None
            out.append((float(loss), y.detach().numpy()[:4].copy()))
        return out

    def step(x, w):
        y = tg.tanh(x * w)
        return (y * y).mean(), y

    eager = train(step)
    compiled = train(tg.compile(step, backend=backend))
    for (le, ye), (lc, yc) in zip(eager, compiled):
        assert lc == pytest.approx(le, rel=1e-5)
        np.testing.assert_allclose(yc, ye, rtol=1e-5, atol=1e-6)
