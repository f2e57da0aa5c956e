"""tracegrad.func against torch.func on the same functions: grad (argnums, has_aux, nested),
grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap (in_dims, out_dims, over grad),
functional_call and stack_module_state, and the per-sample-gradient recipe of PyTorch's
tutorial. Results are detached at the outermost transform, as torch.func's are."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)
X3, Y3 = rng.standard_normal(3), rng.standard_normal(3)
X43 = rng.standard_normal((4, 3))


def _leaves(t):
    if isinstance(t, (tuple, list)):
        return [y for x in t for y in _leaves(x)]
    if isinstance(t, dict):
        return [y for k in sorted(t) for y in _leaves(t[k])]
    return [t]


def same(fn, *arrays):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _leaves(fn(tg, *[tg.tensor(a) for a in arrays]))
        theirs = _leaves(fn(torch, *[torch.tensor(a) for a in arrays]))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape)
        assert not a.requires_grad and a.grad_fn is None
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def _f(L):
    return lambda x, y: (L.sin(x) * y).sum() + (x ** 3).sum()


CASES = {
    "grad": (lambda L, x, y: L.func.grad(_f(L))(x, y), (X3, Y3)),
    "grad[argnums]": (lambda L, x, y: L.func.grad(_f(L), argnums=(0, 1))(x, y), (X3, Y3)),
    "grad_and_value": (lambda L, x, y: L.func.grad_and_value(_f(L))(x, y), (X3, Y3)),
    "grad[has_aux]": (lambda L, x: L.func.grad(lambda x: (x.sin().sum(), x.cos()),
                                               has_aux=True)(x), (X3,)),
    "grad[grad]": (lambda L, x: L.func.grad(lambda x: L.func.grad(
        lambda z: (z.sin() * z).sum())(x).sum())(x), (X3,)),
    "vjp": (lambda L, x, v: L.func.vjp(lambda x: x.sin() * x, x)[1](v), (X3, Y3)),
    "jvp": (lambda L, x, v: L.func.jvp(lambda x: x.sin() * x, (x,), (v,)), (X3, Y3)),
    "jacrev": (lambda L, x: L.func.jacrev(lambda x: x.sin() * x.sum())(x), (X3,)),
    "jacfwd": (lambda L, x: L.func.jacfwd(lambda x: x.sin() * x.sum())(x), (X3,)),
    "jacrev[argnums]": (lambda L, x, y: L.func.jacrev(lambda a, b: a[:, None] * b,
                                                      argnums=(0, 1))(x, y), (X3, Y3)),
    "hessian": (lambda L, x: L.func.hessian(lambda x: (x.sin() * x).sum() * x[0])(x), (X3,)),
    "jacrev[jacrev]": (lambda L, x: L.func.jacrev(L.func.jacrev(
        lambda x: x.sin() * x.sum()))(x), (X3,)),
    "vmap": (lambda L, x, w: L.func.vmap(lambda x, w: (x * w).sum(), in_dims=(0, None))(x, w),
             (X43, Y3)),
    "vmap[in_dims 1, out_dims 1]": (lambda L, x, w: L.func.vmap(
        lambda x, w: x * w, in_dims=(1, None), out_dims=1)(x, w.sum()), (X43, Y3)),
    "vmap[grad]": (lambda L, x, w: L.func.vmap(L.func.grad(
        lambda w, x: ((x * w).sum()) ** 2), in_dims=(None, 0))(w, x), (X43, Y3)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_transform_matches_torch_func(name):
    fn, arrays = CASES[name]
    same(fn, *arrays)


def test_per_sample_gradients_with_functional_call():
    """PyTorch's recipe: vmap(grad(loss of functional_call)) over the batch."""
    def per_sample(L, model, x, t):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, xi, ti):
            out = L.func.functional_call(model, p, (xi[None],))
            return ((out - ti[None]) ** 2).mean()
        return L.func.vmap(L.func.grad(loss), in_dims=(None, 0, 0))(params, x, t)
    x, t = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    theirs = torch.nn.Linear(3, 2).double()
    ours = tg.nn.Linear(3, 2).double()
    ours.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g_ours = per_sample(tg, ours, tg.tensor(x), tg.tensor(t))
        g_theirs = per_sample(torch, theirs, torch.tensor(x), torch.tensor(t))
    for k in g_theirs:
        np.testing.assert_allclose(g_ours[k].numpy(), g_theirs[k].numpy(), rtol=1e-10, atol=1e-12)
    assert ours.weight.grad is None        # the module's own parameters untouched


def test_functional_call_restores_the_module_and_checks_keys():
    m = tg.nn.Linear(3, 2)
    w = m.weight
    out = tg.func.functional_call(m, {"weight": tg.ones(2, 3), "bias": tg.zeros(2)},
                                  (tg.ones(1, 3),))
    assert out.tolist() == [[3.0, 3.0]] and m.weight is w
    with pytest.raises(RuntimeError, match="unexpected key"):
        tg.func.functional_call(m, {"nope": tg.ones(1)}, (tg.ones(1, 3),))
    with pytest.raises(RuntimeError, match="missing key"):
        tg.func.functional_call(m, {"weight": tg.ones(2, 3)}, (tg.ones(1, 3),), strict=True)


def test_stack_module_state_and_an_ensemble():
    models = [tg.nn.Linear(3, 2) for _ in range(4)]
    params, buffers = tg.func.stack_module_state(models)
    assert {k: tuple(v.shape) for k, v in params.items()} == {"weight": (4, 2, 3), "bias": (4, 2)}
    assert params["weight"].requires_grad and params["weight"].is_leaf and buffers == {}
    x = tg.tensor(rng.standard_normal((5, 3)), dtype=tg.float32)
    base = models[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = tg.func.vmap(lambda p: tg.func.functional_call(base, p, (x,)))(params)
    for k, m in enumerate(models):
        np.testing.assert_allclose(out[k].detach().numpy(), m(x).detach().numpy(), rtol=1e-6)


def test_errors():
    with pytest.raises(RuntimeError, match="scalar"):
        tg.func.grad(lambda x: x * 2)(tg.ones(3))
    with pytest.raises(ValueError, match="same size"):
        tg.func.vmap(lambda a, b: a + b)(tg.ones(3), tg.ones(4))
