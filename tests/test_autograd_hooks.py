"""Tensor hooks, node hooks, post-accumulate hooks and saved-tensor hooks.

Comparisons that state no tolerance are on small integers and halves, on which every
operation here (products, sums, scaling by 2, 3, 0.5 or 10) is exact in float32: both
libraries must agree to the bit, and assert_allclose's default 1e-7 is below an ulp.
"""
import numpy as np
import pytest

import tracegrad as tg

from tolerances import close, ulps


def test_leaf_hook_sees_and_replaces_grad_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x.register_hook(lambda g: seen.append(g.clone()) or g * 10)
        (x * x).sum().backward()
        res.append((seen[0].numpy().copy(), x.grad.numpy().copy()))
        h.remove()
        x.grad = None
        (x * x).sum().backward()
        assert len(seen) == 1                  # removed: not called again
        res.append(x.grad.numpy().copy())
    np.testing.assert_allclose(res[0][0], res[2][0])
    np.testing.assert_allclose(res[0][1], res[2][1])
    np.testing.assert_allclose(res[0][1], [20.0, 40.0])
    np.testing.assert_allclose(res[1], res[3])


def test_non_leaf_hook_replaces_grad_downstream_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        y.register_hook(lambda g: seen.append(g.clone()))
        h = y.register_hook(lambda g: g * 0.5)
        y.register_hook(lambda g: seen.append(g.clone()))
        (y * y).sum().backward()
        res.append([s.numpy().copy() for s in seen] + [x.grad.numpy().copy()])
        h.remove()
        x.grad = None
        y2 = x * 3
        (y2 * y2).sum().backward()
        res.append(x.grad.numpy().copy())
    for u, v in zip(res[0], res[2]):
        np.testing.assert_allclose(u, v)
    np.testing.assert_allclose(res[0][0] * 0.5, res[0][1])
    np.testing.assert_allclose(res[1], res[3])


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tg.tensor([1.0]).register_hook(lambda g: g)


def test_retain_grad_sees_hooked_grad_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 3)
        y.sum().backward()
        res.append((y.grad.numpy().copy(), x.grad.numpy().copy()))
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v)


def test_node_prehook_and_posthook_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        calls = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 5.0])
        y = x * w
        node = y.grad_fn

        def pre(grad_outputs):
            calls.append(("pre", len(grad_outputs), grad_outputs[0].numpy().copy()))
            return (grad_outputs[0] * 2,)

        def post(grad_inputs, grad_outputs):
            assert grad_inputs[1] is None           # w needs no gradient
            calls.append(("post", len(grad_inputs), grad_inputs[0].numpy().copy(),
                          grad_outputs[0].numpy().copy()))
            return (grad_inputs[0] + 1, None)

        hpre = node.register_prehook(pre)
        hpost = node.register_hook(post)
        y.sum().backward(retain_graph=True)
        res.append((calls, x.grad.numpy().copy()))
        hpre.remove()
        hpost.remove()
        x.grad = None
        y.sum().backward()
        assert len(calls) == 2
        res.append(x.grad.numpy().copy())
    (ca, ga), ga2, (cb, gb), gb2 = res
    assert [c[0] for c in ca] == [c[0] for c in cb] == ["pre", "post"]
    for u, v in zip(ca, cb):
        assert u[1] == v[1]
        for a, b in zip(u[2:], v[2:]):
            np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(ga, gb)
    np.testing.assert_allclose(ga2, gb2)


def test_hook_returning_wrong_values_raises_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * x
        y.grad_fn.register_hook(lambda gi, go: (gi[0],))
        with pytest.raises(RuntimeError, match=r"has returned an incorrect number of values "
                                               r"\(got 1, but expected 2\)"):
            y.sum().backward()
        y = x * 3
        y.register_hook(lambda g: g[:1])
        with pytest.raises(RuntimeError, match="has changed the size of value"):
            y.sum().backward()
        y = x * 3
        y.register_hook(lambda g: g.double())
        with pytest.raises(RuntimeError, match="has changed the type of value"):
            y.sum().backward()
        y = x * 3
        y.register_hook(lambda g: (g, g))
        with pytest.raises(TypeError, match="expected Variable, but hook returned 'tuple'"):
            y.sum().backward()


def test_node_metadata_and_isinstance_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        y = lib.tensor([1.0], requires_grad=True) * 2
        assert isinstance(y.grad_fn, lib.autograd.graph.Node)
        assert isinstance(y.grad_fn.next_functions[0][0], lib.autograd.graph.Node)
        assert y.grad_fn.metadata == {}
        y.grad_fn.metadata["tag"] = 1
        assert y.grad_fn.metadata == {"tag": 1}


def test_leaf_hook_runs_for_autograd_grad_but_not_post_accumulate_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        seen, post = [], []
        x.register_hook(lambda g: seen.append(1) or g * 2)
        x.register_post_accumulate_grad_hook(lambda t: post.append(1))
        (g,) = lib.autograd.grad((x * x).sum(), x)
        assert seen == [1] and post == [] and x.grad is None
        res.append(g.numpy().copy())
    np.testing.assert_allclose(res[0], res[1])


def test_accumulate_grad_node_hooks():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    acc = y.grad_fn.next_functions[0][0]
    seen = []
    acc.register_prehook(lambda gos: seen.append(gos[0].numpy().copy()))
    y.sum().backward()
    np.testing.assert_allclose(seen[0], [2.0, 2.0])


def test_post_accumulate_grad_hook_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)

        def hook(t):
            assert t is x
            seen.append(t.grad.numpy().copy())
            with lib.no_grad():            # an optimizer step inside the hook
                t.sub_(t.grad * 0.1)

        h = x.register_post_accumulate_grad_hook(hook)
        (x * x).sum().backward()
        (x * x).sum().backward()
        h.remove()
        (x * x).sum().backward()
        assert len(seen) == 2
        res.append(seen + [x.detach().numpy().copy(), x.grad.numpy().copy()])
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v, rtol=1e-6)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on "
                                           "non-leaf tensors"):
        (tg.tensor([1.0], requires_grad=True) * 2).register_post_accumulate_grad_hook(print)


def test_saved_tensors_hooks_pack_at_save_unpack_at_backward():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        log = []

        def pack(t):
            log.append(("pack", t.shape))
            return t.detach().numpy().copy() * 1.0    # anything may stand for the tensor

        def unpack(p):
            log.append(("unpack", tuple(p.shape)))
            return lib.tensor(p)

        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = x.pow(2)
            assert [e[0] for e in log] == ["pack"]
        y.sum().backward(retain_graph=True)
        assert [e[0] for e in log] == ["pack", "unpack"]
        s = y.grad_fn._saved_self          # the accessor goes through unpack too
        assert [e[0] for e in log] == ["pack", "unpack", "unpack"]
        assert s is not x
        assert s.requires_grad and s.is_leaf   # with x's autograd identity, as in PyTorch
        np.testing.assert_allclose(s.detach().numpy(), [1.0, 2.0, 3.0])
        res.append(x.grad.numpy().copy())
        z = x.pow(2)                        # outside the context: no hooks
        z.sum().backward()
        assert len(log) == 3
    np.testing.assert_allclose(res[0], res[1])


def test_saved_tensors_hooks_unpacked_value_keeps_history_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 1
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda p: p):
            z = h.pow(2)
            w = h.exp()
        s = z.grad_fn._saved_self
        assert s is not h and s.grad_fn is h.grad_fn and not s.is_leaf
        r = w.grad_fn._saved_result
        assert r is not w and r.grad_fn is w.grad_fn
        # the leaf stand-in routes gradients into x
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda p: p):
            y = x.pow(2)
        s = y.grad_fn._saved_self
        (g,) = lib.autograd.grad(s.sum(), x)
        np.testing.assert_allclose(g.numpy(), [1.0, 1.0])


def test_saved_tensors_hooks_unpack_can_change_value():
    # what unpack returns is what backward uses
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 0 + 5):
        y = x * x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [10.0, 10.0])


def test_pack_hook_that_computes_runs_without_hooks_or_grad_vs_torch():
    # a pack hook's own ops (a cast, a copy, compression) save nothing through the hooks and
    # record no graph, as PyTorch runs them: without that, the hook packs its own saves forever
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        seen = []

        def pack(t):
            r = (t * 1).to(lib.float64)
            seen.append((r.requires_grad, lib.is_grad_enabled()))
            return r

        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, lambda p: p.to(lib.float32)):
            y = (x * x).sum()
        assert seen == [(False, False), (False, False)]
        assert lib.is_grad_enabled()
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_saved_tensors_hooks_nested_innermost_wins():
    outer, inner = [], []
    x = tg.tensor([1.0], requires_grad=True)
    with tg.autograd.graph.saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with tg.autograd.graph.saved_tensors_hooks(lambda t: inner.append(1) or t, lambda t: t):
            y = x.exp()
    y.backward()
    assert inner and not outer


def test_saved_tensors_hooks_in_custom_function():
    log = []

    class Sq(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    x = tg.tensor([3.0], requires_grad=True)
    with tg.autograd.graph.saved_tensors_hooks(lambda t: log.append("pack") or t,
                                               lambda t: log.append("unpack") or t):
        y = Sq.apply(x)
    assert log == ["pack"]
    y.sum().backward()
    assert log == ["pack", "unpack"]
    assert x.grad.item() == 6.0


def test_save_on_cpu():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([0.5, 1.5], requires_grad=True)
        with lib.autograd.graph.save_on_cpu():
            y = (x.sin() * x).exp()
        s = y.grad_fn._saved_result
        assert s.device.type == "cpu"
        y.sum().backward()
        res.append(x.grad.numpy().copy())
    # float32: sin, a product, exp, and the backward's cos, products and sum
    np.testing.assert_allclose(res[0], res[1], rtol=ulps("float32", 8))
