"""PyTorch's backward node names, for what programs and tutorials print.

``loss.grad_fn`` and walks over ``next_functions`` reach the same node names, in the same
order, as PyTorch's on CPU for ``Linear``, ``Embedding``, the convolutions, ``LSTM`` and the
common losses and layers. A composite shown as one node (``ops/collapse.py``) must keep its
gradients, second derivatives, ``retain_graph`` and in-place checks exactly as before: those
are checked here against PyTorch too.
"""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")


def walk(t, depth=6):
    """Node names, depth first in ``next_functions`` order; PyTorch lists an input that
    needs no gradient as ``None`` where it is an input of the op's derivative formula, which
    is not the same set in both libraries, so ``None`` edges are left out."""
    out = []

    def visit(fn, d):
        if fn is None or d > depth:
            return
        out.append("  " * d + type(fn).__name__)
        for nxt, _ in fn.next_functions:
            visit(nxt, d + 1)
    visit(t.grad_fn, 0)
    return out


def _seeded(lib, seed=0):
    lib.manual_seed(seed)
    return lib


def _inputs(lib, *shapes, grad=True, seed=1, dtype=None):
    dtype = dtype or lib.float64
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal(s), dtype=dtype, requires_grad=grad)
            for s in shapes]


# the cases: fn(lib) -> the tensor whose walk is compared ------------------------------------

def _layer(make, *shapes, grad=False, out=lambda y: y, dtype="float64"):
    def case(lib):
        return out(make(lib.nn)(*_inputs(lib, *shapes, grad=grad, dtype=getattr(lib, dtype))))
    return case


def _lstm(out, **kw):
    # float32: PyTorch's CPU LSTM is one fused layer node for it (float64 runs step by step)
    return _layer(lambda nn: nn.LSTM(3, 4, **kw).float(),
                  (2, 5, 3) if kw.get("batch_first") else (5, 2, 3), out=out, dtype="float32")


def _loss(name, target, **kw):
    def case(lib):
        x, = _inputs(lib, (4, 3))
        t = target(lib)
        return getattr(lib.nn.functional, name)(x, t, **kw)
    return case


def _probs(lib):
    return lib.softmax(lib.tensor(np.random.default_rng(2).standard_normal((4, 3))), 1)


def _labels(lib):
    return lib.tensor([0, 2, 1, 2])


CASES = {
    "linear 2d": _layer(lambda nn: nn.Linear(4, 3).double(), (2, 4)),
    "linear 2d, input requires grad": _layer(lambda nn: nn.Linear(4, 3).double(), (2, 4),
                                             grad=True),
    "linear 3d": _layer(lambda nn: nn.Linear(4, 3).double(), (2, 5, 4)),
    "linear 3d, input requires grad": _layer(lambda nn: nn.Linear(4, 3).double(), (2, 5, 4),
                                             grad=True),
    "linear 1d": _layer(lambda nn: nn.Linear(4, 3).double(), (4,)),
    "linear no bias": _layer(lambda nn: nn.Linear(4, 3, bias=False).double(), (2, 4)),
    "linear no bias 3d": _layer(lambda nn: nn.Linear(4, 3, bias=False).double(), (2, 5, 4)),
    "embedding": lambda lib: lib.nn.Embedding(10, 3)(lib.tensor([[1, 2], [3, 9]])),
    "embedding padding_idx": lambda lib: lib.nn.Embedding(5, 3, padding_idx=0)(
        lib.tensor([0, 1])),
    "conv1d": _layer(lambda nn: nn.Conv1d(2, 3, 3).double(), (1, 2, 5)),
    "conv2d": _layer(lambda nn: nn.Conv2d(2, 3, 3).double(), (1, 2, 5, 5)),
    "conv2d, input requires grad": _layer(lambda nn: nn.Conv2d(2, 3, 3).double(), (1, 2, 5, 5),
                                          grad=True),
    "conv2d no bias": _layer(lambda nn: nn.Conv2d(2, 3, 3, bias=False).double(), (1, 2, 5, 5)),
    "conv3d": _layer(lambda nn: nn.Conv3d(2, 3, 3).double(), (1, 2, 5, 5, 5)),
    "conv_transpose2d": _layer(lambda nn: nn.ConvTranspose2d(2, 3, 3).double(), (1, 2, 5, 5)),
    "lstm output": _lstm(lambda r: r[0]),
    "lstm h_n": _lstm(lambda r: r[1][0]),
    "lstm c_n": _lstm(lambda r: r[1][1]),
    "lstm batch_first output": _lstm(lambda r: r[0], batch_first=True),
    "lstm 2 layers output": _lstm(lambda r: r[0], num_layers=2),
    "lstm 2 layers h_n": _lstm(lambda r: r[1][0], num_layers=2, batch_first=True),
    "mse_loss": _loss("mse_loss", lambda lib: lib.zeros(4, 3, dtype=lib.float64)),
    "l1_loss": _loss("l1_loss", lambda lib: lib.zeros(4, 3, dtype=lib.float64)),
    "cross_entropy": _loss("cross_entropy", _labels),
    "cross_entropy reduction=none": _loss("cross_entropy", _labels, reduction="none"),
    "nll_loss of log_softmax": lambda lib: lib.nn.functional.nll_loss(
        lib.nn.functional.log_softmax(_inputs(lib, (4, 3))[0], 1), _labels(lib)),
    "binary_cross_entropy": lambda lib: lib.nn.functional.binary_cross_entropy(
        lib.sigmoid(_inputs(lib, (4, 3))[0]), _probs(lib).double()),
    "binary_cross_entropy_with_logits": _loss("binary_cross_entropy_with_logits",
                                              lambda lib: _probs(lib).double()),
    "smooth_l1_loss": _loss("smooth_l1_loss", lambda lib: lib.zeros(4, 3, dtype=lib.float64)),
    "huber_loss": _loss("huber_loss", lambda lib: lib.zeros(4, 3, dtype=lib.float64)),
    "kl_div": lambda lib: lib.nn.functional.kl_div(
        lib.nn.functional.log_softmax(_inputs(lib, (4, 3))[0], 1), _probs(lib).double(),
        reduction="batchmean"),
    "layer_norm": _layer(lambda nn: nn.LayerNorm(3).double(), (4, 3), grad=True),
    "batch_norm": _layer(lambda nn: nn.BatchNorm2d(3).double(), (2, 3, 4, 4), grad=True),
    "batch_norm eval": _layer(lambda nn: nn.BatchNorm1d(3).double().eval(), (4, 3)),
    "gelu": lambda lib: lib.nn.functional.gelu(_inputs(lib, (4, 3))[0]),
    "softmax": lambda lib: lib.softmax(_inputs(lib, (4, 3))[0], 1),
    "mean over a dim": lambda lib: _inputs(lib, (4, 3))[0].mean(1),
    "stack": lambda lib: lib.stack(_inputs(lib, (2,), (2,)), 1),
    "transpose and t": lambda lib: _inputs(lib, (2, 3))[0].t().transpose(0, 1),
    "addmm": lambda lib: lib.addmm(*_inputs(lib, (3,), (2, 4), (4, 3))),
    "cross_entropy label_smoothing": _loss("cross_entropy", _labels, label_smoothing=0.1),
    "cross_entropy label_smoothing, sum": _loss("cross_entropy", _labels,
                                                label_smoothing=0.2, reduction="sum"),
    "cross_entropy label_smoothing, weight": lambda lib: lib.nn.functional.cross_entropy(
        _inputs(lib, (4, 3))[0], _labels(lib), weight=lib.tensor([1., 2., 3.],
                                                                 dtype=lib.float64),
        label_smoothing=0.1),
    "sum over a dim": lambda lib: _inputs(lib, (4, 3))[0].sum(1),
    "sum over dims, then all": lambda lib: _inputs(lib, (4, 3))[0].sum((0, 1)).sum(),
    "masked_fill by a number": lambda lib: _inputs(lib, (4, 3))[0].masked_fill(
        lib.tensor([[True, False, True]]), 0.0),
    "masked_fill by a tensor": lambda lib: _inputs(lib, (4, 3))[0].masked_fill(
        lib.tensor([[True, False, True]]), lib.tensor(2.0, dtype=lib.float64)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_node_walk_matches_torch(name):
    got = walk(CASES[name](_seeded(tg)))
    want = walk(CASES[name](_seeded(torch)))
    assert got == want


def test_names_print_as_pytorchs():
    """What tutorials print: the repr of ``grad_fn`` and of a leaf's node."""
    lin = tg.nn.Linear(4, 3)
    loss = tg.nn.functional.mse_loss(lin(tg.randn(2, 4)), tg.randn(2, 3))
    assert repr(loss.grad_fn).startswith("<MseLossBackward0 object at")
    addmm = loss.grad_fn.next_functions[0][0]
    assert addmm.name() == "AddmmBackward0"
    assert [f.name() if f else None for f, _ in addmm.next_functions] == [
        "torch::autograd::AccumulateGrad", None, "TBackward0"]


def test_profiler_reports_the_same_backward_names():
    lin = tg.nn.Linear(4, 3)
    with tg.profiler.profile() as prof:
        tg.nn.functional.mse_loss(lin(tg.randn(2, 4)), tg.randn(2, 3)).backward()
    keys = {e.key for e in prof.key_averages()}
    assert {"MseLossBackward0", "AddmmBackward0", "TBackward0"} <= keys


# the collapsed nodes keep their mathematics --------------------------------------------------

GRAD_CASES = {
    "mse_loss": lambda lib, x, y, w, b: lib.nn.functional.mse_loss(x @ w + b, y),
    "cross_entropy": lambda lib, x, y, w, b: lib.nn.functional.cross_entropy(
        x @ w + b, lib.tensor([0, 2, 1, 2])),
    "layer_norm": lambda lib, x, y, w, b: lib.nn.functional.layer_norm(x * y, (3,), b, b),
    "gelu, softmax, mean": lambda lib, x, y, w, b: lib.softmax(
        lib.nn.functional.gelu(x * y), 1).mean(0),
    "linear": lambda lib, x, y, w, b: lib.nn.functional.linear(x, w.T, b) * y,
    "linear 3d": lambda lib, x, y, w, b: lib.nn.functional.linear(
        x.reshape(2, 2, 3), w.T, b).reshape(4, 3) * y,
    "embedding": lambda lib, x, y, w, b: lib.nn.functional.embedding(
        lib.tensor([[1, 2], [2, 0]]), x * y, padding_idx=0, scale_grad_by_freq=True),
    "bce_with_logits and smooth_l1": lambda lib, x, y, w, b: (
        lib.nn.functional.binary_cross_entropy_with_logits(x, lib.sigmoid(y))
        + lib.nn.functional.smooth_l1_loss(x @ w, y, beta=0.5)),
    "mse_loss of one tensor twice": lambda lib, x, y, w, b: lib.nn.functional.mse_loss(x, x * 2),
    "batch_norm, training": lambda lib, x, y, w, b: lib.nn.functional.batch_norm(
        x * y, lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64), w[0], b,
        training=True),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradients_and_second_derivatives_match_torch(name):
    results = []
    for lib in (torch, tg):
        x, y, w, b = _inputs(lib, (4, 3), (4, 3), (3, 3), (3,), seed=5)
        out = GRAD_CASES[name](lib, x, y, w, b)
        weights = lib.tensor(np.random.default_rng(6).uniform(0.5, 1.5, tuple(out.shape)),
                             dtype=lib.float64)
        grads = lib.autograd.grad((out * weights).sum(), (x, y, w, b), create_graph=True,
                                  allow_unused=True)
        live = [g for g in grads if g is not None]
        total = sum((g * g).sum() for g in live)
        second = lib.autograd.grad(total, (x, y, w, b), allow_unused=True)
        results.append([out] + list(grads) + list(second))
    for k, (t, g) in enumerate(zip(*results)):
        assert (t is None) == (g is None), k
        if t is not None:
            np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=1e-9,
                                       atol=1e-11, err_msg=f"{name}: result {k}")


def test_a_collapsed_node_frees_its_graph_and_keeps_retain_graph():
    x = tg.randn(4, 3, dtype=tg.float64, requires_grad=True)
    loss = tg.nn.functional.mse_loss(x, tg.zeros(4, 3, dtype=tg.float64))
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_an_input_changed_in_place_after_a_collapsed_op_is_caught():
    x = tg.randn(4, 3, dtype=tg.float64, requires_grad=True)
    h = x * 1
    y = tg.nn.functional.gelu(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_hooks_on_a_collapsed_node_run():
    x = tg.randn(4, 3, dtype=tg.float64, requires_grad=True)
    loss = tg.nn.functional.mse_loss(x, tg.zeros(4, 3, dtype=tg.float64))
    seen = []
    loss.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(
        [None if g is None else tuple(g.shape) for g in grad_inputs]))
    loss.backward()
    assert seen == [[(4, 3), None]]


def test_compiled_step_is_unchanged_by_names():
    """Inside compile the composites are traced as their primitives: one compile, the same
    loss and gradients as eager."""
    lin = tg.nn.Linear(4, 3).double()
    x, y = _inputs(tg, (2, 4), (2, 3), grad=False)

    def step(x, y):
        return tg.nn.functional.cross_entropy(lin(x), y.argmax(1))
    compiled = tg.compile(step)
    got = compiled(x, y)
    got.backward()
    g_compiled = lin.weight.grad.clone()
    lin.weight.grad = None
    want = step(x, y)
    want.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    np.testing.assert_allclose(g_compiled.numpy(), lin.weight.grad.numpy(), rtol=1e-10)
    assert compiled.stats["compiles"] == 1
