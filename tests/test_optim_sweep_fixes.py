"""What the OptimizerInfo sweep (``test_optiminfo.py``) found, fixed, one focused test each:

- a learning rate that is a tensor of more than one element: PyTorch's ValueError, from
  every optimizer (it was an ambiguous-truth RuntimeError);
- parameters with names and without, in one group or across groups: PyTorch's ValueError;
- ``capturable=True`` with CPU parameters: PyTorch's AssertionError at the step;
- Adam's tensor ``lr``/``betas`` with ``foreach=True``, and betas half tensors: ValueError;
- ``differentiable=True``: non-leaf parameters are accepted and the step is recorded, so
  the gradient flows through it, as PyTorch's (values and gradients against PyTorch's);
  a step that is not differentiable records nothing;
- LBFGS with a tensor ``lr`` keeps its step length ``t`` as a tensor of the lr's dtype.

Each compares with PyTorch (skipped without it).
"""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")

LR_CHECKED = ["SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "NAdam",
              "RAdam", "RMSprop", "Rprop", "Adafactor", "LBFGS"]
CAPTURABLE = ["Adam", "AdamW", "Adadelta", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop",
              "Rprop"]
# (optimizer, kwargs) whose differentiable step takes every branch the fixes touched
DIFFERENTIABLE = {
    "SGD-momentum": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1)),
    "SGD-nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
    "Adam": ("Adam", dict(lr=0.01, weight_decay=0.1)),
    "Adam-amsgrad": ("Adam", dict(lr=0.01, amsgrad=True)),
    "NAdam": ("NAdam", dict(lr=0.01, weight_decay=0.1)),
    "RAdam": ("RAdam", dict(lr=0.01, weight_decay=0.1)),
    "Adagrad": ("Adagrad", dict(lr=0.1, weight_decay=0.1)),
    "RMSprop": ("RMSprop", dict(lr=0.01, weight_decay=0.1, momentum=0.5)),
    "Adadelta": ("Adadelta", dict(weight_decay=0.1)),
}


def _raised(fn):
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the test compares the two libraries'
        return error
    return None


@pytest.mark.parametrize("name", LR_CHECKED)
def test_a_tensor_lr_of_two_elements_is_pytorchs_value_error(name):
    for lib in (torch, tg):
        p = lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            getattr(lib.optim, name)([p], lr=lib.tensor([0.1, 0.1]))


def test_parameters_with_and_without_names_are_rejected_as_pytorch_does():
    for lib in (torch, tg):
        a, b = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)
        with pytest.raises(ValueError, match="Some param names are missing"):
            lib.optim.SGD([("a", a), b], lr=0.1)
        with pytest.raises(ValueError, match="cannot add param group with names"):
            lib.optim.SGD([{"params": [a]}, {"params": [("b", b)]}], lr=0.1)
        named = lib.optim.SGD([("a", a), ("b", b)], lr=0.1)
        assert named.param_groups[0]["param_names"] == ["a", "b"]


@pytest.mark.parametrize("name", CAPTURABLE)
def test_capturable_on_cpu_parameters_raises_at_the_step(name):
    errors = []
    for lib in (torch, tg):
        p = lib.ones(3, requires_grad=True)
        opt = getattr(lib.optim, name)([p], capturable=True)   # constructing is fine
        p.grad = lib.ones(3)
        errors.append(_raised(opt.step))
    assert isinstance(errors[0], AssertionError), errors[0]
    assert isinstance(errors[1], AssertionError), errors[1]
    assert "capturable=True" in str(errors[1])


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr="tensor", foreach=True), "lr as a Tensor is not supported"),
    (dict(betas=("tensor", 0.99)), "betas must be either both floats or both Tensors"),
    (dict(betas=("tensor", "tensor"), foreach=True), r"betas\[0\] as a Tensor"),
])
def test_adam_tensor_options_are_checked_as_pytorch_does(kwargs, message):
    values = {"lr": 0.001, "betas": 0.9}
    for lib in (torch, tg):
        made = {k: (tuple(lib.tensor(values["betas"]) if b == "tensor" else b for b in v)
                    if k == "betas" else lib.tensor(values[k]) if v == "tensor" else v)
                for k, v in kwargs.items()}
        with pytest.raises(ValueError, match=message):
            lib.optim.Adam([lib.zeros(2, requires_grad=True)], **made)


def _differentiable_run(lib, name, kwargs):
    """Three differentiable steps on clones of leaves; the final values and d(sum)/d(leaves)."""
    rng = np.random.default_rng(0)
    roots = [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in [(3, 2), (2,), ()]]
    params = [r.clone() for r in roots]
    grads = [[rng.standard_normal(p.shape) for p in params] for _ in range(3)]
    opt = getattr(lib.optim, name)(params, differentiable=True, **kwargs)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = lib.tensor(g)
        opt.step()
    total = sum(p.sum() for p in params)
    return [p.detach().numpy() if lib is torch else p.detach()._data for p in params], [
        np.asarray(g) for g in lib.autograd.grad(total, roots)]


# tracegrad's Tensor.grad warns on every read of a non-leaf's gradient, PyTorch's only where
# it is None (the step reads gradients it was given): not this test's subject
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize("case", sorted(DIFFERENTIABLE))
def test_a_differentiable_step_is_recorded_as_pytorchs(case):
    name, kwargs = DIFFERENTIABLE[case]
    want_values, want_grads = _differentiable_run(torch, name, kwargs)
    got_values, got_grads = _differentiable_run(tg, name, kwargs)
    # Adam and NAdam compute their coefficients in float32 from the step tensor: float32's
    # rounding (a float32 pow may differ by an ulp); the others are float64 throughout
    rtol = 1e-6 if name in ("Adam", "NAdam") else 1e-10
    for w, g in zip(want_values + want_grads, got_values + got_grads):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def test_a_step_that_is_not_differentiable_records_nothing():
    p = tg.ones(3, requires_grad=True)
    opt = tg.optim.SGD([p], lr=0.1, momentum=0.9, foreach=False)
    p.grad = tg.ones(3)
    opt.step()
    assert p.grad_fn is None and opt.state[p]["momentum_buffer"].grad_fn is None


def test_lbfgs_keeps_its_step_length_a_tensor_where_the_lr_is():
    states = []
    for lib in (torch, tg):
        p = lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.LBFGS([p], lr=lib.tensor(0.5))

        def closure(opt=opt, p=p):
            opt.zero_grad()
            loss = (p * p).sum()
            loss.backward()
            return loss
        opt.step(closure)
        states.append(opt.state_dict()["state"][0]["t"])
    assert isinstance(states[1], tg.Tensor) and str(states[1].dtype) == "tracegrad.float32"
    assert float(states[1]) == float(states[0])
