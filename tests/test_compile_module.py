"""``compile(module)`` behaves like the module (PyTorch's OptimizedModule), and
``Module.compile()`` compiles in place: a training script written for PyTorch runs
unchanged."""
import numpy as np

import tracegrad as tg
from tracegrad import nn


def _model():
    tg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Dropout(0.2),
                         nn.Linear(8, 2))


def _train(model, steps=5):
    """The usual script: optimizer over model.parameters(), train(), eval(), state_dict()."""
    tg.manual_seed(1)
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = tg.randn(16, 4), tg.randn(16, 2)
    losses = []
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with tg.no_grad():
        out = model(x)
    return losses, out, model.state_dict()


def test_a_compiled_module_is_a_module_and_trains_like_the_original():
    eager = _train(_model())
    model = tg.compile(_model(), backend="numpy")
    assert isinstance(model, nn.Module) and type(model).__name__ == "OptimizedModule"
    compiled = _train(model)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    np.testing.assert_allclose(compiled[1].numpy(), eager[1].numpy(), rtol=1e-5, atol=1e-6)
    assert list(compiled[2]) == list(eager[2])          # the original's keys, no prefix
    for k in eager[2]:
        np.testing.assert_allclose(compiled[2][k].numpy(), eager[2][k].numpy(), rtol=1e-5)
    assert model.stats["compiles"] == 2                 # train and eval


def test_attributes_methods_and_containers_are_the_originals():
    inner = _model()
    model = tg.compile(inner)
    assert model._orig_mod is inner
    assert model[0] is inner[0] and len(model) == len(inner) and list(model) == list(inner)
    assert [p for p in model.parameters()] == [p for p in inner.parameters()]
    assert dict(model.named_buffers()).keys() == dict(inner.named_buffers()).keys()
    assert model.eval() is model and not model.training and not inner.training
    assert model.train() is model and model.training
    model.extra = 3                                     # set on the original
    assert inner.extra == 3 and model.extra == 3
    model.load_state_dict(_model().state_dict())
    assert repr(model).startswith("OptimizedModule(\n  (_orig_mod): Sequential(")
    model(tg.randn(4, 4))
    assert "forward" in model.code and "fused" in model.graph


def test_module_compile_compiles_in_place():
    eager = _train(_model())
    model = _model()
    assert model.compile(backend="numpy") is None
    compiled = _train(model)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    assert model._compiled_call.stats["compiles"] == 2
    assert type(model) is nn.Sequential                 # still the module itself


def test_embedding_max_norm_compiled_keeps_the_weights_gradient():
    # max_norm renormalises the looked-up rows in place under no_grad; the weight stays the
    # leaf it was, so its gradient is the rows' (a trace once read the written weight as a
    # new value no gradient reached: emb.weight.grad was None)
    class Net(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = tg.nn.Embedding(10, 4, max_norm=1.0)
            self.head = tg.nn.Linear(4, 3)

        def forward(self, x):
            return self.head(self.emb(x)).pow(2).sum()
    x = tg.tensor([[1, 2, 0, 3], [3, 3, 9, 1]])
    results = []
    for compiled in (False, True):
        tg.manual_seed(0)
        m = Net()
        f = tg.compile(m) if compiled else m
        out = []
        for _ in range(2):
            m.zero_grad()
            loss = f(x)
            loss.backward()
            out.append([loss.item(), m.emb.weight.grad.numpy().copy(),
                        m.emb.weight.detach().numpy().copy(), m.head.weight.grad.numpy().copy()])
        results.append(out)
    for a, b in zip(*results):
        for u, v in zip(a, b):
            np.testing.assert_allclose(v, u, rtol=1e-5, atol=1e-6)
    assert np.abs(results[1][0][1]).sum() > 0
