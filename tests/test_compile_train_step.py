"""A whole training step compiled (forward, ``backward()``, ``optimizer.step()``, a
scheduler) gives eager's losses, parameters and ``.grad`` step for step: the optimizer's
step counts and learning rates are read afresh at every call, its other options are
checked, the first step (which makes the state) runs eagerly, and ``.grad`` is set by the
variant as eager sets it."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import optim
from tracegrad.optim import lr_scheduler

# Compiled and eager run the same float32 ops; fused kernels may sum in another order,
# which moves a result by a few ulps per step (float32: 2**-23 ~ 1.2e-7) and the
# optimizer carries it on. Six steps of a tiny model stay well inside 1e-5.
RTOL, ATOL = 1e-5, 1e-6

OPTIMIZERS = {
    "sgd": lambda p: optim.SGD(p, lr=0.1),
    "sgd_momentum_nesterov_wd": lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                                     weight_decay=1e-2),
    "adam": lambda p: optim.Adam(p, lr=0.05),
    "adam_amsgrad_wd": lambda p: optim.Adam(p, lr=0.05, amsgrad=True, weight_decay=1e-2),
    "adamw": lambda p: optim.AdamW(p, lr=0.05, weight_decay=0.1),
    "adamax": lambda p: optim.Adamax(p, lr=0.05),
    "nadam": lambda p: optim.NAdam(p, lr=0.05),
    "radam": lambda p: optim.RAdam(p, lr=0.05),
    "rmsprop_centered_momentum": lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5,
                                                         centered=True),
    "adagrad": lambda p: optim.Adagrad(p, lr=0.1),
    "adadelta_wd": lambda p: optim.Adadelta(p, lr=0.5, rho=0.8, weight_decay=1e-2),
}

SCHEDULERS = {
    None: None,
    "steplr": lambda o: lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
    "cosine": lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=6),
    "warmup_lambda": lambda o: lr_scheduler.LambdaLR(o, lambda e: min(1.0, (e + 1) / 3)),
    "multistep": lambda o: lr_scheduler.MultiStepLR(o, milestones=[2, 4], gamma=0.3),
    "exponential": lambda o: lr_scheduler.ExponentialLR(o, gamma=0.8),
    "warm_restarts": lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2),
    "onecycle": lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=8),  # momentum too
    "sequential": lambda o: lr_scheduler.SequentialLR(
        o, [lr_scheduler.LinearLR(o, start_factor=0.5, total_iters=2),
            lr_scheduler.ExponentialLR(o, gamma=0.9)], milestones=[2]),
}


def _model():
    tg.manual_seed(0)
    return tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 1))


def _data():
    rng = np.random.default_rng(0)
    return (tg.tensor(rng.standard_normal((16, 4)).astype(np.float32)),
            tg.tensor(rng.standard_normal((16, 1)).astype(np.float32)))


def _train(make_opt, make_sched, compiled, steps=6, sched_inside=False):
    model, (x, y) = _model(), _data()
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched else None

    def train_step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        if sched is not None and sched_inside:
            sched.step()
        return loss

    step = tg.compile(train_step) if compiled else train_step
    losses, grads = [], []
    for _ in range(steps):
        losses.append(step(x, y).item())
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        if sched is not None and not sched_inside:
            sched.step()
    return losses, [p.detach().clone() for p in model.parameters()], grads, step


def _train_step(model, opt):
    """A plain training step of ``model`` by ``opt`` on the squared error."""
    def train_step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return train_step


def _same(a, b):
    np.testing.assert_allclose(np.asarray(a._data), np.asarray(b._data), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_every_optimizer_compiled_step_matches_eager(opt_name):
    e_loss, e_params, e_grads, _ = _train(OPTIMIZERS[opt_name], None, compiled=False)
    c_loss, c_params, c_grads, step = _train(OPTIMIZERS[opt_name], None, compiled=True)
    np.testing.assert_allclose(c_loss, e_loss, rtol=RTOL, atol=ATOL)
    for a, b in zip(c_params, e_params):
        _same(a, b)
    for ga, gb in zip(c_grads, e_grads):       # .grad after every call, as eager left it
        for a, b in zip(ga, gb):
            _same(a, b)
    # An optimizer that makes its state at its first step runs that call eagerly; then one
    # variant serves every step (RAdam's rectification switches on at step 6: a second).
    lazy = opt_name not in ("sgd", "adagrad")
    assert step.stats["compiles"] == (2 if opt_name == "radam" else 1), step.explain()
    assert len(step.stats["eager_runs"]) == lazy, step.explain()


@pytest.mark.parametrize("inside", [False, True], ids=["sched_outside", "sched_inside"])
@pytest.mark.parametrize("sched_name", sorted(k for k in SCHEDULERS if k))
@pytest.mark.parametrize("opt_name", ["sgd_momentum_nesterov_wd", "adamw"])
def test_schedulers_reach_the_compiled_step(opt_name, sched_name, inside):
    e_loss, e_params, _, _ = _train(OPTIMIZERS[opt_name], SCHEDULERS[sched_name], False,
                                    sched_inside=inside)
    c_loss, c_params, _, step = _train(OPTIMIZERS[opt_name], SCHEDULERS[sched_name], True,
                                       sched_inside=inside)
    np.testing.assert_allclose(c_loss, e_loss, rtol=RTOL, atol=ATOL)
    for a, b in zip(c_params, e_params):
        _same(a, b)
    assert step.stats["compiles"] == 1, step.explain()     # the lr is an input, not a guard


def test_learning_rate_and_momentum_are_inputs_of_the_variant_and_other_options_guarded():
    _, _, _, step = _train(OPTIMIZERS["adamw"], SCHEDULERS["steplr"], True, steps=3)
    text = step.explain()
    assert "lr, betas0, betas1" in text      # inputs: OneCycleLR changes betas too
    assert "optimizer.param_groups[0]['eps'] == 1e-08" in text
    assert "made its state (its first step)" in text


def test_changing_a_baked_option_retraces():
    model, (x, y) = _model(), _data()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    eager_model = _model()
    eager_opt = optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    step, eager = tg.compile(_train_step(model, opt)), _train_step(eager_model, eager_opt)
    for i in range(5):
        if i == 3:
            opt.param_groups[0]["weight_decay"] = eager_opt.param_groups[0]["weight_decay"] = 0.1
        np.testing.assert_allclose(step(x, y).item(), eager(x, y).item(), rtol=RTOL)
    assert any("weight_decay" in r for r in step.stats["retrace_reasons"]), step.explain()


@pytest.mark.parametrize("make_opt", [
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
    lambda p: optim.RMSprop(p, lr=0.01, momentum=0.9)], ids=["sgd", "rmsprop"])
def test_a_branch_on_the_momentum_is_checked_before_the_call_not_inside_the_step(make_opt):
    """The momentum is read afresh at every call (a schedule may cycle it); whether it is 0
    picks the program. That branch is taken on the option's number and checked before each
    call: the step itself reads no value on the host (a CUDA graph records it), a new
    momentum reuses the variant, and a momentum of 0 traces again."""
    model, eager_model, (x, y) = _model(), _model(), _data()
    opt, eager_opt = make_opt(model.parameters()), make_opt(eager_model.parameters())
    step, eager = tg.compile(_train_step(model, opt)), _train_step(eager_model, eager_opt)
    for i in range(8):
        if i in (4, 6):
            momentum = 0.5 if i == 4 else 0.0
            opt.param_groups[0]["momentum"] = eager_opt.param_groups[0]["momentum"] = momentum
        np.testing.assert_allclose(step(x, y).item(), eager(x, y).item(), rtol=RTOL, atol=ATOL)
        if i == 5:      # 0.9 -> 0.5: the same variant
            assert step.stats["compiles"] == 1, step.explain()
            assert "GuardFailure" not in step._variants[0].python_code
            # one check, however many parameters the loop asks it for
            assert step.explain().count("['momentum'] ") == 1, step.explain()
    for a, b in zip(model.parameters(), eager_model.parameters()):
        _same(a, b)
    assert any("'momentum'] " in r for r in step.stats["retrace_reasons"]), step.explain()


def test_gradients_accumulated_across_compiled_calls_match_eager():
    # no zero_grad inside: .grad accumulates from call to call, in place, as eagerly
    def run(compiled):
        model, (x, y) = _model(), _data()

        def f(x, y):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss
        g = tg.compile(f) if compiled else f
        held = None
        for _ in range(3):
            g(x, y)
            held = model[0].weight.grad if held is None else held
        assert model[0].weight.grad is held      # the same tensor, updated in place
        return [p.grad.detach().clone() for p in model.parameters()]
    for a, b in zip(run(True), run(False)):
        _same(a, b)


def test_compiled_adamw_cosine_step_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w1, b1 = rng.standard_normal((8, 4)).astype(np.float32), np.zeros(8, np.float32)
    w2, b2 = rng.standard_normal((1, 8)).astype(np.float32), np.zeros(1, np.float32)
    x, y = rng.standard_normal((16, 4)).astype(np.float32), rng.standard_normal((16, 1))
    y = y.astype(np.float32)

    def run(lib, compile_=None):
        model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.GELU(), lib.nn.Linear(8, 1))
        with lib.no_grad():
            for p, v in zip(model.parameters(), (w1, b1, w2, b2)):
                p.copy_(lib.tensor(v))
        opt = lib.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.1)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
        xs, ys = lib.tensor(x), lib.tensor(y)

        def train_step(xs, ys):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(xs), ys)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss
        step = compile_(train_step) if compile_ else train_step
        losses = []
        for _ in range(8):
            losses.append(step(xs, ys).item())
            sched.step()
        return losses, [p.detach().numpy().copy() for p in model.parameters()]
    t_loss, t_params = run(torch)
    c_loss, c_params = run(tg, tg.compile)
    # float32 through 8 steps of a 2-layer model: a few ulps per op, carried by Adam's
    # normalised update; 1e-4 relative is far below any real error (a wrong bias
    # correction moves the loss by >1e-3)
    np.testing.assert_allclose(c_loss, t_loss, rtol=1e-4, atol=1e-6)
    for a, b in zip(c_params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_an_lbfgs_step_compiled_runs_eagerly_and_matches():
    def run(compiled):
        model, (x, y) = _model(), _data()
        opt = optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)

        def train_step(x, y):
            def closure():
                opt.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                return loss
            return opt.step(closure)
        step = tg.compile(train_step) if compiled else train_step
        return [step(x, y).item() for _ in range(3)], step
    eager, _ = run(False)
    with pytest.warns(RuntimeWarning, match="LBFGS"):
        compiled, step = run(True)
    np.testing.assert_allclose(compiled, eager, rtol=RTOL, atol=ATOL)
    assert "now running eagerly" in step.explain()


@pytest.mark.parametrize("opt_name", ["sgd_momentum_nesterov_wd", "adamw"])
def test_a_parameter_large_enough_to_run_in_chunks_steps_as_eager(opt_name, backend):
    # the NumPy tier runs a big group in chunks of rows; the learning rate (a 0-d input of
    # the variant) and values made from it must keep their shape inside each chunk
    def run(compiled):
        tg.manual_seed(0)
        w = tg.nn.Parameter(tg.randn(2048, 256))
        x = tg.randn(2048, 256)
        opt = OPTIMIZERS[opt_name]([w])

        def step(x):
            opt.zero_grad()
            loss = (w * x).tanh().mean()
            loss.backward()
            opt.step()
            return loss.detach()
        f = tg.compile(step) if compiled else step
        return [f(x).item() for _ in range(4)], w.detach().clone()
    (e_loss, e_w), (c_loss, c_w) = run(False), run(True)
    np.testing.assert_allclose(c_loss, e_loss, rtol=RTOL, atol=ATOL)
    _same(c_w, e_w)
