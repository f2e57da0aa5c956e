"""CUDA graphs of compiled whole steps (``runtime/cuda_graphs.py``), on a real GPU.

A replayed graph reads its inputs where they were when it was recorded and writes its
outputs into its own buffers, so the ways it could return a stale or wrong result are
checked here against eager: a whole training step over many steps (parameters and the
optimizer's state written in place, a host step count, batches that move), a function
whose argument is a new array at every call or the same array written in place, results
held across later calls, and the cuBLAS products it calls itself while recording (every
layout and batch shape the generated code hands ``matmul``). Without a GPU the variant
runs without a graph (the CuPy double cannot record), which the CPU suite covers.
"""
import os
import sys

import numpy as np
import pytest

import tracegrad as tg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import zoo  # noqa: E402

GPU = tg.cuda.is_available()
pytestmark = pytest.mark.skipif(not GPU, reason="needs CuPy and an NVIDIA GPU")


def _graphed(compiled):
    """The Graphed forwards of ``compiled``'s variants."""
    return [v.forward for v in compiled._variants if hasattr(v.forward, "replays")]


def test_a_function_under_no_grad_replays_with_new_and_rewritten_arguments():
    rng = np.random.default_rng(0)
    w = tg.tensor(rng.standard_normal((64, 32)), dtype=tg.float32, device="cuda")

    @tg.compile(backend="cuda")
    def f(x, w):
        h = tg.tanh(x @ w) * 0.5 + 1
        return h.sum(1), (h * h).mean()

    held = []
    same = tg.tensor(rng.standard_normal((16, 64)), dtype=tg.float32, device="cuda")
    with tg.no_grad():
        for step in range(8):
            if step % 2:        # a new array each call: it moves
                x = tg.tensor(rng.standard_normal((16, 64)), dtype=tg.float32, device="cuda")
            else:               # the same array, written in place
                same.mul_(0.5).add_(float(step))
                x = same
            got = f(x, w)
            held.append((got, [g.cpu().numpy().copy() for g in got]))
            xn, wn = x.cpu().numpy().astype(np.float64), w.cpu().numpy().astype(np.float64)
            h = np.tanh(xn @ wn) * 0.5 + 1
            np.testing.assert_allclose(got[0].cpu().numpy(), h.sum(1), rtol=1e-4)
            np.testing.assert_allclose(float(got[1]), (h * h).mean(), rtol=1e-4)
    for got, first in held:     # no later call overwrote an earlier result
        for g, f0 in zip(got, first):
            np.testing.assert_array_equal(g.cpu().numpy(), f0)
    graphed = _graphed(f)
    assert graphed and graphed[0].off is None and graphed[0].replays >= 5


def test_a_forward_and_its_backward_replay_lending_large_results():
    """A compiled function with a backward, in a training loop: its forward and its backward
    each replay a graph; their large outputs (the result, the values saved for backward, the
    gradient) are lent, and the result the caller still holds from the previous step is
    never written by the next."""
    rng = np.random.default_rng(2)
    n = 1 << 19     # 2 MiB of float32: lent, not copied
    w = tg.tensor(rng.standard_normal(n), dtype=tg.float32, device="cuda", requires_grad=True)

    @tg.compile(backend="cuda")
    def f(x, w):
        y = tg.tanh(x * w)
        return y, (y * y).sum()

    previous = None
    for step in range(8):
        x = tg.tensor(rng.standard_normal(n), dtype=tg.float32, device="cuda")
        y, s = f(x, w)
        s.backward()
        grad = w.grad.cpu().numpy()
        w.grad = None
        xn, wn = x.cpu().numpy().astype(np.float64), w.detach().cpu().numpy().astype(np.float64)
        want = np.tanh(xn * wn)
        np.testing.assert_allclose(y.detach().cpu().numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(float(s), (want * want).sum(), rtol=1e-4)
        np.testing.assert_allclose(grad, 2 * want * (1 - want * want) * xn, rtol=1e-4,
                                   atol=1e-5)
        if previous is not None:
            np.testing.assert_array_equal(previous[0].detach().cpu().numpy(), previous[1])
        previous = (y, y.detach().cpu().numpy().copy())
    (v,) = f._variants
    assert v.forward.off is None and v.forward.replays == 6, v.forward.off
    assert v.backward.off is None and v.backward.replays == 6, v.backward.off
    assert any(what == "lend" for slot in v.forward.slots for what, _ in slot.plan)


@pytest.mark.parametrize("name", ["gpt_small", "dcgan", "vae"])
def test_whole_training_step_replays_as_eager_trains(name, tmp_path, monkeypatch):
    """Parameters and optimizer state written in place, Adam's host step count, batches
    cycling through four arrays: 10 steps, as tracegrad eager on the CPU."""
    cfg = zoo.config(name, "small")
    weights = tmp_path / "w.pt"
    zoo.save_weights(tg, name, cfg, weights)

    def train(how, device):
        step, compiled = zoo.program(tg, name, cfg, how, weights=weights, device=device)
        losses = [float(step(i)) for i in range(10)]
        params = {f"{m}.{k}": p.detach().cpu().numpy()
                  for m, mod in step.models.items() for k, p in mod.named_parameters()}
        return losses, params, compiled

    eager_losses, eager_params, _ = train("eager", "cpu")
    losses, params, compiled = train("step", "cuda")
    graphed = _graphed(compiled[0])
    assert graphed, "the whole step has no graphed variant"
    assert all(g.off is None for g in graphed), [g.off for g in graphed]
    assert sum(g.replays for g in graphed) >= 6
    np.testing.assert_allclose(losses, eager_losses, rtol=2e-4)
    for key, want in eager_params.items():
        np.testing.assert_allclose(params[key], want, rtol=2e-3, atol=1e-5, err_msg=key)


SHAPES = [  # (a shape, b shape, how a is made, how b is made): what matmul may be handed
    ((7, 5), (5, 3), "c", "c"),
    ((7, 5), (5, 3), "t", "t"),
    ((4, 7, 5), (5, 3), "c", "c"),
    ((4, 7, 5), (4, 5, 3), "t", "c"),
    ((2, 3, 7, 5), (3, 5, 1), "c", "t"),
    ((2, 1, 7, 5), (3, 5, 4), "perm", "c"),
    ((1, 5), (5, 1), "c", "c"),
    ((6, 0), (0, 2), "c", "c"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb,ma,mb", SHAPES)
def test_recording_gemm_matches_cupy(sa, sb, ma, mb, dtype):
    import cupy as cp
    from tracegrad.runtime.cuda_graphs import _Gemm
    rng = np.random.default_rng(1)

    def make(shape, how):
        if how == "t":      # a transposed view: columns contiguous
            return cp.asarray(rng.standard_normal(shape[:-2] + shape[-2:][::-1]),
                              dtype=dtype).swapaxes(-1, -2)
        if how == "perm":   # a permuted view copy-free reshape cannot flatten
            full = cp.asarray(rng.standard_normal((shape[-2],) + shape[:-2] + shape[-1:]),
                              dtype=dtype)
            return cp.moveaxis(full, 0, -2)
        return cp.asarray(rng.standard_normal(shape), dtype=dtype)
    a, b = make(sa, ma), make(sb, mb)
    assert a.shape == sa and b.shape == sb
    stream = cp.cuda.Stream(non_blocking=True)
    gemm = _Gemm(cp, stream)
    with stream:
        got = gemm(a, b)
        stream.synchronize()
    want = cp.matmul(a, b)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(want), rtol=tol, atol=tol * 10)
