"""Gradients made in their tensor's layout, as PyTorch's ``mm_mat1_backward`` and
``mm_mat2_backward`` make them: a ``Linear`` weight's gradient is ``g^T x`` (contiguous, like
the weight), not ``(x^T g)^T``, a transposed view that ``.grad`` would have to copy across the
rows (on W3's MLP those copies took a third of the training step). Eager and compiled alike."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.autograd import accumulate


@pytest.fixture
def copies(monkeypatch):
    """The gradients ``.grad`` had to copy across the rows: laid out otherwise than C order
    (one in C order is taken as it is, or copied with one pass over memory)."""
    seen = []
    real = accumulate._copy_of

    def spy(g):
        if not g._data.flags.c_contiguous:
            seen.append(g.shape)
        return real(g)
    monkeypatch.setattr(accumulate, "_copy_of", spy)
    return seen


def _linear_step(compiled):
    tg.manual_seed(0)
    lin = nn.Linear(6, 4)
    x = tg.randn(5, 6)

    def loss(x):
        return (lin(x) ** 2).sum()
    (tg.compile(loss) if compiled else loss)(x).backward()
    return lin, x


@pytest.mark.parametrize("compiled", [False, True])
def test_linear_weight_gradient_lands_without_a_transposing_copy(copies, compiled):
    lin, x = _linear_step(compiled)
    assert copies == []
    g = lin.weight.grad
    assert g.is_contiguous() and g.stride() == lin.weight.stride()
    y = x.numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    np.testing.assert_allclose(g.numpy(), (2 * y).T @ x.numpy(), rtol=1e-5, atol=1e-5)


def test_a_column_major_left_operand_gets_its_gradient_in_its_layout(copies):
    """``a = base.t()``: ``a``'s gradient is made as ``(b g^T)^T``, so ``base.grad`` is
    contiguous as it comes (PyTorch's ``mm_mat1_backward``)."""
    rng = np.random.default_rng(0)
    base = tg.tensor(rng.standard_normal((6, 5)), requires_grad=True)
    w = tg.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    (base.t() @ w).pow(2).sum().backward()
    assert copies == []
    assert base.grad.is_contiguous()
    g = 2 * (base.detach().numpy().T @ w.detach().numpy())
    np.testing.assert_allclose(base.grad.numpy(), (g @ w.detach().numpy().T).T, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), base.detach().numpy() @ g, rtol=1e-12)


def test_batched_and_double_backward_through_the_layout_rule():
    """The rule on a batch of column-major matrices, and differentiated again."""
    rng = np.random.default_rng(1)
    a = tg.tensor(rng.standard_normal((2, 4, 3)), requires_grad=True)
    b = tg.tensor(rng.standard_normal((2, 4, 5)), requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: a.transpose(1, 2) @ b, (a, b))
    assert tg.autograd.gradgradcheck(lambda a, b: a.transpose(1, 2) @ b, (a, b))
    w = tg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    x = tg.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    assert tg.autograd.gradgradcheck(lambda x, w: tg.nn.functional.linear(x, w), (x, w))
