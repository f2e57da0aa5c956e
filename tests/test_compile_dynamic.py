"""Dynamic shapes: symbolic sizes, their guards, and the checks that keep them sound.

Each test compares compiled against eager over calls of several sizes, as a user would
write it: a dynamic variant that gave a stale or wrong result at any size fails.
"""
import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn.functional as F


def _mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    return [tg.tensor(rng.standard_normal(s).astype(np.float32) * 0.1, requires_grad=True)
            for s in ((12, 16), (16,), (16, 5), (5,))]


def _batch(rng, n):
    return (tg.tensor(rng.standard_normal((n, 12)).astype(np.float32)),
            tg.tensor(rng.integers(0, 5, n)))


def _check_step(step, compiled, params, sizes, seed=1):
    rng = np.random.default_rng(seed)
    for n in sizes:
        x, y = _batch(rng, n)
        got_loss = compiled(x, y)
        got = tg.autograd.grad(got_loss, params)
        want_loss = step(x, y)
        want = tg.autograd.grad(want_loss, params)
        np.testing.assert_allclose(got_loss.item(), want_loss.item(), rtol=1e-5)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


def test_twenty_batch_sizes_compile_at_most_twice():
    W1, b1, W2, b2 = _mlp_params()

    def step(x, y):
        h = tg.relu(x @ W1 + b1)
        return F.cross_entropy(h @ W2 + b2, y)
    compiled = tg.compile(step)
    sizes = [32, 7, 48, 2, 64, 13, 33, 5, 17, 60, 9, 3, 41, 28, 11, 50, 4, 19, 37, 6]
    _check_step(step, compiled, [W1, b1, W2, b2], sizes)
    assert compiled.stats["compiles"] <= 2
    assert compiled.stats["cache_hits"] >= 18
    text = compiled.explain()
    assert "dynamic: s0 = dim 0 of x, dim 0 of y" in text
    assert "x: float32[s0, 12]" in text
    assert "s0 = x.shape[0]" in compiled.code       # the generated code reads the size


def test_a_size_of_one_is_specialised_and_a_broadcast_retraces_with_its_reason():
    f = tg.compile(lambda x, y: (x * y).sum(0))
    a = tg.ones(4, 3)
    for n in (4, 6, 9):
        x, y = tg.arange(n * 3.0).reshape(n, 3), tg.ones(n, 3) * 2
        np.testing.assert_allclose(f(x, y).numpy(), (x * y).sum(0).numpy())
    assert f.stats["compiles"] == 2
    y1 = tg.ones(1, 3) * 2          # broadcasts now: another variant, saying why
    x = tg.arange(15.0).reshape(5, 3)
    np.testing.assert_allclose(f(x, y1).numpy(), (x * y1).sum(0).numpy())
    assert f.stats["compiles"] == 3
    assert "shape of y changed: [dynamic, 3] -> [1, 3]" in f.stats["retrace_reasons"][-1]
    del a


def test_a_relation_the_trace_relied_on_is_a_guard():
    def f(x):
        if x.shape[0] > 16:
            return x * 2
        return x * 3
    c = tg.compile(f)
    for n in (20, 30, 40, 8, 25, 5):
        x = tg.ones(n, 2)
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy())
    assert c.stats["compiles"] == 3            # 20 static, 30.. dynamic (s0 > 16), 8.. again
    assert any("guard failed: sizes s0 = x.shape[0] >= 2, s0 > 16" in r
               for r in c.stats["retrace_reasons"])


def test_dynamic_true_starts_symbolic_and_is_checked_at_the_second_size():
    c = tg.compile(lambda x: (x.exp() / x.shape[0]).sum(), dynamic=True)
    for n in (5, 5, 9, 12, 3):
        x = tg.linspace(0, 1, n)
        np.testing.assert_allclose(c(x).item(), (x.exp() / n).sum().item(), rtol=1e-6)
    assert c.stats["compiles"] == 1
    assert c.stats["size_checks"] == 1          # the trace at 9 confirmed the one at 5


def test_dynamic_false_always_specialises():
    c = tg.compile(lambda x: x.sum(), dynamic=False)
    for n in (2, 3, 4):
        c(tg.ones(n))
    assert c.stats["compiles"] == 3
    assert "static in every dim" in c.explain()


def test_mark_dynamic_and_mark_static():
    c = tg.compile(lambda x: x.sum(1))
    x = tg.ones(6, 4)
    tg.mark_dynamic(x, 0)
    c(x)
    assert "s0" in c.graph
    d = tg.compile(lambda x: x.sum(), dynamic=True)
    y = tg.ones(3, 5)
    tg.mark_static(y, 1)
    d(y)
    assert "f32[s0,5]" in d.graph


@pytest.mark.parametrize("body", [
    lambda x: x * float(x.shape[0]),                        # a size made a float
    lambda x: x / x.shape[0] ** 0.5,                        # ... by arithmetic with a float
    lambda x: x * np.float32(x.shape[0]),                   # ... by NumPy: baked, then caught
    lambda x: sum(x[i] * i for i in range(x.shape[0])),     # a loop over a size: unrolled
    lambda x: x * tg.arange(len(x)),                        # len() and a constant of its size
])
def test_sizes_that_escape_are_never_baked(body):
    c = tg.compile(body)
    for n in (3, 5, 8, 5, 3):
        x = tg.linspace(1, 2, n)
        np.testing.assert_allclose(c(x).numpy(), body(x).numpy(), rtol=1e-6)


def test_creation_and_random_ops_take_symbolic_sizes():
    def f(x):
        h = tg.zeros(x.shape[0], 3)
        h[:, 0] = x
        keep = tg.rand(x.shape[0]) >= 0.0          # all kept: the values are checkable
        return (h.sum(1) * keep).sum()
    c = tg.compile(f)
    for n in (4, 6, 10, 7):
        x = tg.arange(float(n))
        assert c(x).item() == f(x).item()
    assert c.stats["compiles"] == 2
    assert "h = np.broadcast_to(t0, (s0, 3))" in c.code


def test_reshape_and_mean_keep_their_sizes_symbolic():
    W = tg.ones(8, 2, requires_grad=True)

    def f(img):
        flat = img.view(img.shape[0], -1)
        return (flat @ W).mean()
    c = tg.compile(f)
    for n in (2, 3, 11):
        img = tg.arange(n * 8.0).reshape(n, 2, 4)
        got, want = c(img), f(img)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        np.testing.assert_allclose(tg.autograd.grad(got, W)[0].numpy(),
                                   tg.autograd.grad(want, W)[0].numpy(), rtol=1e-6)
    assert c.stats["compiles"] == 2
    assert "reshape img  shape=(s0,8)" in c.graph


def test_a_compiled_module_with_changing_batch(backend):
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(6, 8), tg.nn.Tanh(), tg.nn.Linear(8, 2))
    compiled = tg.compile(model)
    for n in (4, 9, 16, 3):
        x = tg.linspace(-1, 1, n * 6).reshape(n, 6)
        got = compiled(x).square().mean()
        gg = tg.autograd.grad(got, list(model.parameters()))
        want = model(x).square().mean()
        gw = tg.autograd.grad(want, list(model.parameters()))
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for a, b in zip(gg, gw):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    assert compiled._compiled.stats["compiles"] == 2


def test_c_kernels_take_the_sizes_as_arguments():
    def f(x, b):
        y = tg.tanh(x * 2 + b)
        return y.sum(), (y - y.mean(-1, keepdim=True)).square().sum(-1)
    c = tg.compile(f, backend="c")
    rng = np.random.default_rng(3)
    b = tg.tensor(rng.standard_normal(7))
    for n in (6, 9, 40, 3, 1000):
        x = tg.tensor(rng.standard_normal((n, 7)))
        for got, want in zip(c(x, b), f(x, b)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)
    assert c.stats["compiles"] == 2             # one build serves every size from 9 on
    assert "tier: c" in str(c.kernels) and "[s0,7]" in str(c.kernels)
    assert "const int64_t s0" in c.code


def test_a_dynamic_workspace_pools_buffers_per_size_within_a_budget(monkeypatch):
    from tracegrad.codegen import support
    ws = support.Workspace(sized=lambda s0: ({"k": (1, [((s0, 4), np.float32)])}, {}))
    a = ws.take((3,))
    assert a.k[0][0].shape == (3, 4) and a.size_of == {"s0": 3}
    ws.give(a)
    assert ws.take((3,)) is a                   # the same size: the same buffers
    ws.give(a)
    monkeypatch.setattr(support, "SIZES_BUDGET", 250)
    b = ws.take((5,))                           # 80 bytes more: 128 in all, kept
    ws.give(b)
    c = ws.take((9,))                           # 144 more: 272, so the oldest (3) goes
    ws.give(c)
    assert (3,) not in ws._by_size and ws.take((5,)) is b


def test_the_size_guard_is_logged(monkeypatch, capsys):
    monkeypatch.setenv("TRACEGRAD_LOG", "guards")
    c = tg.compile(lambda x: x.sum() if x.shape[0] > 3 else x.prod(), dynamic=True)
    c(tg.ones(5))
    assert "guard: sizes s0 = x.shape[0] >= 2, s0 > 3" in capsys.readouterr().err


@pytest.mark.parametrize("body", [
    lambda x: x * 2 if len(x) > 4 else x * 3,                  # len() of a dynamic dim
    lambda x: x[:-1] if x.shape[0] & 1 else x,                  # a bitwise operator
    lambda x: x[7 % x.shape[0]],                                # a reflected remainder
    lambda x: (x[:10] * 2).sum(0),                              # a slice with a fixed stop
    lambda x: (x * 2, x.shape[0], x.numel(), x.size(0) // 2),   # sizes returned
    lambda x: [r * 2 for r in x][0],                            # iterating a dynamic dim
], ids=["len", "and", "rmod", "slice", "returned", "iter"])
def test_sizes_leaving_the_trace_by_any_route_are_never_baked(body, backend):
    c = tg.compile(body)
    for n in (8, 16, 32, 5, 3, 11, 8):
        x = tg.arange(n * 3.0).reshape(n, 3)
        got, want = c(x), body(x)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            if isinstance(w, tg.Tensor):
                np.testing.assert_allclose(g.numpy(), w.numpy())
            else:
                assert type(g) is int and g == w


def test_a_replaced_captured_tensor_is_read_at_a_new_size_too():
    ns = {"tg": tg, "W": tg.ones(4)}
    exec("def f(x):\n    return x * W\n", ns)
    c = tg.compile(ns["f"], dynamic=True)
    c(tg.ones(8, 4))
    ns["W"] = tg.full((4,), 5.0)
    assert c(tg.ones(16, 4)).sum().item() == 320.0


@pytest.mark.parametrize("body", [lambda x: x / x.mean(),
                                  lambda x: (x.unsqueeze(0) * x.unsqueeze(1)).sum()],
                         ids=["a count", "a reshape"])
def test_create_graph_through_a_dynamic_variant_uses_the_call_sizes(body):
    c = tg.compile(body)
    for n in (3, 5, 8):
        x = tg.tensor(np.linspace(-1, 1, n * 4).reshape(n, 4), requires_grad=True)
        (g,) = tg.autograd.grad(c(x).sum(), x, create_graph=True)
        (want,) = tg.autograd.grad(body(x).sum(), x, create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), want.detach().numpy(), rtol=1e-9)
        (gg,) = tg.autograd.grad(g.square().sum(), x)
        (wg,) = tg.autograd.grad(want.square().sum(), x)
        np.testing.assert_allclose(gg.numpy(), wg.numpy(), rtol=1e-8)
    assert c.stats["compiles"] == 2


def test_marking_a_dim_out_of_range_is_an_error_that_marks_nothing():
    from tracegrad.symbolic import marks_of
    x = tg.ones(2, 3)
    with pytest.raises(IndexError, match=r"mark_dynamic: Dimension out of range .* got 5"):
        tg.mark_dynamic(x, [0, 5])
    assert marks_of(x) is None


# several dynamic dims, per input and across inputs ---------------------------------------------

def test_dynamic_true_on_a_2d_input_compiles_once_for_every_size(backend):
    """The issue's case: symbolic ``f32[s0, s1]``, one variant for sizes (2..11, 3), among them
    (3, 3), where duck sizing gives both dims one symbol in a trace of that size."""
    f = lambda x: (x * x).sum()         # noqa: E731
    c = tg.compile(f, dynamic=True)
    for n in range(2, 12):
        x = tg.arange(n * 3.0).reshape(n, 3)
        assert c(x).item() == f(x).item()
    assert c.stats["compiles"] == 1 and c.stats["fallbacks"] == 0
    text = c.explain()
    assert "x: float32[s0, s1]" in text and "specialised" not in text
    assert "so far for these sizes only" not in text    # a trace at another size confirmed it


def _rand(rng, shape, grad):
    return tg.tensor(rng.standard_normal(shape), requires_grad=grad)


def _layer_norm(x):
    mu = x.mean(-1, keepdim=True)
    return ((x - mu) / (x.var(-1, keepdim=True) + 1e-5).sqrt()).sum((0, 1))


# (name, function, shapes of its inputs from the sizes (B, T, C), dims of each that vary)
PROGRAMS = [
    ("2d, one dim", lambda x: (x * x).sum(1), lambda B, T, C: [(B, 6)], [[0]]),
    ("2d, two dims", lambda x: (x.softmax(-1) * x).mean(0), lambda B, T, C: [(B, T)], [[0, 1]]),
    ("3d, three dims", _layer_norm, lambda B, T, C: [(B, T, C)], [[0, 1, 2]]),
    ("3d, a dim shared by inputs", lambda x, y: (x.unsqueeze(-1) * y).sum(1),
     lambda B, T, C: [(B, T), (B, T, C)], [[0, 1], [0, 1, 2]]),
    ("matmul, dynamic inner dim", lambda a, b: (a @ b).tanh(),
     lambda B, T, C: [(B, T), (T, 4)], [[0, 1], [0]]),
    ("reductions over dynamic dims",
     lambda x: x.amax(1).sum() + x.mean() + x.sum((0, 2)).max() + x.var(),
     lambda B, T, C: [(B, T, C)], [[0, 1, 2]]),
    ("reshape and cat", lambda x, y: tg.cat([x.reshape(x.shape[0], -1), y], 1).square().mean(),
     lambda B, T, C: [(B, T, C), (B, C)], [[0, 1, 2], [0, 1]]),
]

# 20 sizes: the first two differ in every dim; later ones make dims coincide (B == T == C)
SIZES = [(5, 7, 3), (9, 4, 6), (3, 3, 3), (2, 8, 5), (11, 2, 9), (6, 6, 2), (4, 10, 4),
         (7, 5, 7), (8, 8, 8), (10, 3, 2), (2, 2, 11), (12, 6, 5), (3, 9, 9), (5, 5, 12),
         (9, 11, 3), (4, 2, 6), (6, 12, 2), (13, 7, 4), (7, 3, 10), (2, 4, 2)]


@pytest.mark.parametrize("mode", ["dynamic=True", "mark_dynamic", "automatic"])
@pytest.mark.parametrize("name, fn, shapes, varying", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_twenty_shapes_with_several_dynamic_dims(name, fn, shapes, varying, mode):
    """Results and gradients equal eager's at every size; one variant serves them all
    (automatic dynamic: a static one, then one dynamic), never an eager fallback."""
    rng = np.random.default_rng(0)
    c = tg.compile(fn, dynamic=True if mode == "dynamic=True" else None)
    for B, T, C in SIZES:
        args = [_rand(rng, s, True) for s in shapes(B, T, C)]
        if mode == "mark_dynamic":
            for a, dims in zip(args, varying):
                tg.mark_dynamic(a, dims)
        got, want = c(*args), fn(*args)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
        g_got = tg.autograd.grad(got.sum(), args)
        g_want = tg.autograd.grad(want.sum(), args)
        for a, b in zip(g_got, g_want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)
    assert c.stats["fallbacks"] == 0
    assert c.stats["compiles"] == (2 if mode == "automatic" else 1), c.explain()


def test_a_size_one_slice_is_specialised_for_its_size_only():
    """``x[:, 1:]`` has length 1 at T = 2 and broadcasts there: that size gets a variant of
    its own (as PyTorch's guard on it does); every other size keeps the dynamic one."""
    f = lambda x: (x[:, 1:] - x[:, :1]).sum(1)      # noqa: E731
    c = tg.compile(f, dynamic=True)
    for B, T, _ in SIZES:
        x = tg.arange(B * T * 1.0).reshape(B, T).sin()
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert c.stats["compiles"] == 2 and c.stats["fallbacks"] == 0
    assert any("dim 1 of x specialised for calls of these sizes" in r
               for r in c.stats["retrace_reasons"])


def test_two_dims_seen_apart_and_then_needed_equal_share_one_symbol():
    """Sizes seen different are given two symbols; a trace that then needs them equal is
    made again with one symbol for both (not made static), so neither dim storms."""
    def f(x, y):
        if x.shape[1] == y.shape[0]:
            return (x @ y).sum(0)
        return x.sum(0)
    c = tg.compile(f, dynamic=True)
    for B, K, C in [(3, 4, 5), (5, 6, 2), (4, 3, 3), (6, 5, 5), (2, 7, 7), (7, 2, 3), (8, 9, 9)]:
        x, y = tg.ones(B, K), tg.ones(C, 3)
        np.testing.assert_allclose(c(x, y).numpy(), f(x, y).numpy())
    assert c.stats["fallbacks"] == 0 and c.stats["compiles"] <= 3
    assert any("traced with one size" in r for r in c.stats["retrace_reasons"])
    assert not any(r.endswith("specialised") or " specialised: " in r
                   for r in c.stats["retrace_reasons"])


def test_a_backward_gets_sizes_that_no_saved_value_has(backend):
    """The backward of ``x.mean()`` saves nothing, yet its count is ``s0*s1*s2``: it reads the
    sizes from a carrier (zero strides, no memory), instead of specialising every dim."""
    c = tg.compile(lambda x: x.mean(), dynamic=True)
    for shape in [(2, 3, 4), (5, 2, 7), (3, 6, 2)]:
        x = tg.ones(*shape, requires_grad=True)
        (g,) = tg.autograd.grad(c(x), x)
        np.testing.assert_allclose(g.numpy(), np.full(shape, 1 / np.prod(shape)))
    assert c.stats["compiles"] == 1
    assert "def backward(sizes, d_out)" in c.code and "s2 = sizes.shape[2]" in c.code
