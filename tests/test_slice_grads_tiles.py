"""ops/slice_grads.py: ``index_backward_sum`` writes slices that tile the result side by
side (no zeros, no adds) and adds those that overlap or leave gaps, both equal to the sum of
the slices' ``index_backward``; in a compiled graph, ``simplify`` makes the side-by-side case
a ``cat``."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import dtypes
from tracegrad.ir import Aval, Graph, Node, Value, evaluate, infer_aval, verify
from tracegrad.ops.index_ops import build_key
from tracegrad.ops.slice_grads import _index_backward_sum_impl, _joined, _tiles
from tracegrad.passes.dce import dce
from tracegrad.passes.simplify import simplify

S = ("s", None, None, None)


def _cols(*bounds):
    return tuple((S, ("s", a, b, None)) for a, b in bounds)


def _reference(grads, specs, shape):
    out = np.zeros(shape, np.float32)
    for g, spec in zip(grads, specs):
        out[build_key(spec, ())] += g
    return out


@pytest.mark.parametrize("specs, shape, tiles", [
    (_cols((384, 512), (256, 384), (128, 256), (0, 128)), (4, 512), True),  # LSTM gates
    (tuple((k,) for k in range(5)), (5, 3), True),                           # unbind(0)
    (tuple((k,) for k in (-1, 0, 1, 2, 3)), (5, 3), True),                   # x[-1] counts
    (_cols((0, 128), (128, 256)), (4, 512), False),                          # a gap
    (_cols((0, 300), (256, 512)), (4, 512), False),                          # an overlap
    (tuple((k,) for k in (0, 1, 1, 3, 4)), (5, 3), False),                   # a repeat
    (((("s", 0, 4, 2),), (("s", 1, 4, 2),)), (4,), False),                   # steps: added
])
def test_sum_of_slices(specs, shape, tiles):
    assert _tiles(specs, shape) is tiles
    rng = np.random.default_rng(0)
    grads = []
    for spec in specs:
        view = np.empty(shape, np.float32)[build_key(spec, ())]
        grads.append(rng.standard_normal(view.shape).astype(np.float32))
    got = _index_backward_sum_impl(np, *grads, specs=specs, shape=shape)
    np.testing.assert_array_equal(got, _reference(grads, specs, shape))


@pytest.mark.parametrize("specs, shape, joined", [
    (_cols((384, 512), (256, 384), (128, 256), (0, 128)), (4, 512), (1, (3, 2, 1, 0), False)),
    (tuple((k,) for k in (2, 0, 1)), (3, 2), (0, (1, 2, 0), True)),
    (((S, 0), (S, 1)), (3, 2), (1, (0, 1), True)),
    (((0, ("s", 0, 1, None)), (0, ("s", 1, 2, None))), (1, 2), None),   # axis 0 removed too
    (((("s", 0, 2, None), S), (("s", 2, 4, None), ("s", 0, 1, None)),
      (("s", 2, 4, None), ("s", 1, 3, None))), (4, 3), None),            # two axes differ
])
def test_parts_along_one_axis_are_joined(specs, shape, joined):
    assert _tiles(specs, shape)
    assert _joined(specs, shape) == joined
    test_sum_of_slices(specs, shape, True)


def test_tiling_skips_the_zeros(monkeypatch):
    called = []
    real = np.zeros
    monkeypatch.setattr(np, "zeros", lambda *a, **k: called.append(a) or real(*a, **k))
    specs = _cols((0, 2), (2, 4))
    _index_backward_sum_impl(np, np.ones((3, 2), np.float32), np.ones((3, 2), np.float32),
                             specs=specs, shape=(3, 4))
    assert called == []


@pytest.mark.parametrize("specs, shape, parts, op", [
    (_cols((384, 512), (256, 384), (128, 256), (0, 128)), (4, 512), [(4, 128)] * 4, "cat"),
    (tuple((k,) for k in (2, 0, 1)), (3, 2), [(2,)] * 3, "stack"),
    (_cols((0, 300), (256, 512)), (4, 512), [(4, 300), (4, 256)], "index_backward_sum"),
])
def test_simplify_makes_joined_slices_a_cat(specs, shape, parts, op):
    """In a compiled graph, slices' gradients that tile side by side are one ``cat`` (``stack``
    for int indices) in the order they lie, which NumPy runs without index_backward_sum's
    general call; slices that overlap stay an ``index_backward_sum``."""
    grads = [Value(Aval(p, dtypes.float32)) for p in parts]
    params = {"specs": specs, "shape": shape}
    out = Value(infer_aval("index_backward_sum", grads, params))
    graph = verify(Graph(grads, [Node("index_backward_sum", grads, params, out)], [out]))
    new = verify(dce(simplify(graph)))
    assert [n.op for n in new.nodes] == [op]
    if op != "index_backward_sum":
        axis, order, _ = _joined(specs, shape)
        assert new.nodes[0].inputs == tuple(grads[i] for i in order)
        assert new.nodes[0].params["dim"] == axis
    rng = np.random.default_rng(1)
    args = [tg.tensor(rng.standard_normal(p).astype(np.float32)) for p in parts]
    np.testing.assert_array_equal(evaluate(new, args)[0]._data, evaluate(graph, args)[0]._data)
