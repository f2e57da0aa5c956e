"""passes/stack_steps.py: a sum of per-step GEMMs of one weight's gradient is one GEMM over
the stacked steps; checked on hand-built graphs (the rewrite, what it leaves alone) and on a
compiled RNN training step (against eager and PyTorch)."""
import numpy as np
import pytest

import tracegrad as tg
from test_simplify import _G as _Builder
from tracegrad.ir import Aval, Graph, Value, evaluate, verify
from tracegrad.passes.cse import cse
from tracegrad.passes.dce import dce
from tracegrad.passes.stack_steps import stack_steps
from tracegrad import dtypes


class _G(_Builder):
    """``test_simplify``'s hand-built graph, with float32 inputs added one by one."""

    def __init__(self):
        self.inputs, self.nodes = [], []

    def input(self, *shape):
        self.inputs.append(Value(Aval(shape, dtypes.float32)))
        return self.inputs[-1]


def _ops(graph):
    return [n.op for n in graph.nodes]


def _stacked(graph):
    return verify(dce(cse(verify(stack_steps(graph)))))


def _check_values(graph, new, rtol=1e-5):
    rng = np.random.default_rng(0)
    args = [tg.tensor(rng.standard_normal(v.shape).astype(np.float32)) for v in graph.inputs]
    for w, g in zip(evaluate(graph, args), evaluate(new, args)):
        np.testing.assert_allclose(g._data, w._data, rtol=rtol, atol=1e-5)


def _weight_grad_sum(steps, transposed, bias=False):
    """``sum_t h_t^T @ g_t`` (or its transpose, as a Linear's weight gradient is), plus
    ``sum_t sum(g_t, 0)`` with ``bias``."""
    b = _G()
    hs = [b.input(4, 3) for _ in range(steps)]
    gs = [b.input(4, 5) for _ in range(steps)]
    acc = bacc = None
    for h, g in zip(hs, gs):
        term = b("matmul", b("stop_gradient", b("permute", h, dims=(1, 0))), g)
        if transposed:
            term = b("permute", term, dims=(1, 0))
        acc = term if acc is None else b("add", term, acc)
        if bias:
            col = b("reshape", b("sum", g, dims=(0,), dtype=None, keepdim=True), shape=(5,))
            bacc = col if bacc is None else b("add", col, bacc)
    return b.graph(*([acc, bacc] if bias else [acc]))


@pytest.mark.parametrize("transposed", [False, True])
def test_per_step_products_become_one_gemm(transposed):
    graph = _weight_grad_sum(6, transposed)
    new = _stacked(graph)
    assert _ops(graph).count("matmul") == 6
    assert _ops(new) == ["cat", "cat", "permute", "matmul"]
    # the transposed sum is computed as g^T @ h: a contiguous result, no transposed copy
    stacked = [n for n in new.nodes if n.op == "cat"]
    first = graph.inputs[6:] if transposed else graph.inputs[:6]
    assert list(new.nodes[2].inputs) == [stacked[1 if transposed else 0].out]
    assert set(stacked[1 if transposed else 0].inputs) == set(first)    # in the sum's order
    assert new.outputs[0].shape == ((5, 3) if transposed else (3, 5))
    _check_values(graph, new)


def test_bias_column_sums_share_the_stacked_gradients():
    graph = _weight_grad_sum(4, True, bias=True)
    new = _stacked(graph)
    assert _ops(new).count("matmul") == 1 and _ops(new).count("sum") == 1
    assert _ops(new).count("cat") == 2          # the g's stacked once for both
    _check_values(graph, new)


def test_too_few_terms_or_shared_terms_are_left_alone():
    assert _ops(_stacked(_weight_grad_sum(2, False))).count("matmul") == 2
    graph = _weight_grad_sum(4, False)
    # a term read elsewhere too (here: a graph output) must still be computed on its own
    g = Graph(graph.inputs, graph.nodes, list(graph.outputs) + [graph.nodes[2].out])
    new = _stacked(g)
    assert _ops(new).count("matmul") == 2       # the shared term, and the other three stacked
    _check_values(g, new)


@pytest.mark.parametrize("transposed", [False, True])
def test_batched_weight_gradient_is_one_gemm(transposed):
    """``sum(a^T @ b, 0)`` over a batch (reshaped to the weight's shape, maybe transposed):
    one GEMM of the stacked rows, with no [B, M, N] temporary and no transposed copy."""
    b = _G()
    a, g = b.input(3, 4, 5), b.input(3, 4, 6)
    prod = b("matmul", b("stop_gradient", b("permute", a, dims=(0, 2, 1))), g)
    out = b("reshape", b("sum", prod, dims=(0,), dtype=None, keepdim=True), shape=(5, 6))
    if transposed:
        out = b("permute", out, dims=(1, 0))
    graph = b.graph(out)
    new = _stacked(graph)
    assert _ops(new) == ["reshape", "reshape", "permute", "matmul"]
    assert [v.shape for v in new.nodes[-1].inputs] == ([(6, 12), (12, 5)] if transposed
                                                      else [(5, 12), (12, 6)])
    _check_values(graph, new)


@pytest.mark.parametrize("transposed", [False, True])
def test_batched_weight_gradient_transposed_per_matrix_is_one_gemm(transposed):
    """The traced backward of ``x @ W.T`` over a batch: ``sum((g^T @ x)^T, 0)``, the
    transposes and a stop_gradient between the nodes, is one GEMM as well."""
    b = _G()
    a, g = b.input(3, 4, 5), b.input(3, 4, 6)
    prod = b("stop_gradient", b("matmul", b("permute", a, dims=(0, 2, 1)), g))
    summed = b("sum", b("permute", prod, dims=(0, 2, 1)), dims=(0,), dtype=None, keepdim=True)
    out = b("reshape", summed, shape=(6, 5))
    if transposed:
        out = b("permute", out, dims=(1, 0))
    graph = b.graph(out)
    new = _stacked(graph)
    assert _ops(new) == ["reshape", "reshape", "permute", "matmul"]
    assert [v.shape for v in new.nodes[-1].inputs] == ([(5, 12), (12, 6)] if transposed
                                                      else [(6, 12), (12, 5)])
    _check_values(graph, new)


def test_batched_product_reshaped_otherwise_keeps_its_transpose():
    """A reshape below the outer transpose that is not the summed matrix (here [3, 10] of a
    [6, 5] sum) is not the weight's gradient transposed: the GEMM gives the [6, 5] sum, and
    the reshape and the transpose stay."""
    b = _G()
    a, g = b.input(3, 4, 5), b.input(3, 4, 6)
    prod = b("matmul", b("permute", a, dims=(0, 2, 1)), g)
    summed = b("sum", b("permute", prod, dims=(0, 2, 1)), dims=(0,), dtype=None, keepdim=False)
    out = b("permute", b("reshape", summed, shape=(3, 10)), dims=(1, 0))
    graph = b.graph(out)
    new = _stacked(graph)
    assert _ops(new) == ["reshape", "reshape", "permute", "matmul", "reshape", "permute"]
    assert new.nodes[3].out.shape == (6, 5)
    _check_values(graph, new)


def test_batched_product_read_elsewhere_is_left_alone():
    b = _G()
    a, g = b.input(3, 4, 5), b.input(3, 4, 6)
    prod = b("matmul", b("permute", a, dims=(0, 2, 1)), g)
    out = b("sum", prod, dims=(0,), dtype=None, keepdim=False)
    graph = b.graph(out, prod)
    assert stack_steps(graph) is graph


def test_batch_times_matrix_is_one_gemm_of_the_rows():
    b = _G()
    x, w, y = b.input(3, 4, 5), b.input(5, 6), b.input(3, 5, 6)
    graph = b.graph(b("matmul", x, w), b("matmul", x, y))
    new = _stacked(graph)
    assert _ops(new) == ["reshape", "matmul", "reshape", "matmul"]
    assert [v.shape for v in new.nodes[1].inputs] == [(12, 5), (5, 6)]
    assert new.nodes[3].inputs == (x, y)        # a batch by a batch stays as it is
    _check_values(graph, new)


@pytest.mark.parametrize("steps, rows, copied", [(3, 2, True), (2, 2, False), (3, 5, False)])
def test_transposed_matrix_of_many_small_gemms_is_copied_once(steps, rows, copied):
    """``h_t @ W.T`` step after step: one copy of ``W.T`` in its own layout that every GEMM
    reads, where there are ``MIN_TERMS`` GEMMs or more and their rows are few."""
    b = _G()
    w = b.input(8, 5)
    wt = b("permute", w, dims=(1, 0))
    outs = [b("matmul", b.input(rows, 5), wt) for _ in range(steps)]
    graph = b.graph(*outs)
    new = _stacked(graph)
    clones = [n for n in new.nodes if n.op == "clone"]
    assert len(clones) == (1 if copied else 0)
    if copied:
        assert clones[0].inputs == (wt,)
        assert all(n.inputs[1] is clones[0].out for n in new.nodes if n.op == "matmul")
    _check_values(graph, new)


@pytest.mark.parametrize("bias_shape, applies", [((6,), True), ((1, 1, 6), True),
                                                 ((4, 6), False), (None, True)])
def test_bias_of_a_batch_viewed_as_rows_goes_on_the_rows(bias_shape, applies):
    """``(x @ W + bias).view(-1, N)``: the bias is added to the stacked GEMM's rows, with no
    reshape between the product, the add and the view's value (so the add can fuse into what
    reads the rows); a bias that varies along the batch too is left on the batch."""
    b = _G()
    x, w = b.input(3, 4, 5), b.input(5, 6)
    bias = 0.5 if bias_shape is None else b.input(*bias_shape)
    out = b("reshape", b("add", b("matmul", x, w), bias), shape=(12, 6))
    graph = b.graph(out)
    new = _stacked(graph)
    last = new.nodes[-1]
    if applies:
        assert last.op == "add" and last.out is out
        assert last.inputs[0].shape == (12, 6)
        assert _ops(new).count("reshape") == (2 if bias_shape == (1, 1, 6) else 1)
    else:
        assert last.op == "reshape" and _ops(new)[-2] == "add"
    _check_values(graph, new)


def _rnn_step(torch, cell, head, opt):
    def train_step(xs, y):
        opt.zero_grad()
        h = torch.zeros(4, 8)
        for x in xs.unbind(0):
            h = cell(x, h)
        loss = ((head(h) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()
    return train_step


def _rnn(torch):
    torch.manual_seed(0)
    cell, head = torch.nn.RNNCell(3, 8), torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.1)
    return cell, head, opt


def test_compiled_rnn_step_matches_eager_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    data = [(rng.standard_normal((10, 4, 3)).astype(np.float32),
             rng.standard_normal((4, 2)).astype(np.float32)) for _ in range(4)]
    runs = {}
    for label, lib, compiled in (("torch", torch, False), ("eager", tg, False),
                                 ("compiled", tg, True)):
        cell, head, opt = _rnn(lib)
        if lib is tg:       # the same initial weights as torch's
            ref = _rnn(torch)
            with tg.no_grad():
                for mine, theirs in ((cell, ref[0]), (head, ref[1])):
                    for p, q in zip(mine.parameters(), theirs.parameters()):
                        p.copy_(tg.tensor(q.detach().numpy()))
        step = _rnn_step(lib, cell, head, opt)
        step = tg.compile(step) if compiled else step
        losses = [float(step(lib.tensor(x), lib.tensor(y))) for x, y in data]
        runs[label] = (losses, [p.detach().numpy().copy() for p in cell.parameters()])
        if compiled:
            code = step._last.python_code
            # 52 GEMMs with a weight gradient's per step (30 of the forward and dh), 35 with
            # the two weights' 10 steps each stacked into one
            assert code.count("np.matmul") <= 36, code.count("np.matmul")
    for label in ("eager", "compiled"):
        np.testing.assert_allclose(runs[label][0], runs["torch"][0], rtol=1e-5)
        for got, want in zip(runs[label][1], runs["torch"][1]):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
