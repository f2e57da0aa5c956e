"""What a compiled call does besides computing: stores to outside state, exceptions,
concurrent first calls and pickling, each as eager (or PyTorch) does it."""
import io
import threading
import warnings

import numpy as np
import pytest

import tracegrad as tg

pytestmark = pytest.mark.usefixtures("backend")

LOG = []
COUNTER = 0


class Cfg:
    steps = 0


CFG = Cfg()
CACHE = {}


def _append(x):
    LOG.append(1)
    return x * len(LOG)


def _count(x):
    global COUNTER
    COUNTER += 1
    return x + COUNTER


def _attr(x):
    CFG.steps += 1
    return x * CFG.steps


def _item(x):
    CACHE["calls"] = CACHE.get("calls", 0) + 1
    return x - CACHE["calls"]


def _reset():
    global COUNTER
    LOG.clear()
    COUNTER = 0
    CFG.steps = 0
    CACHE.clear()


def _state():
    return (list(LOG), COUNTER, CFG.steps, dict(CACHE))


@pytest.mark.parametrize("fn", [_append, _count, _attr, _item])
def test_stores_to_outside_state_happen_on_every_call(fn):
    _reset()
    eager = [fn(tg.ones(2)).tolist() for _ in range(4)]
    eager_state = _state()
    _reset()
    f = tg.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = [f(tg.ones(2)).tolist() for _ in range(4)]
    assert compiled == eager and _state() == eager_state
    said = [w for w in caught if "writes to" in str(w.message)]
    assert len(said) == 1 and __file__.split("/")[-1] in str(said[0].message)
    assert "now running eagerly (writes to" in f.explain()


LOGGED, METRICS = [], {}


def _write_only(x):
    global COUNTER
    y = x * 2
    loss = y.sum()
    COUNTER += 1                # written, never read: replayed after each run
    CFG.steps += 2
    LOGGED.append(y)
    for k in range(2):
        METRICS[f"part{k}"] = y[k]
    METRICS["loss"] = loss
    return loss


def test_write_only_stores_are_replayed_by_one_variant():
    _reset()
    LOGGED.clear()
    METRICS.clear()
    eager = [_write_only(tg.ones(2) * i).item() for i in range(4)]
    eager_state = (COUNTER, CFG.steps, [t.tolist() for t in LOGGED],
                   {k: v.item() for k, v in METRICS.items()})
    _reset()
    LOGGED.clear()
    METRICS.clear()
    f = tg.compile(_write_only)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # nothing to warn about: every store is replayed
        results = [f(tg.ones(2) * i) for i in range(4)]
    assert [r.item() for r in results] == eager
    assert (COUNTER, CFG.steps, [t.tolist() for t in LOGGED],
            {k: v.item() for k, v in METRICS.items()}) == eager_state
    assert METRICS["loss"] is results[-1]       # a stored result is the result itself
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 3, f.explain()
    text = f.explain()
    for what in ("the global variable COUNTER", "CFG.steps", "LOGGED (.append)",
                 "METRICS[f'part{k}']", "METRICS['loss']"):
        assert f"after each run, replays: {what}" in text, text


def test_a_nonlocal_counter_is_replayed():
    calls = 0

    def f(x):
        nonlocal calls
        calls += 1
        return x + 1
    c = tg.compile(f)
    for _ in range(5):
        c(tg.ones(1))
    assert calls == 5 and c.stats["compiles"] == 1


def test_a_stored_tensor_that_needs_grad_and_is_not_returned_stops_compiling():
    kept = []

    def f(x):
        h = x * 3
        kept.append(h)
        return h.sum()
    c = tg.compile(f)
    x = tg.ones(2, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="needs a gradient"):
        c(x)
    c(x)
    assert len(kept) == 2 and kept[-1].grad_fn is not None
    kept[-1].sum().backward()
    np.testing.assert_array_equal(x.grad._data, [3, 3])


def test_a_stored_tensor_that_needs_grad_is_on_the_first_calls_graph_too():
    # the first call's result hangs from the same graph as the tensor it stored: a variant's
    # result would not, and h.retain_grad() would leave h.grad None after the backward
    kept = {}

    def f(x, w):
        h = x @ w
        h.retain_grad()
        kept["h"] = h
        return h.tanh().sum()
    c = tg.compile(f)
    x, w = tg.ones(3, 4), tg.full((4, 2), 0.1, requires_grad=True)
    f(x, w).backward()
    want = kept["h"].grad.numpy().copy()
    for call in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore" if call else "error")
            if call == 0:
                with pytest.raises(RuntimeWarning, match="needs a gradient"):
                    c(x, w)
            c(x, w).backward()
        np.testing.assert_allclose(kept["h"].grad.numpy(), want, rtol=1e-6)
    with pytest.raises(RuntimeError, match="needs a gradient.*fullgraph=True"):
        tg.compile(f, fullgraph=True)(x, w)


@pytest.mark.parametrize("where", ["tensor", "node"])
def test_a_gradient_hook_registered_inside_runs_as_eager(where):
    # a compiled backward runs no Python hook: the call goes on eagerly from the registration,
    # so the hook changes the gradient as it does without compile, on every call
    def f(x, w):
        h = x @ w
        if where == "tensor":
            h.register_hook(lambda g: g * 0)
        else:
            h.grad_fn.register_prehook(lambda gs: (gs[0] * 0,))
        return h.tanh().sum() + w.sum()
    c = tg.compile(f)
    x = tg.ones(3, 4)
    for call in range(3):
        w = tg.full((4, 2), 0.1, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            c(x, w).backward()
        assert any("registers a gradient hook" in str(m.message) for m in caught) == (call == 0)
        np.testing.assert_array_equal(w.grad.numpy(), np.ones((4, 2)))
    with pytest.raises(RuntimeError, match="registers a gradient hook.*fullgraph=True"):
        tg.compile(f, fullgraph=True)(x, w)


def test_a_module_that_keeps_state_on_itself_runs_as_eager():
    class Counter(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tg.nn.Linear(2, 2)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.lin(x) * self.calls

    tg.manual_seed(0)
    m = Counter()
    x = tg.ones(1, 2)
    eager = [m(x).tolist() for _ in range(3)]
    m.calls = 0
    c = tg.compile(m)
    with pytest.warns(RuntimeWarning, match="self.calls"):
        compiled = [c(x).tolist() for _ in range(3)]
    assert compiled == eager and m.calls == 3


def test_local_containers_and_tensor_writes_still_compile():
    @tg.compile
    def f(x):
        d = {}
        d["a"] = x * 2
        parts = []
        parts.append(d["a"])
        y = x.clone()
        y[0] = 5
        return parts[0] + y
    outs = [f(tg.ones(2)).tolist() for _ in range(3)]
    assert outs == [[7.0, 3.0]] * 3
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 2


def test_a_cached_variant_whose_call_raises_keeps_eagers_writes():
    def f(x, acc):
        acc.add_(1)
        if x.sum() > 10:
            raise ValueError("too big")
        return x * 2

    c = tg.compile(f)
    acc = tg.zeros(2)
    c(tg.ones(2), acc)
    with pytest.raises(ValueError, match="too big"):
        c(tg.full((2,), 6.0), acc)
    np.testing.assert_array_equal(acc._data, [2, 2])   # each call's add_, as eagerly
    c(tg.ones(2), acc)
    np.testing.assert_array_equal(acc._data, [3, 3])


@pytest.mark.parametrize("varying", [False, True])
def test_concurrent_first_calls_make_one_variant(varying):
    f = tg.compile(lambda x: (x * 2).sin().sum(), dynamic=True if varying else None)
    n = 12
    xs = [tg.randn(4 + (i if varying else 0), 3) for i in range(n)]
    results = [None] * n
    barrier = threading.Barrier(n)

    def call(i):
        barrier.wait()
        results[i] = f(xs[i]).item()
    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, r in zip(xs, results):
        np.testing.assert_allclose(r, (x * 2).sin().sum().item(), rtol=1e-5)
    assert f.stats["compiles"] <= (2 if varying else 1), f.explain()
    assert f.stats["fallbacks"] == 0


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_module_compiled_in_place_pickles(when):
    tg.manual_seed(0)
    m = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.ReLU(), tg.nn.Linear(4, 1))
    m.compile()
    x = tg.randn(2, 3)
    expected = m(x) if when == "after" else None
    buf = io.BytesIO()
    tg.save(m, buf)
    buf.seek(0)
    m2 = tg.load(buf, weights_only=False)
    out = m2(x)
    np.testing.assert_allclose(out._data, m(x)._data, rtol=1e-6)
    assert m2._compiled_call.stats["compiles"] == 1     # compiled afresh
    if expected is not None:
        np.testing.assert_allclose(out._data, expected._data, rtol=1e-6)


def test_a_compiled_module_wrapper_pickles():
    tg.manual_seed(0)
    om = tg.compile(tg.nn.Linear(3, 2))
    x = tg.randn(4, 3)
    y = om(x)
    buf = io.BytesIO()
    tg.save(om, buf)
    buf.seek(0)
    om2 = tg.load(buf, weights_only=False)
    np.testing.assert_allclose(om2(x)._data, y._data, rtol=1e-6)
    assert om2.stats["compiles"] == 1


def test_fullgraph_refuses_what_a_graph_cannot_hold_before_it_happens():
    seen = []

    def f(x):
        seen.append(len(seen))
        return x * len(seen)
    c = tg.compile(f, fullgraph=True)
    with pytest.raises(RuntimeError, match="fullgraph=True"):
        c(tg.ones(2))
    assert seen == []       # refused before the store


@pytest.mark.parametrize("through", ["data", "detach"])
def test_a_hand_written_update_through_data_reaches_the_parameter(through):
    def run(compiled):
        w = tg.nn.Parameter(tg.ones(3))

        def step(x):
            w.grad = None
            loss = (w * x).sum()
            loss.backward()
            alias = w.data if through == "data" else w.detach()
            alias.add_(w.grad, alpha=-0.1)      # the same storage: w changes
            return loss.detach()
        f = tg.compile(step) if compiled else step
        return [f(tg.arange(3.0)).item() for _ in range(3)], w.detach().clone()
    (e_loss, e_w), (c_loss, c_w) = run(False), run(True)
    assert c_loss == e_loss
    np.testing.assert_allclose(c_w._data, e_w._data, rtol=1e-6)


def test_a_value_read_after_the_trace_writes_it_is_guarded_on_what_it_will_be():
    # the guard on c.item() compares the value after this call's add_, not before it
    def run(compiled):
        c = tg.zeros(())

        def f(x):
            c.add_(1)
            return x * 2 if c.item() > 2 else x * 3
        g = tg.compile(f) if compiled else f
        return [g(tg.ones(1)).item() for _ in range(5)], g
    eager, _ = run(False)
    compiled, g = run(True)
    assert compiled == eager == [3.0, 3.0, 2.0, 2.0, 2.0]
    # .item() is guarded by value, and the value after add_ differs at every call
    assert g.stats["compiles"] == 5 and g.stats["cache_hits"] == 0


@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "hessian", "dual argument"])
def test_forward_mode_ad_under_compile_gives_eagers_tangents(transform):
    # a graph carries no tangents: a forward-AD level opened inside the function, or one
    # open around the call, makes the call eager (its tangents were zeros or None before)
    def f(x):
        return x.sin() * x
    x, v = tg.tensor([0.5, -1.0, 2.0]), tg.tensor([1.0, 0.5, -2.0])
    fwd = tg.autograd.forward_ad

    def run(fn):
        if transform == "dual argument":
            with fwd.dual_level():
                return fwd.unpack_dual(fn(fwd.make_dual(x, v))).tangent.numpy().copy()
        return fn(x).numpy().copy()
    if transform == "jvp":
        def eager(x):
            return tg.func.jvp(f, (x,), (v,))[1]
    elif transform == "jacfwd":
        eager = tg.func.jacfwd(f)
    elif transform == "hessian":
        eager = tg.func.hessian(lambda x: f(x).sum())
    else:
        eager = f
    want = run(eager)
    assert np.abs(want).max() > 0.1
    c = tg.compile(eager)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_allclose(run(c), want, rtol=1e-6, atol=1e-7)
    if transform == "dual argument":      # outside a level the same function compiles
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-6)
        assert c.stats["compiles"] == 1
