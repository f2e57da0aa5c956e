"""Every entry of the op table, compiled against eager: values, gradients and
second derivatives, in float64 and float32, and a second call from the cache."""
import numpy as np
import pytest

import tracegrad as tg

from op_table import TABLE

# every test here runs on the NumPy tier and again on the C tier (conftest's backend)
pytestmark = pytest.mark.usefixtures("backend")


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _weights(outs, rng):
    return [tg.tensor(rng.standard_normal(o.shape), dtype=o.dtype) if o.is_floating_point()
            else None for o in outs]


def _loss(outs, weights):
    terms = [(o * w).sum() for o, w in zip(outs, weights)
             if w is not None and o.requires_grad]
    return sum(terms[1:], terms[0]) if terms else None


def _run(fn, arrays, dtype, grad, create_graph=False):
    ts = [tg.tensor(a, dtype=dtype, requires_grad=grad) for a in arrays]
    outs = _outs(fn(*ts))
    rng = np.random.default_rng(0)
    weights = _weights(outs, rng)
    grads = []
    loss = _loss(outs, weights) if grad else None
    if loss is not None:
        grads = tg.autograd.grad(loss, ts, allow_unused=True, create_graph=create_graph)
    return outs, grads, ts


def _close(a, b, dtype, what):
    tol = dict(rtol=1e-10, atol=1e-12) if dtype is tg.float64 else dict(rtol=2e-5, atol=1e-6)
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}{a.dtype} vs {b.shape}{b.dtype}"
    np.testing.assert_allclose(a, b, equal_nan=True, err_msg=what, **tol)


def _val(t):
    return None if t is None else t.detach().cpu()._data


@pytest.mark.parametrize("dtype", [tg.float64, tg.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("e", TABLE, ids=[e.name for e in TABLE])
def test_compiled_matches_eager(e, dtype):
    arrays = e.sample()
    compiled = tg.compile(lambda *ts: e.fn(tg, *ts))
    want, want_g, _ = _run(lambda *ts: e.fn(tg, *ts), arrays, dtype, e.grad)
    for call in range(2):       # the second call runs from the cache
        got, got_g, _ = _run(compiled, arrays, dtype, e.grad)
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want)):
            _close(_val(a), _val(b), dtype, f"{e.name} output {k} (call {call})")
            assert a.requires_grad == b.requires_grad, f"{e.name}: requires_grad of output {k}"
        for k, (a, b) in enumerate(zip(got_g, want_g)):
            assert (a is None) == (b is None), f"{e.name}: grad {k} exists"
            if a is not None:
                _close(_val(a), _val(b), dtype, f"{e.name} grad {k} (call {call})")
    if e.name in DATA_DEPENDENT:    # the graph ends there: the function runs eagerly
        assert compiled.stats["compiles"] == 0 and "depends on the values" in compiled.explain()
    else:
        assert compiled.stats["compiles"] == 1 and compiled.stats["cache_hits"] == 1


# entries whose result's size depends on the data (ops/data_dependent.py)
DATA_DEPENDENT = {"getitem[mask]", "masked_select[broadcast]", "repeat_interleave[tensor]"}


@pytest.mark.parametrize("e", [e for e in TABLE if e.grad and e.gradgrad],
                         ids=[e.name for e in TABLE if e.grad and e.gradgrad])
def test_compiled_double_backward(e):
    """Gradients of a compiled function taken with create_graph are differentiable again."""
    arrays = e.sample()
    compiled = tg.compile(lambda *ts: e.fn(tg, *ts))
    results = []
    for fn in (lambda *ts: e.fn(tg, *ts), compiled):
        outs, grads, ts = _run(fn, arrays, tg.float64, True, create_graph=True)
        live = [g for g in grads if g is not None and g.requires_grad]
        if not live:
            results.append(None)
            continue
        total = sum(((g * g).sum() for g in live[1:]), (live[0] * live[0]).sum())
        results.append(tg.autograd.grad(total, ts, allow_unused=True))
    if results[0] is None or results[1] is None:
        # a gradient that does not depend on the inputs (relu's): eager's is PyTorch's
        # threshold_backward node, whose derivative is zeros; compiled, it has no graph
        for r in results:
            assert r is None or all(g is None or not _val(g).any() for g in r), e.name
        return
    for k, (a, b) in enumerate(zip(results[1], results[0])):
        assert (a is None) == (b is None)
        if a is not None:
            _close(_val(a), _val(b), tg.float64, f"{e.name} second-order grad {k}")
