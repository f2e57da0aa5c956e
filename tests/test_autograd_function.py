"""Custom ``Function``s: ctx API, node naming, error cases; ``Variable``.

Comparisons that state no tolerance are on small integers and halves, on which every
operation here (products, sums, scaling by 2, 3, 0.5 or 10) is exact in float32: both
libraries must agree to the bit, and assert_allclose's default 1e-7 is below an ulp.
"""
import re

import numpy as np
import pytest

import tracegrad as tg

from tolerances import close, ulps


def _custom_exp(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y
    return Exp


def _custom_mul(lib, record):
    class MulConst(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, k):
            record.append(ctx.needs_input_grad)
            ctx.save_for_backward(x, w)
            ctx.k = k
            return x * w * k

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            gx = g * w * ctx.k if ctx.needs_input_grad[0] else None
            gw = g * x * ctx.k if ctx.needs_input_grad[1] else None
            return gx, gw, None
    return MulConst


def test_custom_function_forward_backward_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        Exp = _custom_exp(lib)
        x = lib.tensor([0.1, -0.5, 2.0], requires_grad=True)
        y = Exp.apply(x)
        assert type(y.grad_fn).__name__ == "ExpBackward"
        assert y.grad_fn.name() == "ExpBackward"
        assert re.match(r"<([\w.]+\.)?ExpBackward object at 0x", repr(y.grad_fn))
        assert repr(y) == repr(x.exp()).replace("ExpBackward0", "ExpBackward")
        (y * y).sum().backward()
        res.append(x.grad.numpy().copy())
    # float32: an exp, its square and the two products of the backward
    np.testing.assert_allclose(res[0], res[1], rtol=ulps("float32", 4))


def test_custom_function_grad_fn_is_ctx_with_next_functions():
    Exp = _custom_exp(tg)
    x = tg.tensor([1.0], requires_grad=True)
    y = Exp.apply(x)
    (fn, nr), = y.grad_fn.next_functions
    assert fn is x * 0 and False or type(fn).__name__ == "AccumulateGrad"
    assert fn.variable is x and nr == 0


def test_needs_input_grad_and_non_tensor_args():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        record = []
        Mul = _custom_mul(lib, record)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0])
        y = Mul.apply(x, w, 2.0)
        y.sum().backward()
        assert record[-1] == (True, False, False)
        np.testing.assert_allclose(x.grad.numpy(), [6.0, 8.0])
        assert w.grad is None


def test_custom_function_no_grad_inputs_records_nothing():
    Exp = _custom_exp(tg)
    y = Exp.apply(tg.tensor([1.0]))
    assert y.grad_fn is None and not y.requires_grad
    with tg.no_grad():
        y = Exp.apply(tg.tensor([1.0], requires_grad=True))
    assert y.grad_fn is None and not y.requires_grad


def test_mark_dirty_in_place_forward_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (torch, tg):
        class Double_(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        a = lib.tensor([1.0, 2.0], requires_grad=True)
        h = a * 1
        out = Double_.apply(h)
        assert out is h
        res.append(h._version)       # mul_ and mark_dirty each bump it in PyTorch
        assert type(h.grad_fn).__name__ == "Double_Backward"
        (out * out).sum().backward()
        res.append((out.detach().numpy().copy(), a.grad.numpy().copy()))
    assert res[0] == res[2]
    for u, v in zip(res[1], res[3]):
        np.testing.assert_allclose(u, v)


def test_mark_dirty_through_view_rebases_base_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        class Double_(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.clone()
        v = y[1:]
        assert Double_.apply(v) is v
        assert type(y.grad_fn).__name__ == "CopySlices"
        (y * y).sum().backward()
        res.append((y.detach().numpy().copy(), x.grad.numpy().copy()))
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v)


def test_mark_dirty_without_grad_bumps_version():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        class Inc_(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        t = lib.zeros(2)
        Inc_.apply(t)
        res.append(t._version)
    assert res[0] == res[1]


def test_mark_dirty_on_leaf_raises():
    class Inc(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        Inc.apply(tg.tensor([1.0], requires_grad=True))


def test_mark_non_differentiable_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        class SortLike(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                idx = x > 0
                flag = x.clone()
                ctx.mark_non_differentiable(idx, flag)
                return y, idx, flag

            @staticmethod
            def backward(ctx, gy, gidx, gflag):
                return gy * 2

        x = lib.tensor([1.0, -1.0], requires_grad=True)
        y, idx, flag = SortLike.apply(x)
        assert y.requires_grad and not idx.requires_grad and not flag.requires_grad
        assert flag.grad_fn is None
        y.sum().backward()
        res.append(x.grad.numpy().copy())
    np.testing.assert_allclose(res[0], res[1])


def test_set_materialize_grads_false_passes_none():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        seen = []

        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, materialize):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                seen.append(gb)
                out = ga * 2
                if gb is not None:
                    out = out + gb * 3
                return out, None

        for materialize in (False, True):
            x = lib.tensor([1.0, 2.0], requires_grad=True)
            a, b = Two.apply(x, materialize)
            a.sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
        assert seen[0] is None
        assert seen[1] is not None and float(seen[1].abs().sum()) == 0.0


def test_once_differentiable_double_backward_raises():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            @lib.autograd.function.once_differentiable
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x ** 2

        x = lib.tensor(2.0, requires_grad=True)
        go = lib.tensor(1.0, requires_grad=True)
        (g,) = lib.autograd.grad(Cube.apply(x), x, go, create_graph=True)
        assert g.item() == 12.0
        assert g.requires_grad and type(g.grad_fn).__name__ == "Error"
        assert g.grad_fn.name() == "torch::autograd::Error"
        with pytest.raises(RuntimeError, match="trying to differentiate twice a function that "
                                               "was marked with @once_differentiable"):
            g.backward()
        # a grad_output that needs no grad: the result is a plain tensor, as in PyTorch
        (g,) = lib.autograd.grad(Cube.apply(x), x, create_graph=True)
        assert g.item() == 12.0 and not g.requires_grad


def test_saved_second_output_double_backward_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                a, e = x * 2, x.exp()
                ctx.save_for_backward(e)        # output 1 of the node
                return a, e

            @staticmethod
            def backward(ctx, ga, ge):
                (e,) = ctx.saved_tensors
                return ga * 2 + ge * e

        x = lib.tensor([0.5, 1.0], dtype=lib.float64, requires_grad=True)
        a, e = Two.apply(x)
        assert a.grad_fn.saved_tensors[0].output_nr == 1
        (g,) = lib.autograd.grad((a + e * e).sum(), x, create_graph=True)
        (g2,) = lib.autograd.grad(g.sum(), x)
        res.append((g.detach().numpy().copy(), g2.numpy().copy()))
    for u, v in zip(*res):     # exp, products and sums, twice differentiated
        np.testing.assert_allclose(u, v, **close("float64", n_ops=8, scale=8))


def test_wrong_number_of_grads_raises():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        class Bad(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x + y

            @staticmethod
            def backward(ctx, g):
                return g

        x = lib.tensor(1.0, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients "
                                               r"\(expected 2, got 1\)"):
            Bad.apply(x, x).backward()


def test_wrong_grad_shape_raises():
    class Bad(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return tg.ones(5)

    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
        Bad.apply(tg.ones(3, requires_grad=True)).sum().backward()


def test_ctx_misuse_errors_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        class FloatGrad(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return 1.0

        class SaveInt(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g

        class DirtyNotReturned(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        class GradForConstant(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g, g

        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"expected Variable or None \(got float\)"):
            FloatGrad.apply(x).sum().backward()
        with pytest.raises(TypeError, match="save_for_backward can only save variables, but "
                                            "argument 1 is of type int"):
            SaveInt.apply(x)
        with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward "
                                               "method were not returned as output"):
            DirtyNotReturned.apply(x * 1)
        with pytest.raises(RuntimeError, match="returned a gradient different than None at "
                                               "position 2, but the corresponding forward input "
                                               "was not a Variable"):
            GradForConstant.apply(x, 2.0).sum().backward()


def test_non_tensor_and_integer_outputs_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        class Split(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, (x > 0).long(), 3

            @staticmethod
            def backward(ctx, g, gi, gk):
                return g * 2

        x = lib.tensor([1.0, -1.0], requires_grad=True)
        y, i, k = Split.apply(x)
        assert k == 3 and not i.requires_grad and y.requires_grad
        y.sum().backward()
        res.append(x.grad.numpy().copy())
    np.testing.assert_allclose(res[0], res[1])


def test_backward_can_view_an_expanded_grad():
    class Flat(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.reshape(-1)

        @staticmethod
        def backward(ctx, g):
            return g.view(2, 2)

    x = tg.ones(2, 2, requires_grad=True)
    Flat.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones((2, 2)))


def test_saved_tensors_freed_and_version_checked():
    Exp = _custom_exp(tg)
    x = tg.tensor([1.0], requires_grad=True)
    y = Exp.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.grad_fn.saved_tensors

    class Id(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    h = tg.tensor([1.0], requires_grad=True) * 1
    out = Id.apply(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_gradcheck_custom_function():
    class Sq(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * x * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 2 * x * y, g * x * x

    x = tg.randn(3, dtype=tg.float64, requires_grad=True)
    y = tg.randn(3, dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(Sq.apply, (x, y))
    assert tg.autograd.gradgradcheck(Sq.apply, (x, y))


def test_legacy_instantiation_raises():
    Exp = _custom_exp(tg)
    with pytest.raises(RuntimeError, match="non-static forward method is deprecated"):
        Exp()


def test_setup_context_style():
    class Sin(tg.autograd.Function):
        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

    x = tg.tensor([0.3, 0.9], requires_grad=True)
    Sin.apply(x).sum().backward()
    # one float32 cos against float64's, rounded
    np.testing.assert_allclose(x.grad.numpy(), np.cos([0.3, 0.9]), rtol=ulps("float32", 2))


# Variable ------------------------------------------------------------------------------

def test_variable_is_a_tensor():
    torch = pytest.importorskip("torch")
    from tracegrad.autograd import Variable
    base = tg.tensor([1.0, 2.0])
    v = Variable(base, requires_grad=True)
    assert isinstance(v, tg.Tensor) and isinstance(base, Variable)
    assert v.requires_grad and v.is_leaf
    (v * v).sum().backward()
    tv = torch.autograd.Variable(torch.tensor([1.0, 2.0]), requires_grad=True)
    (tv * tv).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy())


def test_variable_volatile_warns_and_has_no_effect():
    # PyTorch removed volatile: it warns, and the graph is recorded as without it
    from tracegrad.autograd import Variable
    with pytest.warns(UserWarning, match="volatile was removed and now has no effect"):
        v = Variable(tg.tensor([1.0, 2.0]), volatile=True)
    assert not v.requires_grad
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    y = v * w
    assert y.requires_grad and y.grad_fn is not None
    (y + 1).exp().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [np.exp(2.0), 2 * np.exp(5.0)], rtol=1e-6)
    with pytest.warns(UserWarning, match="volatile"):
        u = Variable(tg.tensor([3.0]), requires_grad=True, volatile=True)
    assert u.requires_grad


def _pass_through(lib):
    """A Function returning its input ``x`` marked non-differentiable, in ``lib``."""
    class PassThrough(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.mark_non_differentiable(x)
            return x, y * 2

        @staticmethod
        def backward(ctx, gx, gy):
            return None, gy * 2
    return PassThrough


def test_an_input_returned_and_marked_non_differentiable_stays_so():
    x = tg.ones(2, requires_grad=True)
    y = tg.ones(2, requires_grad=True)
    a, b = _pass_through(tg).apply(x, y)
    assert not a.requires_grad and a.grad_fn is None
    assert b.requires_grad
    torch = pytest.importorskip("torch")
    ta, tb = _pass_through(torch).apply(torch.ones(2, requires_grad=True),
                                        torch.ones(2, requires_grad=True))
    assert ta.requires_grad == a.requires_grad and tb.requires_grad == b.requires_grad
