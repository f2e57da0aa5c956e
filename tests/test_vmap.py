"""``tracegrad.func.vmap`` by batching rules: every elementwise and reduction entry of the op
table under vmap against a loop over the batch (in_dims 0 and 1, and an unbatched input),
hand-picked ops with rules of their own, one batched op per primitive (no loop), nesting,
in_dims/out_dims pytrees, chunk_size, randomness, in-place ops, errors, compile, and jacrev
as one vmapped backward over every op-table entry (``test_vmap_torch.py`` compares with
torch.func)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import _hooks
from tracegrad._vmap.rules import rule_for
from tracegrad.func import grad, vmap
from tracegrad.ops.core import PRIMITIVES

from op_table import TABLE

B = 3


def _generic(entry):
    prims = [PRIMITIVES[p] for p in entry.prims if p in PRIMITIVES]
    return prims and all(rule_for(p)[1] == "generic" and (
        p.kind in ("elementwise", "reduction") or rule_for(p)[0].__name__ == "elementwise")
        for p in prims)


GENERIC = [e for e in TABLE if _generic(e)]


def _batch(entry):
    """B samples of each input of ``entry``, stacked on a new first dim (float64)."""
    samples = [entry.sample(str(k)) for k in range(B)]
    return [np.stack([s[i] for s in samples]) for i in range(len(entry.shapes))]


def _loop(fn, arrays, dims):
    """fn per batch element, stacked: the reference vmap must equal."""
    outs = []
    for b in range(B):
        args = [tg.tensor(a if d is None else np.take(a, b, axis=d)) for a, d in zip(arrays, dims)]
        outs.append(fn(tg, *args))
    if isinstance(outs[0], tuple):
        return tuple(tg.stack([o[i] for o in outs]) for i in range(len(outs[0])))
    return tg.stack(outs)


def _check(entry, dims):
    arrays = _batch(entry)
    arrays = [a if d is None else np.moveaxis(a, 0, d) for a, d in zip(arrays, dims)]
    arrays = [a[0] if d is None else a for a, d in zip(arrays, dims)]
    want = _loop(entry.fn, arrays, dims)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="vmap: there is no batching rule")
        got = vmap(lambda *xs: entry.fn(tg, *xs), in_dims=tuple(dims))(
            *[tg.tensor(a) for a in arrays])
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)


def _batchable(entry, d):
    return all(len(s) >= d for s in entry.shapes)


@pytest.mark.parametrize("entry", GENERIC, ids=lambda e: e.name)
def test_generic_rules_against_a_loop_in_dims_0(entry):
    _check(entry, [0] * len(entry.shapes))


@pytest.mark.parametrize("entry", [e for e in GENERIC if _batchable(e, 1)], ids=lambda e: e.name)
def test_generic_rules_against_a_loop_in_dims_1(entry):
    _check(entry, [1] * len(entry.shapes))


@pytest.mark.parametrize("entry", [e for e in GENERIC if len(e.shapes) > 1], ids=lambda e: e.name)
def test_generic_rules_with_an_unbatched_input(entry):
    _check(entry, [0] * (len(entry.shapes) - 1) + [None])


def _differentiable_entries():
    out = []
    for e in TABLE:
        if e.grad and not e.out_dtype:
            out.append(e)
    return out


@pytest.mark.parametrize("entry", _differentiable_entries(), ids=lambda e: e.name)
def test_jacrev_vmaps_the_backward_of_every_op_table_entry(entry):
    """jacrev is one backward pass vmapped over the rows of the identity: every primitive
    of the entry's backward runs batched, and the Jacobian equals the loop of one VJP per
    output element (``autograd.functional.jacobian``)."""
    xs = [tg.tensor(a) for a in entry.sample()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = entry.fn(tg, *xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for k, o in enumerate(outs):     # each floating output (an index output has none)
            if not o.dtype.is_floating_point:
                continue
            f = (lambda *a, k=k: _nth(entry.fn(tg, *a), k))
            got = tg.func.jacrev(f, argnums=tuple(range(len(xs))))(*xs)
            want = tg.autograd.functional.jacobian(f, tuple(xs))
            for g, w in zip(got, want):
                assert g.shape == w.shape
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-9, atol=1e-9)


def _nth(out, k):
    return out[k] if isinstance(out, tuple) else out


def test_every_elementwise_and_reduction_primitive_has_a_generic_rule():
    for p in PRIMITIVES.values():
        if p.kind in ("elementwise", "reduction"):
            assert rule_for(p)[1] == "generic", p.name


# primitives with rules of their own ----------------------------------------------------------

rng = np.random.default_rng(0)
_IDX = np.array([[2, 0, 1], [1, 1, 0], [0, 2, 2]])
def _setitem(x, v, i=(1, 3)):
    y = x.clone()
    y[:, list(i) if isinstance(i, tuple) else i] = v if isinstance(v, float) else v[:, None]
    return y


HAND = {   # name: (fn(lib, *tensors), arrays, in_dims)
    "matmul vec@mat": (lambda L, x, w: x @ w, (rng.standard_normal((B, 4)),
                                               rng.standard_normal((4, 5))), (0, None)),
    "matmul mat@batched mat": (lambda L, x, w: x @ w, (rng.standard_normal((2, 4)),
                                                       rng.standard_normal((B, 4, 5))), (None, 0)),
    "matmul both batched": (lambda L, x, w: x @ w, (rng.standard_normal((B, 2, 4)),
                                                    rng.standard_normal((4, B))), (0, 1)),
    "matmul mat@vec": (lambda L, x, w: x @ w, (rng.standard_normal((3, 4)),
                                               rng.standard_normal((B, 4))), (None, 0)),
    "matmul vec@vec": (lambda L, x, w: x @ w, (rng.standard_normal((B, 4)),
                                               rng.standard_normal((B, 4))), (0, 0)),
    "matmul 3d@2d": (lambda L, x, w: x @ w, (rng.standard_normal((2, B, 3, 4)),
                                             rng.standard_normal((4, 2))), (1, None)),
    "linear": (lambda L, x, w, b: L.nn.functional.linear(x, w, b),
               (rng.standard_normal((B, 4)), rng.standard_normal((B, 5, 4)),
                rng.standard_normal(5)), (0, 0, None)),
    "addmm": (lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2.0),
              (rng.standard_normal((B, 2, 5)), rng.standard_normal((2, 4)),
               rng.standard_normal((B, 4, 5))), (0, None, 0)),
    "softmax": (lambda L, x: L.softmax(x, -1), (rng.standard_normal((B, 2, 5)),), (0,)),
    "log_softmax": (lambda L, x: L.log_softmax(x, 0), (rng.standard_normal((2, B, 5)),), (1,)),
    "reshape/permute/transpose": (lambda L, x: x.reshape(3, 4).t().reshape(-1, 2).permute(1, 0),
                                  (rng.standard_normal((B, 12)),), (0,)),
    "unsqueeze/squeeze/expand": (lambda L, x: x.unsqueeze(0).expand(3, 4).squeeze(),
                                 (rng.standard_normal((4, B)),), (1,)),
    "cat/stack": (lambda L, x, y: L.stack([L.cat([x, y], -1), L.cat([y, x], 1)]),
                  (rng.standard_normal((B, 2, 3)), rng.standard_normal((2, 3))), (0, None)),
    "index basic": (lambda L, x: x[1:, None, ::2], (rng.standard_normal((B, 3, 5)),), (0,)),
    "index tensor": (lambda L, x, i: x[i, 1:], (rng.standard_normal((3, 4, B)),
                                                np.array([2, 0, 2])), (2, None)),
    "index batched tensor": (lambda L, x, i: x[:, i], (rng.standard_normal((B, 3, 4)),
                                                       _IDX), (0, 0)),
    "select/narrow": (lambda L, x: x.select(1, 2) + x.narrow(1, 0, 1).squeeze(1),
                      (rng.standard_normal((B, 3, 4)),), (0,)),
    "gather": (lambda L, x, i: L.gather(x, 1, i), (rng.standard_normal((B, 3, 4)),
                                                   _IDX), (0, None)),
    "index_select": (lambda L, x, i: L.index_select(x, 1, i),
                     (rng.standard_normal((B, 3, 4)), np.array([3, 0])), (0, None)),
    "embedding": (lambda L, i, w: L.nn.functional.embedding(i, w),
                  (_IDX, rng.standard_normal((3, 4))), (0, None)),
    "embedding ensemble": (lambda L, i, w: L.nn.functional.embedding(i, w),
                           (_IDX[0], rng.standard_normal((B, 3, 4))), (None, 0)),
    "conv2d": (lambda L, x, w: L.nn.functional.conv2d(x, w, padding=1),
               (rng.standard_normal((B, 2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))),
               (0, None)),
    "conv2d ensemble": (lambda L, x, w: L.nn.functional.conv2d(x, w, stride=2),
                        (rng.standard_normal((B, 2, 3, 5, 5)),
                         rng.standard_normal((B, 4, 3, 3, 3))), (0, 0)),
    "conv1d weight only": (lambda L, x, w: L.nn.functional.conv1d(x, w),
                           (rng.standard_normal((2, 3, 7)), rng.standard_normal((B, 4, 3, 3))),
                           (None, 0)),
    "max_pool2d": (lambda L, x: L.nn.functional.max_pool2d(x, 2),
                   (rng.standard_normal((B, 2, 3, 4, 4)),), (0,)),
    "avg_pool2d unbatched example": (lambda L, x: L.nn.functional.avg_pool2d(x, 2),
                                     (rng.standard_normal((B, 3, 4, 4)),), (0,)),
    "cumsum/tril": (lambda L, x: L.tril(L.cumsum(x, -1)), (rng.standard_normal((B, 4, 4)),),
                    (0,)),
    "where": (lambda L, c, x: L.where(c > 0, x, 0.0), (rng.standard_normal((B, 4)),
                                                       rng.standard_normal(4)), (0, None)),
    "layer_norm": (lambda L, x, w: L.nn.functional.layer_norm(x, (4,), w),
                   (rng.standard_normal((B, 2, 4)), rng.standard_normal(4)), (0, None)),
    "cross_entropy": (lambda L, x, y: L.nn.functional.cross_entropy(x, y),
                      (rng.standard_normal((B, 2, 3)), _IDX[:, :2]), (0, 0)),
    "det": (lambda L, x: L.linalg.det(x), (rng.standard_normal((B, 3, 3)),), (0,)),
    "solve vector": (lambda L, a, b: L.linalg.solve(a, b), (rng.standard_normal((B, 3, 3)),
                                                          rng.standard_normal(3)), (0, None)),
    "solve matrix": (lambda L, a, b: L.linalg.solve(a, b), (rng.standard_normal((3, 3)),
                                                          rng.standard_normal((3, 2, B))),
                     (None, 2)),
    "lu_factor": (lambda L, a: L.linalg.lu_factor(a)[0], (rng.standard_normal((B, 3, 3)),),
                  (0,)),
    "isin": (lambda L, x, y: L.isin(x, y), (_IDX, np.array([0, 2])), (0, None)),
    "setitem": (lambda L, x, v: _setitem(x, v), (rng.standard_normal((B, 3, 4)),
                                                 rng.standard_normal((3, B))), (0, 1)),
    "setitem by a batched index": (lambda L, x, i: _setitem(x, 0.5, i),
                                   (rng.standard_normal((B, 3, 4)), _IDX[:, :2]), (0, 0)),
}


@pytest.mark.parametrize("name", list(HAND))
def test_own_rules_against_a_loop(name):
    fn, arrays, dims = HAND[name]
    want = [fn(tg, *[tg.tensor(a if d is None else np.take(a, b, axis=d))
                     for a, d in zip(arrays, dims)]) for b in range(B)]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="vmap: there is no batching rule")
        got = vmap(lambda *xs: fn(tg, *xs), in_dims=dims)(*[tg.tensor(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), tg.stack(want).numpy(), rtol=1e-12, atol=1e-12)


def _bind_count(fn, *args):
    """How many primitives run below vmap's hook for fn(*args)."""
    seen = []

    def count(prim, a, params, inner):
        seen.append(prim.name)
        return inner(prim, a, params)
    with _hooks.bind_hook_installed(count):
        fn(*args)
    return seen


def test_one_batched_op_per_primitive_whatever_the_batch_size():
    w1, w2 = tg.randn(4, 8), tg.randn(8, 2)
    f = vmap(grad(lambda w, x: (tg.tanh(x @ w1 @ w) ** 2).sum()), in_dims=(None, 0))
    small, large = _bind_count(f, w2, tg.randn(2, 4)), _bind_count(f, w2, tg.randn(50, 4))
    assert small == large and "matmul" in small


def test_fallback_loops_with_one_warning_naming_the_primitive():
    x = tg.rand(B, 5)
    with pytest.warns(UserWarning, match="no batching rule for the primitive 'histc'"):
        got = vmap(lambda x: tg.histc(x, bins=4, min=0, max=1))(x)
    want = tg.stack([tg.histc(x[b], bins=4, min=0, max=1) for b in range(B)])
    assert got.tolist() == want.tolist()


# the transform -------------------------------------------------------------------------------

def test_nested_vmap_and_in_dims_out_dims_pytrees():
    x, y = tg.randn(2, 3, 4), tg.randn(3, 4)
    got = vmap(vmap(lambda a, b: a * b + a.sum()), in_dims=(0, None))(x, y)
    want = x * y + x.sum(-1, keepdim=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    got = vmap(lambda d: {"s": d["a"] + d["b"][0], "m": d["a"].max()},
               in_dims=({"a": 1, "b": (None,)},), out_dims={"s": 1, "m": 0})(
        {"a": x, "b": (y[0],)})
    np.testing.assert_allclose(got["s"].numpy(), (x + y[0]).numpy(), rtol=1e-6)
    np.testing.assert_allclose(got["m"].numpy(), x.amax((0, 2)).numpy())
    pair = vmap(lambda a: (a, a.sum()), out_dims=(1, 0))(y)
    assert pair[0].shape == (4, 3) and pair[1].shape == (3,)


def test_unbatched_output_is_expanded_and_chunk_size_joins():
    x = tg.randn(7, 3)
    out = vmap(lambda a: tg.ones(2), out_dims=0)(x)
    assert out.shape == (7, 2)
    f = lambda a: (a.sin() * 2, a.sum())   # noqa: E731
    whole, chunked = vmap(f)(x), vmap(f, chunk_size=3)(x)
    for w, c in zip(whole, chunked):
        assert c.shape == w.shape
        np.testing.assert_allclose(c.numpy(), w.numpy())


def test_randomness():
    x = tg.zeros(4, 3)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: a + tg.rand(3))(x)
    same = vmap(lambda a: a + tg.rand(3), randomness="same")(x)
    assert all(same[i].tolist() == same[0].tolist() for i in range(4))
    diff = vmap(lambda a: a + tg.rand(3), randomness="different")(x)
    assert len({tuple(r) for r in diff.tolist()}) == 4
    drop = vmap(lambda a: tg.nn.functional.dropout(a + 1, 0.5), randomness="different")(
        tg.zeros(64, 32))
    assert len({tuple(r) for r in drop.tolist()}) == 64


def test_inplace_ops():
    x = tg.randn(4, 3)
    got = vmap(lambda a: a.clone().mul_(2).add_(a))(x)
    np.testing.assert_allclose(got.numpy(), (3 * x).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="vmapped over but `self`"):
        vmap(lambda a: tg.zeros(3).add_(a))(x)


def test_errors():
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap(lambda a, b: a + b)(tg.ones(3), tg.ones(4))
    with pytest.raises(ValueError, match="in_dim=2"):
        vmap(lambda a: a, in_dims=2)(tg.ones(3, 2))
    with pytest.raises(ValueError, match="non-Tensor"):
        vmap(lambda a, n: a * n)(tg.ones(3), 2)
    with pytest.raises(ValueError, match="out_dims=None"):
        vmap(lambda a: a, out_dims=None)(tg.ones(3))
    with pytest.raises(ValueError, match="must only return Tensors"):
        vmap(lambda a: 1)(tg.ones(3))
    with pytest.raises(RuntimeError, match=r"\.item\(\)"):
        vmap(lambda a: a.sum().item())(tg.ones(3, 2))
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda a: a, randomness="nope")
    kept = []
    vmap(lambda a: kept.append(a * 2) or a)(tg.ones(3, 2))
    with pytest.raises(RuntimeError, match="outside the vmap call that made it"):
        vmap(lambda a: a + kept[0])(tg.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"backward\(\) of a batched tensor"):
        vmap(lambda a: (a * tg.ones(2, requires_grad=True)).sum().backward())(tg.ones(3, 2))


def _mlp_loss(L):
    def loss(p, x, t):
        h = L.tanh(x @ p["W1"] + p["b1"])
        return ((h @ p["W2"] + p["b2"] - t) ** 2).mean()
    return loss


def test_compile_of_vmap_grad_is_one_graph_equal_to_eager():
    p = {"W1": tg.randn(4, 6), "b1": tg.randn(6), "W2": tg.randn(6, 2), "b2": tg.randn(2)}
    x, t = tg.randn(8, 4), tg.randn(8, 2)
    f = vmap(grad(_mlp_loss(tg)), in_dims=(None, 0, 0))
    eager = f(p, x, t)
    c = tg.compile(f)
    for _ in range(2):
        got = c(p, x, t)
    assert c.stats["compiles"] == 1 and c.stats["cache_hits"] == 1 and not c.stats["fallbacks"]
    assert "fused" in c.graph
    for k in eager:
        assert got[k].shape == (8,) + tuple(p[k].shape)
        np.testing.assert_allclose(got[k].numpy(), eager[k].numpy(), rtol=1e-5, atol=1e-6)


def test_a_compiled_function_under_vmap_runs_by_the_rules():
    f = tg.compile(lambda x: (x.sin() * 2).sum())
    x = tg.randn(4, 3)
    f(x[0])
    np.testing.assert_allclose(vmap(f)(x).numpy(), (x.sin() * 2).sum(1).numpy(), rtol=1e-6)


def test_autograd_grad_inside_vmap_gives_per_example_gradients():
    x = tg.randn(4, 3)

    def f(r):
        r = r.detach().requires_grad_(True)
        (g,) = tg.autograd.grad((r ** 3).sum(), r)
        return g
    np.testing.assert_allclose(vmap(f)(x).numpy(), (3 * x ** 2).numpy(), rtol=1e-6)
