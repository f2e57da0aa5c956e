"""``utils.checkpoint``: both of PyTorch's variants, against the same code without a
checkpoint and against PyTorch from the same weights."""
import gc
import warnings
import weakref

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.utils.checkpoint import checkpoint, checkpoint_sequential

from tolerances import close


def _block(lib, seed=0):
    """Linear -> sin -> dropout -> Linear, with weights from a NumPy generator."""
    rng = np.random.default_rng(seed)
    lin1, lin2 = lib.nn.Linear(4, 6), lib.nn.Linear(6, 3)
    with lib.no_grad():
        for p in (*lin1.parameters(), *lin2.parameters()):
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return lin1, lin2


def _x(lib):
    return lib.tensor(np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32),
                      requires_grad=True)


@pytest.mark.parametrize("reentrant", [False, True])
def test_gradients_match_torch(reentrant):
    torch = pytest.importorskip("torch")
    got = []
    for lib in (tg, torch):
        lin1, lin2 = _block(lib)
        x = _x(lib)
        y = lib.utils.checkpoint.checkpoint(lambda a: lin2(lin1(a).sin()), x,
                                            use_reentrant=reentrant)
        (y * y).sum().backward()
        got.append([t.detach().numpy().copy() for t in
                    (y, x.grad, lin1.weight.grad, lin1.bias.grad, lin2.weight.grad)])
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, **close(np.float32, 8, scale=10))


def test_non_reentrant_is_the_ordinary_graph():
    # autograd.grad reaches the parameters the function reads, touches no other .grad,
    # and create_graph gives differentiable gradients: as without the checkpoint
    results = []
    for use in (True, False):
        lin1, lin2 = _block(tg)
        x = _x(tg)

        def fn(a):
            return lin2(lin1(a).sin())

        def run(a):
            return checkpoint(fn, a, use_reentrant=False) if use else fn(a)
        (gx,) = tg.autograd.grad(run(x).sum(), x)
        assert lin1.weight.grad is None and lin2.weight.grad is None
        (gw,) = tg.autograd.grad(run(x).sum(), lin1.weight)
        (g,) = tg.autograd.grad(run(x).pow(2).sum(), x, create_graph=True)
        g.pow(2).sum().backward()       # a gradient penalty
        results.append([t.detach().numpy().copy() for t in (gx, gw, g, lin1.weight.grad)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_non_reentrant_recomputes_in_backward_and_frees_in_forward():
    calls, kept = [], []
    lin1, lin2 = _block(tg)

    def fn(a):
        calls.append(1)
        h = lin1(a)
        kept.append(weakref.ref(h))
        return lin2(h.sin())        # sin saves h
    x = _x(tg)
    y = fn(x)
    gc.collect()
    assert kept[-1]() is not None       # without a checkpoint, the graph keeps h
    del y
    y = checkpoint(fn, x, use_reentrant=False)
    gc.collect()
    assert kept[-1]() is None and len(calls) == 2      # with one, nothing keeps it
    y.sum().backward(retain_graph=True)
    assert len(calls) == 3              # recomputed once for the whole backward
    first = x.grad.numpy().copy()
    y.sum().backward()                  # a second backward recomputes again
    assert len(calls) == 4
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)


def test_dropout_draws_the_forwards_masks_again():
    for reentrant in (False, True):
        grads = []
        for use in (True, False):
            lin1, lin2 = _block(tg)
            drop = tg.nn.Dropout(0.5)
            x = _x(tg)
            tg.manual_seed(3)

            def fn(a):
                return lin2(drop(lin1(a).sin()))
            y = checkpoint(fn, x, use_reentrant=reentrant) if use else fn(x)
            tg.rand(7)                  # the generator moves on before the backward
            y.sum().backward()
            grads.append((x.grad.numpy().copy(), lin1.weight.grad.numpy().copy()))
        for a, b in zip(*grads):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_keyword_arguments_and_warnings_as_torch():
    lin1, lin2 = _block(tg)
    x = _x(tg)
    y = checkpoint(lambda a, scale: lin2(lin1(a).sin()) * scale, x, scale=2.0,
                   use_reentrant=False)
    np.testing.assert_allclose(y.detach().numpy(),
                               (lin2(lin1(x).sin()) * 2).detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(lambda a, scale: a * scale, x, scale=2.0, use_reentrant=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        checkpoint(lambda a: a * 2, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(lambda a: a * 2, x, use_reentrant=False)


def test_a_recomputation_that_saves_otherwise_is_refused():
    x = _x(tg)
    runs = []

    def fn(a):
        runs.append(1)
        return a.sin() if len(runs) == 1 else a + 1      # saves a, then nothing
    y = checkpoint(fn, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match="A different number of tensors was saved"):
        y.sum().backward()


def test_checkpoint_sequential_both_variants():
    for reentrant in (False, True):
        tg.manual_seed(0)
        model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 8),
                                 tg.nn.Tanh(), tg.nn.Linear(8, 2))
        x = _x(tg)
        checkpoint_sequential(model, 2, x, use_reentrant=reentrant).sum().backward()
        got = [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]
        model.zero_grad()
        x.grad = None
        model(x).sum().backward()
        want = [p.grad.numpy() for p in model.parameters()] + [x.grad.numpy()]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
