"""Tracing state is per thread, as grad mode is: a trace records only its own thread's
ops, eager work in other threads is unaffected, and a compiled function first called
from several threads at once gives every thread correct results."""
import threading

import numpy as np

import tracegrad as tg


def test_eager_training_in_one_thread_while_another_traces_new_functions():
    errors, losses = [], []
    stop = threading.Event()

    def tracer_thread():
        k = 0
        try:
            while not stop.is_set():
                f = tg.compile(lambda x, k=k: (tg.tanh(x * (k + 1)) ** 2).sum(), backend="numpy")
                x = tg.randn(8, requires_grad=True)
                f(x).backward()
                want = 2 * tg.tanh(x.detach() * (k + 1)) * (1 - tg.tanh(x.detach() * (k + 1)) ** 2) * (k + 1)
                np.testing.assert_allclose(x.grad.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
                k += 1
        except Exception as e:      # noqa: BLE001 - reported by the main thread
            errors.append(e)

    t = threading.Thread(target=tracer_thread)
    t.start()
    try:
        tg.manual_seed(0)
        w = tg.randn(4, 1, requires_grad=True)
        x = tg.randn(32, 4)
        y = x @ tg.tensor([[1.0], [-2.0], [0.5], [3.0]])
        for _ in range(300):
            a = tg.randn(3, requires_grad=True)
            (a * 3).exp().sum().backward()          # the example: needs a grad_fn
            np.testing.assert_allclose(a.grad.numpy(), 3 * np.exp(3 * a.detach().numpy()),
                                       rtol=1e-5)
            loss = ((x @ w - y) ** 2).mean()
            g, = tg.autograd.grad(loss, w)
            with tg.no_grad():
                w -= 0.05 * g
            losses.append(loss.item())
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
    assert losses[-1] < losses[0] * 0.01


def test_first_calls_from_several_threads_at_once_are_all_correct():
    f = tg.compile(lambda x, w: (tg.sigmoid(x @ w) * 2).sum(), backend="numpy")
    results, errors = {}, []
    barrier = threading.Barrier(4)

    def call(i):
        try:
            x = tg.randn(5, 3, generator=None) * (i + 1)
            w = tg.randn(3, 2, requires_grad=True)
            barrier.wait()
            out = f(x, w)
            out.backward()
            want = (tg.sigmoid(x @ w.detach()) * 2).sum()
            results[i] = (out.item(), want.item())
        except Exception as e:      # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    for got, want in results.values():
        assert abs(got - want) <= 1e-5 * abs(want)
    assert 1 <= f.stats["compiles"] <= 4


def test_a_profiler_still_records_every_thread_while_tracing_is_per_thread():
    seen = []

    def work():
        tg.ones(2) * 2

    with tg.profiler.profile() as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
        c = tg.compile(lambda x: x.exp().sum(), backend="numpy")
        c(tg.ones(3))
    seen = {e.key for e in prof.events()}
    assert "mul" in seen and any(k.startswith("compiled:") for k in seen)


def test_eager_work_while_another_thread_is_inside_a_trace():
    """The trace waits in the middle while this thread runs eager autograd: the eager
    ops get their grad_fn, and the trace records none of them."""
    inside, resume = threading.Event(), threading.Event()

    def fn(x):
        y = x * 2
        inside.set()
        assert resume.wait(10)
        return y.sum()

    f = tg.compile(fn, backend="numpy")
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("v", f(tg.ones(3))))
    t.start()
    assert inside.wait(10)
    try:
        a = tg.tensor([0.0, 1.0, 2.0], requires_grad=True)
        (a * 3).exp().sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), 3 * np.exp(3 * np.arange(3.0)), rtol=1e-6)
    finally:
        resume.set()
        t.join()
    assert out["v"].item() == 6.0
    assert "exp" not in f.graph and "mul" in f.graph
