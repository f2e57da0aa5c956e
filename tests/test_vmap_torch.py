"""``tracegrad.func.vmap`` against ``torch.func`` on the same functions: per-sample gradients
with DP-style clipping, an ensemble through ``stack_module_state`` and ``functional_call``,
``jacrev``/``jacfwd``/``hessian`` under vmap, vmap under the other transforms, and
composites over many primitives."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.func import vmap

from test_vmap import _mlp_loss

torch = pytest.importorskip("torch")
rng = np.random.default_rng(1)


def test_per_sample_gradients_and_clipping_match_torch_func():
    arrays = dict(W1=rng.standard_normal((4, 6)), b1=rng.standard_normal(6),
                  W2=rng.standard_normal((6, 2)), b2=rng.standard_normal(2))
    x, t = rng.standard_normal((5, 4)), rng.standard_normal((5, 2))

    def clipped(L):   # DP-SGD: clip each example's gradient to norm 1, then average
        p = {k: L.tensor(v) for k, v in arrays.items()}
        g = L.func.vmap(L.func.grad(_mlp_loss(L)), in_dims=(None, 0, 0))(p, L.tensor(x),
                                                                           L.tensor(t))
        norms = L.stack([g[k].reshape(5, -1).norm(dim=1) for k in sorted(g)]).norm(dim=0)
        scale = (1.0 / norms).clamp(max=1.0)
        return {k: (v * scale.reshape((5,) + (1,) * (v.ndim - 1))).mean(0) for k, v in g.items()}
    ours, theirs = clipped(tg), clipped(torch)
    for k in theirs:
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-10, atol=1e-12)


def test_ensemble_with_stack_module_state_matches_torch_func():
    x = rng.standard_normal((6, 3))

    def ensemble(L, seeds_state):
        models = [L.nn.Sequential(L.nn.Linear(3, 5), L.nn.ReLU(), L.nn.Linear(5, 2)).double()
                  for _ in range(4)]
        for m, sd in zip(models, seeds_state):
            m.load_state_dict({k: L.tensor(v) for k, v in sd.items()})
        params, buffers = L.func.stack_module_state(models)
        base = models[0]
        f = lambda p, b, x: L.func.functional_call(base, (p, b), (x,))   # noqa: E731
        return L.func.vmap(f, in_dims=(0, 0, None))(params, buffers, L.tensor(x))
    states = [{k: v.detach().numpy() for k, v in torch.nn.Sequential(
        torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).double()
        .state_dict().items()} for _ in range(4)]
    np.testing.assert_allclose(ensemble(tg, states).detach().numpy(),
                               ensemble(torch, states).detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd", "hessian"])
def test_jacobians_under_vmap_match_torch_func(name):
    x = rng.standard_normal((3, 4))

    def f(L):
        return lambda v: (L.sin(v) * v).sum() * v[0] + (v ** 2).sum()
    ours = vmap(getattr(tg.func, name)(f(tg)))(tg.tensor(x))
    theirs = torch.func.vmap(getattr(torch.func, name)(f(torch)))(torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


COMPOSED = {
    "jvp(vmap)": lambda L, x, v: L.func.jvp(_rowwise(L), (x,), (v,))[1],
    "jacfwd(vmap)": lambda L, x, v: L.func.jacfwd(_rowwise(L))(x),
    "jacrev(vmap)": lambda L, x, v: L.func.jacrev(_rowwise(L))(x),
    "hessian(vmap)": lambda L, x, v: L.func.hessian(lambda x: _rowwise(L)(x).sum())(x),
    "vmap(vmap(grad))": lambda L, x, v: L.func.vmap(L.func.vmap(L.func.grad(
        lambda r: (L.sin(r) ** 2).sum())))(x.reshape(3, 2, 2)),
    "vmap(grad(vmap))": lambda L, x, v: L.func.vmap(L.func.grad(lambda w: L.func.vmap(
        lambda r: (r * w).sin().sum())(x).sum()))(v),
    "vmap(vjp_fn)": lambda L, x, v: L.func.vmap(L.func.vjp(lambda a: a.sin() * a.sum(), x[0])[1])(
        v)[0],
    "vmap(jacrev) chunked": lambda L, x, v: L.func.vmap(L.func.jacrev(
        lambda r: r.tanh() * r[0], chunk_size=3))(x),
    "in_dims -1, out_dims -1": lambda L, x, v: L.func.vmap(lambda r: r.cos() * 2, in_dims=-1,
                                                          out_dims=-1)(x),
}


COMPOSITES = {   # composites over many primitives, against torch.func.vmap on (3, 4, 6)
    "T/mT/flatten/view": lambda L, x: x.mT.flatten().view(2, -1).T,
    "unbind/chunk/split": lambda L, x: L.cat([*x.unbind(1), *x.chunk(2, -1)[0].unbind(1),
                                              *x.split(3, -1)[1].unbind(1)], -1),
    "sort/topk/flip": lambda L, x: L.sort(x, -1)[0] + L.topk(x, 6, -1)[0].flip(-1),
    "max(dim)/argmax": lambda L, x: x.max(-1)[0] + x.argmax(0).to(x.dtype)[0],
    "var/std/norm": lambda L, x: x.var(-1) + x.std(0)[0] + x.norm(dim=-1),
    "logsumexp/cumsum": lambda L, x: L.logsumexp(x, 0) + L.cumsum(x, 0)[-1, :],
    "einsum": lambda L, x: L.einsum("ij,kj->ik", x, x),
    "pad": lambda L, x: L.nn.functional.pad(x, (1, 2)).sum(-1),
    "gelu/silu/softplus": lambda L, x: L.nn.functional.gelu(x) + L.nn.functional.silu(x)
    + L.nn.functional.softplus(x),
    "repeat/tile/roll": lambda L, x: x.repeat(2, 1).roll(1, 0)[:4] + L.tile(x, (1, 1)),
    "masked_fill/clamp": lambda L, x: x.masked_fill(x > 0.5, 0.0).clamp(-1, 1),
    "outer": lambda L, x: L.outer(x[0], x[1]),
    "mse/bce losses": lambda L, x: L.nn.functional.mse_loss(x, x.sin())
    + L.nn.functional.binary_cross_entropy_with_logits(x, x.sigmoid()),
}


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_composites_match_torch_func_vmap(name):
    x = rng.standard_normal((3, 4, 6))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="vmap: there is no batching rule")
        ours = vmap(lambda a: COMPOSITES[name](tg, a))(tg.tensor(x))
    theirs = torch.func.vmap(lambda a: COMPOSITES[name](torch, a))(torch.tensor(x))
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


def _rowwise(L):
    return lambda x: L.func.vmap(lambda r: L.sin(r) * r.sum())(x)


@pytest.mark.parametrize("name", list(COMPOSED))
def test_compositions_match_torch_func(name):
    x, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ours = COMPOSED[name](tg, tg.tensor(x), tg.tensor(v))
    theirs = COMPOSED[name](torch, torch.tensor(x), torch.tensor(v))
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12)


def test_grad_of_vmap_and_vmap_of_jvp_match_torch_func():
    x, w = rng.standard_normal((5, 3)), rng.standard_normal(3)

    def outer(L):
        return L.func.grad(lambda w, x: L.func.vmap(lambda xi: L.tanh(xi @ w), in_dims=(0,))(x)
                           .sum())(L.tensor(w), L.tensor(x))

    def inner(L):
        return L.func.vmap(lambda xi: L.func.jvp(L.sin, (xi,), (L.cos(xi),))[1])(L.tensor(x))
    for fn in (outer, inner):
        np.testing.assert_allclose(fn(tg).numpy(), fn(torch).detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


def test_per_sample_gradients_of_an_ensemble():
    """vmap over models of vmap over examples of grad: the inner weight is batched at the
    outer level, so the shared-weight matmul must not take it for one matrix."""
    w, x = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 4))

    def run(L):
        loss = lambda w, x: L.tanh(x @ w).sum()   # noqa: E731
        return L.func.vmap(L.func.vmap(L.func.grad(loss), in_dims=(None, 0)))(L.tensor(w),
                                                                              L.tensor(x))
    np.testing.assert_allclose(run(tg).numpy(), run(torch).numpy(), rtol=1e-10, atol=1e-12)


def _cube(L):
    """PyTorch's "Extending torch.func" example shape: a Function with setup_context and
    generate_vmap_rule, two outputs and a weight that is not mapped."""
    class Cube(L.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, w):
            return x ** 3 * w, 3 * x ** 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], inputs[1], output[1])

        @staticmethod
        def backward(ctx, g, gdx):
            x, w, dx = ctx.saved_tensors
            return g * dx * w + gdx * 6 * x, g * x ** 3
    return Cube


def test_custom_function_under_vmap_with_gradients_matches_torch():
    # its backward sees one example at a time; the weight shared by every example gets
    # their gradients' sum; nested vmaps and vmap(grad(...)) go through it too
    xs = rng.standard_normal((3, 4)).astype(np.float32)
    ws = np.full(4, 1.5, np.float32)
    got = []
    for L in (tg, torch):
        cube = _cube(L)
        x, w = L.tensor(xs, requires_grad=True), L.tensor(ws, requires_grad=True)
        y = L.func.vmap(lambda v: cube.apply(v, w)[0])(x)
        (y * y).sum().backward()
        per_example = L.func.vmap(L.func.grad(
            lambda v: cube.apply(v, L.tensor(ws))[0].sum()))(L.tensor(xs))
        x2 = L.tensor(np.stack([xs, 2 * xs]), requires_grad=True)
        nested = L.func.vmap(L.func.vmap(lambda v: cube.apply(v, L.tensor(ws))))(x2)
        (nested[0] + nested[1]).sum().backward()
        got.append([t.detach().numpy().copy() for t in (y, x.grad, w.grad, per_example,
                                                        x2.grad)])
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
