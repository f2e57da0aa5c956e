"""The backward engine: graph structure, node names, saved values, backward/grad options.

Comparisons that state no tolerance are on small integers and halves, on which every
operation here (products, sums, scaling by 2, 3, 0.5 or 10) is exact in float32: both
libraries must agree to the bit, and assert_allclose's default 1e-7 is below an ulp.
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg

from tolerances import close, ulps


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


# graph structure -------------------------------------------------------------------

@pytest.mark.parametrize("build, name", [
    (lambda x: x + x, "AddBackward0"),
    (lambda x: x * 3, "MulBackward0"),
    (lambda x: x ** 2, "PowBackward0"),
    (lambda x: x.exp(), "ExpBackward0"),
    (lambda x: x.sin(), "SinBackward0"),
    (lambda x: x.sum(), "SumBackward0"),
])
def test_node_names_match_torch(build, name):
    torch = pytest.importorskip("torch")
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = build(x)
    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    assert type(build(xt).grad_fn).__name__ == name
    assert type(y.grad_fn).__name__ == name
    assert y.grad_fn.name() == name


def test_accumulate_grad_node_and_shared_next_functions():
    x = tg.tensor(2.0, requires_grad=True)
    y = x * x
    (a, na), (b, nb) = y.grad_fn.next_functions
    assert type(a).__name__ == "AccumulateGrad"
    assert a.name() == "torch::autograd::AccumulateGrad"   # what PyTorch's name() says
    assert a is b and na == nb == 0
    assert a.variable is x
    assert a.next_functions == ()


def test_next_functions_structure_like_torch():
    torch = pytest.importorskip("torch")

    def structure(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([3.0, 4.0])
        y = (x * c + x.exp()).sum()

        def walk(node):
            if node is None:
                return None
            return (node.name(), tuple((walk(n), nr) for n, nr in node.next_functions))
        return walk(y.grad_fn)

    assert structure(tg) == structure(torch)


def test_saved_self_is_input_for_pow():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x ** 3
    assert y.grad_fn._saved_self is x
    assert y.grad_fn._saved_exponent == 3


def test_saved_self_and_other_for_mul():
    torch = pytest.importorskip("torch")
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([3.0, 4.0], requires_grad=True)
    y = a * b
    assert y.grad_fn._saved_self is a and y.grad_fn._saved_other is b
    at = torch.tensor([1.0, 2.0], requires_grad=True)
    bt = torch.tensor([3.0, 4.0], requires_grad=True)
    yt = at * bt
    assert (yt.grad_fn._saved_self is at) == (y.grad_fn._saved_self is a)


def test_saved_result_equal_but_not_identical_for_exp():
    torch = pytest.importorskip("torch")
    x = tg.tensor([0.5, 1.0], requires_grad=True)
    y = x.exp()
    r = y.grad_fn._saved_result
    assert r is not y
    np.testing.assert_array_equal(_np(r), _np(y))     # a saved copy of the same values: exact
    xt = torch.tensor([0.5, 1.0], requires_grad=True)
    yt = xt.exp()
    assert (yt.grad_fn._saved_result is yt) == (r is y)
    assert torch.equal(yt.grad_fn._saved_result, yt)


def test_saved_values_freed_after_backward():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x ** 2
    y.sum().backward()
    with pytest.raises(RuntimeError, match="after they have already been freed"):
        y.grad_fn._saved_self


# .grad ---------------------------------------------------------------------------------

def test_leaf_grad_accumulates_across_backwards():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (x * x).sum().backward()
        (x * 3).sum().backward()
        np.testing.assert_allclose(_np(x.grad) if lib is tg else x.grad.numpy(),
                                   [5.0, 7.0, 9.0])


def test_non_leaf_grad_warns_and_is_none():
    x = tg.tensor([1.0], requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is not None     # a leaf never warns


def test_non_leaf_grad_warning_text_vs_torch():
    torch = pytest.importorskip("torch")
    texts = []
    for lib in (tg, torch):
        y = lib.tensor([1.0], requires_grad=True) * 2
        with pytest.warns(UserWarning) as rec:
            y.grad
        texts.append(str(rec[0].message))
    assert texts[1].startswith(texts[0])


def test_retain_grad_keeps_non_leaf_grad():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        y.retain_grad()
        assert y.retains_grad and not x.retains_grad
        (y * y).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res.append(y.grad.detach().numpy().copy())
    np.testing.assert_allclose(res[0], res[1])


def test_retain_grad_follows_inplace_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (torch, tg):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.mul_(3)
        y.sum().backward()
        res.append(y.grad.numpy().copy())
    np.testing.assert_allclose(res[1], res[0])


def test_grad_setter_checks_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"attempting to assign a gradient of size '\[3\]' "
                                               r"to a tensor of size '\[2\]'"):
            x.grad = lib.ones(3)
        with pytest.raises(RuntimeError, match="attempting to assign a gradient with dtype"):
            x.grad = lib.ones(2, dtype=lib.float64)
        with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None"):
            x.grad = [1.0, 2.0]
        x.grad = lib.full((2,), 3.0)
        (x * 1).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])
        x.grad = None
        assert x.grad is None


def test_second_backward_raises_then_retain_graph_works():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        np.testing.assert_allclose(x.grad.detach().numpy(), [4.0, 8.0])
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second "
                                               "time"):
            y.backward()


def test_create_graph_third_order_of_pow():
    x = tg.tensor(1.5, requires_grad=True)
    y = x ** 4
    (g1,) = tg.autograd.grad(y, x, create_graph=True)
    (g2,) = tg.autograd.grad(g1, x, create_graph=True)
    (g3,) = tg.autograd.grad(g2, x)
    assert g1.item() == pytest.approx(4 * 1.5 ** 3)
    assert g2.item() == pytest.approx(12 * 1.5 ** 2)
    assert g3.item() == pytest.approx(24 * 1.5)


def test_create_graph_third_order_of_sin_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([0.3, 1.1], dtype=lib.float64, requires_grad=True)
        y = lib.sin(x).sum()
        g1, = lib.autograd.grad(y, x, create_graph=True)
        g2, = lib.autograd.grad(g1.sum(), x, create_graph=True)
        g2.sum().backward()
        res.append((g1.detach().numpy().copy(), g2.detach().numpy().copy(),
                    x.grad.detach().numpy().copy()))
    # a sin or cos and a negation or two: a few ulps (PyTorch's vectorised sin/cos)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=ulps("float64", 4))
    np.testing.assert_allclose(res[0][2], -np.cos([0.3, 1.1]), rtol=ulps("float64", 4))


def test_create_graph_backward_grad_has_history():
    x = tg.tensor(2.0, requires_grad=True)
    (x ** 3).backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    g = x.grad
    x.grad = None
    g.backward()
    assert x.grad.item() == pytest.approx(12.0)


def test_backward_with_gradient_argument():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * x
        y.backward(gradient=lib.tensor([1.0, 0.1, 0.01]))
        res.append(x.grad.numpy().copy())
    np.testing.assert_allclose(res[0], res[1])


def test_backward_non_scalar_without_gradient_raises():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        y = lib.tensor([1.0, 2.0], requires_grad=True) * 2
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                               "outputs"):
            y.backward()


def test_backward_gradient_shape_mismatch_raises():
    y = tg.tensor([1.0, 2.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        y.backward(tg.ones(3))


def test_autograd_grad_with_grad_outputs_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([0.5, -1.0], requires_grad=True)
        y1, y2 = a * b, a.exp()
        ga, gb = lib.autograd.grad([y1, y2], [a, b],
                                   grad_outputs=[lib.tensor([1.0, 2.0]), lib.tensor([3.0, 0.5])])
        assert a.grad is None and b.grad is None
        res.append((ga.numpy().copy(), gb.numpy().copy()))
    for u, v in zip(*res):     # float32: a product and an exp times the grad_output
        np.testing.assert_allclose(u, v, rtol=ulps("float32", 4))


def test_autograd_grad_allow_unused():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        a = lib.tensor(1.0, requires_grad=True)
        b = lib.tensor(2.0, requires_grad=True)
        y = a * 3
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            lib.autograd.grad(y, [a, b], retain_graph=True)
        ga, gb = lib.autograd.grad(y, [a, b], allow_unused=True)
        assert ga.item() == 3.0 and gb is None


def test_autograd_grad_materialize_grads():
    a = tg.tensor(1.0, requires_grad=True)
    b = tg.tensor(2.0, requires_grad=True)
    ga, gb = tg.autograd.grad(a * 3, [a, b], materialize_grads=True)
    assert ga.item() == 3.0 and gb.item() == 0.0


def test_backward_inputs_only_fill_those_leaves():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        (a * b).sum().backward(inputs=[a])
        assert b.grad is None
        res.append(a.grad.numpy().copy())
        lib.autograd.backward([(a * b).sum()], inputs=[b])
        res.append(b.grad.numpy().copy())
    np.testing.assert_allclose(res[0], res[2])
    np.testing.assert_allclose(res[1], res[3])


def test_backward_inputs_non_leaf():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        h = a * 2
        (h * h).sum().backward(inputs=[h])
        assert a.grad is None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res.append(h.grad.detach().numpy().copy())
    np.testing.assert_allclose(res[0], res[1])


@pytest.mark.parametrize("deep", [False, True], ids=["one_node", "deeper"])
def test_an_input_named_twice_vs_torch(deep):
    """grad() answers every position; backward(inputs=...) accumulates once per tensor."""
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)

        def loss():     # w @ w: one node, with w on both of its edges
            return (w * w).exp().sum() if deep else w @ w
        g1, g2 = lib.autograd.grad(loss(), [w, w])
        loss().backward(inputs=[w, w])
        h = w * 3
        gh1, gw, gh2 = lib.autograd.grad((h * h).sum(), [h, w, h])
        res.append([g1, g2, w.grad, gh1, gw, gh2])
    for a, b in zip(*res):     # float32: a square, an exp (a dot of two), and their grads
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=ulps("float32", 8))


def test_backward_on_tensor_without_grad_raises():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        with pytest.raises(RuntimeError, match="does not require grad and does not have a "
                                               "grad_fn"):
            lib.tensor([1.0, 2.0]).sum().backward()


def test_grad_wrt_tensor_not_requiring_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        x = tg.tensor(1.0, requires_grad=True)
        tg.autograd.grad(x * 2, tg.tensor(1.0))


def test_diamond_graph_and_shared_leaf_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([0.2, -0.7, 1.3], dtype=lib.float64, requires_grad=True)
        a = x.sin()
        b = a * x
        c = a.exp() + b * b
        (c.sum() + (x ** 3).sum()).backward()
        res.append(x.grad.numpy().copy())
    # sin, exp, products, a cube and the backward's sums of four paths: about 16 roundings
    np.testing.assert_allclose(res[0], res[1], **close("float64", n_ops=16, scale=8))


def test_broadcast_gradients_reduce_to_input_shape():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        a = lib.tensor([[1.0], [2.0]], requires_grad=True)
        b = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (a * b).sum().backward()
        res.append((a.grad.numpy().copy(), b.grad.numpy().copy()))
    for u, v in zip(*res):
        assert u.shape == v.shape
        np.testing.assert_allclose(u, v)


# repr ----------------------------------------------------------------------------------

def test_repr_with_grad():
    x = tg.tensor([1.0], requires_grad=True)
    assert repr(x) == "tensor([1.], requires_grad=True)"
    y = tg.tensor(4.0, requires_grad=True) + 5
    assert repr(y) == "tensor(9., grad_fn=<AddBackward0>)"


def test_repr_with_grad_vs_torch():
    torch = pytest.importorskip("torch")
    for build in (lambda lib: lib.tensor([1.0], requires_grad=True),
                  lambda lib: lib.tensor(4.0, requires_grad=True) + 5,
                  lambda lib: lib.tensor([1.5, 2.0], requires_grad=True) * 2,
                  lambda lib: lib.tensor([[1.0, 2.0]], requires_grad=True).sum(),
                  lambda lib: lib.tensor([1.0, 2.0], requires_grad=True).exp()):
        assert repr(build(tg)) == repr(build(torch))


def test_grad_is_grads_batched_vs_torch():
    # each grad_output's first dimension is a batch: a Jacobian in one call, by rows
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        z = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.sin() * x
        (jac,) = lib.autograd.grad(y, x, lib.eye(3), is_grads_batched=True, retain_graph=True)
        assert tuple(jac.shape) == (3, 3)
        # two outputs, a batch of 2, create_graph: the batched gradients are differentiable
        w = (x * x).sum() * z
        gx, gz = lib.autograd.grad((y, w), (x, z), (lib.ones(2, 3), lib.ones(2, 2) * 2),
                                   is_grads_batched=True, create_graph=True)
        (ggx,) = lib.autograd.grad(gx.sum(), x, retain_graph=True)
        unused = lib.autograd.grad(y, (x, lib.ones(2, requires_grad=True)), lib.ones(4, 3),
                                   is_grads_batched=True, retain_graph=True, allow_unused=True)
        assert unused[1] is None and tuple(unused[0].shape) == (4, 3)
        with pytest.raises(RuntimeError, match="interpret the first dimension of each"):
            lib.autograd.grad(y, x, lib.ones(2, 4), is_grads_batched=True, retain_graph=True)
        with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
            lib.autograd.grad(y, x, None, is_grads_batched=True)
        res.append([_np(t) for t in (jac, gx, gz, ggx)])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, **close(np.float32, 8))
