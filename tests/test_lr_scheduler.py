"""tracegrad.optim.lr_scheduler against PyTorch: the same schedule on the same param groups.

Each case builds two param groups (different lrs) in both libraries, then runs
``optimizer.step(); scheduler.step()`` for 30 steps. The schedulers do the same float
arithmetic in the same order as PyTorch's, so lrs and momenta agree to 1e-12 relative
(in practice bit for bit), and the state dicts are equal as Python values.
"""
import copy
import math
import warnings

import pytest

import tracegrad as tg
from tracegrad.optim import lr_scheduler

STEPS = 30


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _groups(lib):
    w = lib.tensor([1.0, -2.0], requires_grad=True)
    b = lib.tensor([0.5], requires_grad=True)
    return [{"params": [w]}, {"params": [b], "lr": 0.05}]


OPTIMIZERS = {
    "sgd": lambda optim, groups: optim.SGD(groups, lr=0.1, momentum=0.9),
    "adam": lambda optim, groups: optim.Adam(groups, lr=0.1, betas=(0.9, 0.99)),
}

# (id, optimizer, factory(lr_scheduler module, optimizer), metric per step or None)
PLATEAU_METRICS = [1.0, 0.9, 0.9, 0.95, 0.9, 0.91, 0.92, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49999,
                   0.6, 0.7, 0.8, 0.9, 1.0, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3,
                   0.3, 0.3]
CASES = [
    ("StepLR", "sgd", lambda m, o: m.StepLR(o, step_size=4, gamma=0.5), None),
    ("MultiStepLR", "sgd", lambda m, o: m.MultiStepLR(o, [3, 7, 7, 20], gamma=0.3), None),
    ("ExponentialLR", "sgd", lambda m, o: m.ExponentialLR(o, gamma=0.9), None),
    ("CosineAnnealingLR", "sgd", lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=1e-3),
     None),
    ("CosineAnnealingLR-eta0", "sgd", lambda m, o: m.CosineAnnealingLR(o, T_max=10), None),
    ("CosineAnnealingWarmRestarts", "sgd",
     lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-4), None),
    ("LambdaLR", "sgd", lambda m, o: m.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1 / (e + 1)]),
     None),
    ("LinearLR", "sgd",
     lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=12), None),
    ("OneCycleLR-sgd", "sgd",
     lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.4], total_steps=STEPS), None),
    ("OneCycleLR-adam-linear-3phase", "adam",
     lambda m, o: m.OneCycleLR(o, max_lr=0.5, epochs=3, steps_per_epoch=11, pct_start=0.25,
                               anneal_strategy="linear", three_phase=True, div_factor=10.0,
                               final_div_factor=100.0, base_momentum=0.8, max_momentum=0.9),
     None),
    ("SequentialLR", "sgd",
     lambda m, o: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=5),
                                     m.CosineAnnealingLR(o, T_max=10, eta_min=1e-3)],
                                 milestones=[5]), None),
    ("SequentialLR-3", "sgd",
     lambda m, o: m.SequentialLR(o, [m.ExponentialLR(o, gamma=0.8), m.StepLR(o, 3, 0.5),
                                     m.ExponentialLR(o, gamma=0.9)], milestones=[4, 15]), None),
    ("ReduceLROnPlateau", "sgd",
     lambda m, o: m.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1, min_lr=[1e-3, 0.01]),
     PLATEAU_METRICS),
    ("ReduceLROnPlateau-max-abs", "sgd",
     lambda m, o: m.ReduceLROnPlateau(o, mode="max", factor=0.3, patience=1, threshold=0.05,
                                      threshold_mode="abs", min_lr=0.004),
     [-x for x in PLATEAU_METRICS]),
]
IDS = [case[0] for case in CASES]


def _build(lib, optim, sched_module, case):
    _, opt_kind, factory, _ = case
    opt = OPTIMIZERS[opt_kind](optim, _groups(lib))
    return opt, factory(sched_module, opt)


def _advance(opt, sched, metric):
    loss = sum((p * p).sum() for g in opt.param_groups for p in g["params"])
    opt.zero_grad()
    loss.backward()
    opt.step()
    if metric is None:
        sched.step()
    else:
        sched.step(metric)


def _snapshot(opt, sched):
    """Everything the schedule controls: last lrs, group lrs and momenta."""
    values = list(sched.get_last_lr()) + [g["lr"] for g in opt.param_groups]
    for g in opt.param_groups:
        values.append(g["betas"][0] if "betas" in g else g["momentum"])
    return [float(v) for v in values]


def _assert_close(got, want, where):
    assert got == pytest.approx(want, rel=1e-12, abs=0), where


def _run(opt, sched, metrics, steps, start=0):
    out = [_snapshot(opt, sched)]
    for i in range(start, start + steps):
        _advance(opt, sched, None if metrics is None else metrics[i])
        out.append(_snapshot(opt, sched))
    return out


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_torch(case):
    torch = _torch()
    metrics = case[3]
    opt, sched = _build(tg, tg.optim, lr_scheduler, case)
    topt, tsched = _build(torch, torch.optim, torch.optim.lr_scheduler, case)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # the right call order warns about nothing
        ours = _run(opt, sched, metrics, STEPS)
    theirs = _run(topt, tsched, metrics, STEPS)
    for step, (got, want) in enumerate(zip(ours, theirs)):
        _assert_close(got, want, f"{case[0]} step {step}")
    assert sched.last_epoch == tsched.last_epoch
    # Same attribute names and values: state dicts carry over between the libraries.
    assert sched.state_dict() == tsched.state_dict()
    for g, tg_ in zip(opt.param_groups, topt.param_groups):
        keys = set(tg_) - {"params", "decoupled_weight_decay"}
        assert {k: g[k] for k in keys if k in g} == {k: tg_[k] for k in keys}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_state_dict_round_trip(case):
    """A fresh scheduler (and optimizer) loaded from state dicts continues identically."""
    metrics = case[3]
    opt, sched = _build(tg, tg.optim, lr_scheduler, case)
    _run(opt, sched, metrics, 12)
    opt2, sched2 = _build(tg, tg.optim, lr_scheduler, case)
    _run(opt2, sched2, metrics, 3)     # diverged state, to be overwritten
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(copy.deepcopy(sched.state_dict()))
    assert sched2.state_dict() == sched.state_dict()
    assert _run(opt2, sched2, metrics, STEPS - 12, start=12) == \
        _run(opt, sched, metrics, STEPS - 12, start=12)


def test_warm_restarts_fractional_epochs():
    torch = _torch()
    case = ("", "sgd", lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2,
                                                                  eta_min=0.01), None)
    opt, sched = _build(tg, tg.optim, lr_scheduler, case)
    topt, tsched = _build(torch, torch.optim, torch.optim.lr_scheduler, case)
    iters = 4
    for epoch in range(8):
        for i in range(iters):
            t = epoch + i / iters
            sched.step(t)
            tsched.step(t)
            _assert_close(_snapshot(opt, sched), _snapshot(topt, tsched), f"epoch {t}")
            # Cycles start at 0, 2, 6, 14 (lengths 2, 4, 8): the closed form in its cycle.
            start, length = max((s, n) for s, n in [(0, 2), (2, 4), (6, 8)] if s <= t)
            want = 0.01 + (0.1 - 0.01) * (1 + math.cos(math.pi * (t - start) / length)) / 2
            assert sched.get_last_lr()[0] == pytest.approx(want, rel=1e-12)
            assert sched.last_epoch == math.floor(t)
    sched.step(0.5)                    # back into the first cycle: T_i resets to T_0
    assert sched.T_i == 2 and sched.T_cur == 0.5


def test_step_order_warnings_match_torch():
    torch = _torch()
    case = CASES[0]
    for lib, optim, module in [(tg, tg.optim, lr_scheduler),
                               (torch, torch.optim, torch.optim.lr_scheduler)]:
        opt, sched = _build(lib, optim, module, case)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
            sched.step()
        with pytest.warns(UserWarning, match="get_last_lr"):
            sched.get_lr()
        with pytest.warns(UserWarning, match="epoch parameter"):
            sched.step(8)              # closed form: base_lr * 0.5 ** (8 // 4)
        assert sched.get_last_lr() == [0.1 * 0.25, 0.05 * 0.25]


def test_step_lr_closed_form_without_torch():
    w = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.8, momentum=0.9)
    sched = lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    assert opt.param_groups[0]["initial_lr"] == 0.8 and sched.base_lrs == [0.8]
    for epoch in range(20):
        assert sched.last_epoch == epoch
        assert sched.get_last_lr() == [0.8 * 0.5 ** (epoch // 3)]
        assert opt.param_groups[0]["lr"] == 0.8 * 0.5 ** (epoch // 3)
        opt.step()
        sched.step()


def test_custom_scheduler_and_resume():
    """``_LRScheduler`` subclasses work; resuming needs ``initial_lr`` in the groups."""
    class Halving(lr_scheduler._LRScheduler):
        def get_lr(self):
            return [base / 2 ** self.last_epoch for base in self.base_lrs]

    w = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=1.0)
    with pytest.raises(KeyError, match="initial_lr"):
        Halving(opt, last_epoch=3)
    sched = Halving(opt)
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [0.5]
    resumed = Halving(tg.optim.SGD([{"params": [w], "lr": 0.5, "initial_lr": 1.0}]),
                      last_epoch=3)
    assert resumed.get_last_lr() == [1.0 / 16]
