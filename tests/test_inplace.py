"""In-place ops: version counters, saved-value checks, leaf rules, views and CopySlices.

Comparisons that state no tolerance are on small integers and halves, on which every
operation here (products, sums, scaling by 2, 3, 0.5 or 10) is exact in float32: both
libraries must agree to the bit, and assert_allclose's default 1e-7 is below an ulp.
"""
import numpy as np
import pytest

import tracegrad as tg

from tolerances import close

# The programs here are float32 (float64 where they say so) and a handful of operations deep
# (an exp or a sin, a few products and sums, their backward): 8 roundings at most, each a
# few ulps apart between PyTorch's kernels and NumPy's; values of order one.
F32 = close("float32", n_ops=8)

@pytest.mark.parametrize("op", [
    lambda t: t.add_(1),
    lambda t: t.sub_(1),
    lambda t: t.mul_(2),
    lambda t: t.div_(2),
    lambda t: t.__setitem__(0, 5.0),
    lambda t: t.__setitem__(slice(1, None), tg.tensor([1.0, 2.0])),
    lambda t: t.zero_(),
    lambda t: t.fill_(3.0),
    lambda t: t.copy_(tg.tensor([7.0, 8.0, 9.0])),
    lambda t: t.clamp_(min=0.5),
    lambda t: t.relu_(),
])
def test_inplace_ops_bump_version(op):
    t = tg.tensor([1.0, -2.0, 3.0])
    v = t._version
    op(t)
    assert t._version == v + 1
    op(t)
    assert t._version == v + 2


def test_version_numbers_match_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        t = lib.tensor([1.0, -2.0, 3.0])
        seq = []
        for op in (lambda: t.add_(1), lambda: t.mul_(2), lambda: t.__setitem__(0, 1.0),
                   lambda: t.zero_(), lambda: t.fill_(1.0), lambda: t.clamp_(max=0.5),
                   lambda: t.relu_(), lambda: t.copy_(lib.ones(3))):
            op()
            seq.append(t._version)
        res.append(seq)
    assert res[0] == res[1]


def test_modified_saved_input_raises_torch_error():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (tg, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        h = a * 1
        y = h.exp() * h           # MulBackward0 saves h
        h.add_(1)
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
        msgs.append(str(info.value))
    for m in msgs:
        assert "one of the variables needed for gradient computation has been modified by an " \
               "inplace operation" in m
        assert "is at version 1; expected version 0 instead" in m
    # PyTorch's text (names the in-place op, Add), with tracegrad's type names; tracegrad adds
    # the node that saved the value
    assert "which is output 0 of Add, is at version 1" in msgs[0]
    assert "It was saved for MulBackward0." in msgs[0]
    head = msgs[0].split(" It was saved for")[0]
    assert head.replace("tracegrad", "torch") == msgs[1].split(" Hint:")[0]


@pytest.mark.parametrize("build", [
    lambda lib: (lambda y: (y.add_(1), y.mul_(y))[-1])(lib.tensor([1.0, 2.0], requires_grad=True)
                                                       * 2),
    lambda lib: (lambda y: (y.relu_(), y.exp_())[-1])(
        lib.tensor([1.0, 2.0], requires_grad=True) * 1),
    lambda lib: (lambda y: (y.exp_(), y.mul_(2))[-1])(
        lib.tensor([1.0, 2.0], requires_grad=True) * 1),
    lambda lib: (lambda h: (h * h.exp(), h.sin_())[0])(lib.tensor([1.0, 2.0], requires_grad=True)
                                                       * 1),
    lambda lib: (lambda y: (y.mul_(2), y.mul_(y.detach()))[-1])(
        lib.tensor([1.0, 2.0], requires_grad=True) * 1),
], ids=["mul_self", "relu_then_exp", "exp_then_mul", "sin_after_save", "mul_detached_self"])
def test_inplace_version_errors_match_torch(build):
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (tg, torch):
        y = build(lib)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            y.sum().backward()
        msgs.append(str(info.value))
    assert msgs[0].split(" It was saved for")[0].replace("tracegrad", "torch") == \
        msgs[1].split(" Hint:")[0]


def test_modified_saved_output_raises():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    y = a.exp()               # ExpBackward0 saves its result
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"which is output 0 of Exp, is at version 1; expected "
                                           r"version 0 instead\. It was saved for ExpBackward0"):
        y.sum().backward()


def test_modified_leaf_saved_by_pow():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        y = a ** 2
        with lib.no_grad():
            a.mul_(2)
        with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
            y.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        for op in (lambda: x.add_(1), lambda: x.__setitem__(0, 0.0), lambda: x.zero_(),
                   lambda: x.mul_(2), lambda: x.copy_(lib.zeros(2))):
            with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being "
                                                   "used in an in-place operation."):
                op()
        assert x._version == 0


def test_inplace_on_leaf_under_no_grad_is_an_optimizer_step():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        for _ in range(2):
            (w * w).sum().backward()
            with lib.no_grad():
                w.sub_(w.grad * 0.1)
                w.grad.zero_()
        assert w.is_leaf and w.requires_grad and w.grad_fn is None
        res.append(w.detach().numpy().copy())
    np.testing.assert_allclose(res[0], res[1], **F32)


def _grads(lib, build):
    x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = build(lib, x)
    y.sum().backward()
    return y.detach().numpy().copy(), x.grad.numpy().copy()


@pytest.mark.parametrize("build", [
    lambda lib, x: (lambda y: (y.add_(1), y.mul_(x), y.mul_(y.detach().clone()))[-1])(x * 2),
    lambda lib, x: (lambda y: (y.__setitem__(0, 0.0), y)[-1])(x.clone()),
    lambda lib, x: (lambda y: (y[1:].mul_(3), y)[-1])(x.clone()),
    lambda lib, x: (lambda y: (y.relu_(), y * y)[-1])(x * 1),
    lambda lib, x: (lambda y: (y.exp_(), y * 3)[-1])(x * 1),
    lambda lib, x: (lambda y: (y.clamp_(-1, 2), y * x)[-1])(x * 1),
    lambda lib, x: (lambda y: (y.__setitem__(slice(0, 2), x[1:] * x[1:]), y)[-1])(x.clone()),
    lambda lib, x: (lambda y: (y.copy_(x.sin()), y * 2)[-1])(x * 1),
    lambda lib, x: (lambda y: (y[0].zero_(), y)[-1])(x.clone()),
    lambda lib, x: (lambda y: (y[1, ...].zero_(), y)[-1])(x.clone()),
    lambda lib, x: (lambda y: (y.div_(x.exp()), y)[-1])(x * x),
    lambda lib, x: (lambda y: (y[::2].fill_(1.0), y * y)[-1])(x.clone()),
    lambda lib, x: (lambda y: (y.view(3, 1)[1:].add_(x[:2].view(2, 1)), y * x)[-1])(x * 1),
], ids=["add_mul", "setitem", "view_mul", "relu", "exp", "clamp", "setitem_tensor", "copy",
        "int_view_zero", "ellipsis_view_zero", "div", "strided_fill", "view_of_view"])
def test_inplace_on_non_leaf_gradients_vs_torch(build):
    torch = pytest.importorskip("torch")
    a, b = _grads(tg, build), _grads(torch, build)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, **F32)


def test_inplace_non_leaf_grad_fn_names_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.add_(1)
        assert type(y.grad_fn).__name__ == "AddBackward0"
        assert type(y.grad_fn.next_functions[0][0]).__name__ == "MulBackward0"
        assert y._version == 1


def test_write_through_view_gives_base_copyslices_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.clone()
        v = y[1:]
        v.mul_(3)
        assert type(y.grad_fn).__name__ == "CopySlices"
        assert y._version == v._version == 1
        (y * y).sum().backward()
        res.append((y.detach().numpy().copy(), x.grad.numpy().copy()))
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v)


def test_view_sees_base_inplace_write_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 1
        v = y[:2]
        y.mul_(x)                   # the base changes after the view was taken
        (v * 10).sum().backward()
        res.append((v.detach().numpy().copy(), x.grad.numpy().copy()))
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v)


def test_setitem_with_grad_value_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = lib.tensor(5.0, requires_grad=True)
        y = lib.zeros(3)
        y[1] = w * x[0]
        (y * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        res.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v)


def test_setitem_basic_index_grad_fn_is_copyslices_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, tg):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.clone()
        y[0] = 0.0
        assert type(y.grad_fn).__name__ == "CopySlices"
        assert y.grad_fn.name() == "torch::autograd::CopySlices"
        y = x.clone()
        y[1:] = x[:2] * 2
        assert type(y.grad_fn).__name__ == "CopySlices"


def test_inplace_on_view_of_leaf_raises():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        x[:1].add_(1)


def test_detach_shares_version_counter_data_does_not():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        d = x.detach()
        d.add_(1)
        assert x._version == 1 and d._version == 1
        np.testing.assert_allclose(x.detach().numpy(), [2.0, 3.0])   # shared storage
        x2 = lib.tensor([1.0, 2.0], requires_grad=True)
        dd = x2.data
        dd.add_(1)
        assert x2._version == 0 and dd._version == 1
        np.testing.assert_allclose(x2.detach().numpy(), [2.0, 3.0])  # shared storage
        assert not dd.requires_grad and not d.requires_grad


def test_detach_then_inplace_breaks_saved_check_data_does_not():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x ** 2
        x.detach().mul_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x ** 2
        x.data.mul_(1)          # .data hides the write from autograd
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_inplace_under_no_grad_on_non_leaf_keeps_history():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        with lib.no_grad():
            y.add_(100)
        assert type(y.grad_fn).__name__ == "MulBackward0"
        (y * 1).sum().backward()
        res.append((y.detach().numpy().copy(), x.grad.numpy().copy()))
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v)


def test_basic_index_is_a_view_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        y = lib.tensor([[1.0, 2.0], [3.0, 4.0]])
        for key in (0, (1, 1), (0, ...), (None, 1, 0)):
            v = y[key]
            assert v._base is y
            v.add_(10)
        res.append((y.numpy().copy(), y._version))
    np.testing.assert_allclose(res[0][0], res[1][0])
    assert res[0][1] == res[1][1]


def test_setitem_on_leaf_error_matches_torch():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (tg, torch):
        for key in (0, slice(1, None), [0, 1]):     # PyTorch writes a basic key through a view
            x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
            with pytest.raises(RuntimeError) as info:
                x[key] = 0.0
            msgs.append(str(info.value).split("\n")[0].split(": ", 1)[-1])
            assert x._version == 0
    assert msgs[:3] == msgs[3:]


@pytest.mark.parametrize("build", [
    lambda lib, x: (lambda y: (y.__setitem__((0, 1), x[1, 0] * 5), y.__setitem__(1, 7.0),
                               y[:, 0].mul_(2), y * x)[-1])(x * 1),
    lambda lib, x: (lambda y: (y.__setitem__((..., 1), x[:, 0].exp()), y.__setitem__(
        (slice(None), None, 0), x[:, 1:] ** 2), y)[-1])(x.clone()),
    lambda lib, x: (lambda y: (y.__setitem__(0, x[1]), y[0].mul_(x[0]), y.sin())[-1])(x * 2),
    lambda lib, x: (lambda y: (y.__setitem__(1, x.sum()), y * y)[-1])(lib.zeros(2, 2)),
    lambda lib, x: (lambda y: (y.__setitem__(0, x[None, 1] * 2), y.__setitem__(
        (slice(None), 1), x[:, 0].view(1, 1, 2)), y.__setitem__([1], x[None, :1]), y * y)[-1])(
        lib.zeros(2, 2)),
], ids=["mixed", "ellipsis_none", "row_then_inplace", "into_no_grad", "value_with_leading_1s"])
def test_basic_setitem_gradients_and_grad_fn_vs_torch(build):
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
        y = build(lib, x)
        (y * lib.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
        res.append((y.detach().numpy().copy(), x.grad.numpy().copy(), y.grad_fn.name()))
    np.testing.assert_allclose(res[0][0], res[1][0], **F32)
    np.testing.assert_allclose(res[0][1], res[1][1], **F32)
    assert res[0][2] == res[1][2]


@pytest.mark.parametrize("op", ["exp_", "relu_", "sigmoid_", "tanh_"])
def test_inplace_saving_result_packs_once_and_checks_later_writes_vs_torch(op):
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True)
        y = x * 2
        packed = []
        with lib.autograd.graph.saved_tensors_hooks(lambda t: (packed.append(t), t)[1],
                                                    lambda t: t):
            getattr(y, op)()
        assert len(packed) == 1 and packed[0]._version == 1
        y.sum().backward()
        res.append(x.grad.numpy().copy())
        y = x * 2
        getattr(y, op)()
        with lib.no_grad():
            y.add_(1)
        with pytest.raises(RuntimeError, match="is at version 2; expected version 1 instead"):
            y.sum().backward()
    np.testing.assert_allclose(res[0], res[1], **F32)


def test_retain_grad_follows_writes_through_views_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 1
        y.retain_grad()
        v = y[1:]
        v.retain_grad()
        w = y[:2]
        w.retain_grad()
        v.mul_(3)                       # y gets CopySlices, v a new view node; w goes stale
        (y * y).sum().backward(retain_graph=True)
        (w * 5).sum().backward()
        res.append([t.grad if t.grad is None else t.grad.numpy().copy() for t in (y, v, w)])
    for a, b in zip(*res):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b)


def test_setitem_into_inference_tensor_raises_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        with lib.inference_mode():
            t = lib.ones(3)
        w = lib.tensor(2.0, requires_grad=True)
        for key, value in ((0, 5.0), (slice(1, None), w), ([0], w * 1)):
            with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                                   "InferenceMode is not allowed"):
                t[key] = value
        if lib is tg:      # PyTorch raises after it has written; tracegrad before
            assert t.tolist() == [1.0, 1.0, 1.0]
