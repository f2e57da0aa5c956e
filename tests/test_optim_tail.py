"""Rprop, ASGD and Adafactor, and the schedulers ConstantLR, MultiplicativeLR, PolynomialLR,
CyclicLR and ChainedScheduler, against PyTorch's.

Optimizers: both libraries start from the same parameters and get the same gradients
(set on ``.grad`` from NumPy arrays) for 10 steps; after every step the parameters and
every state tensor must agree, to rtol 1e-12 in float64 and 1e-6 in float32 (with an atol
of rtol times the largest entry, for entries that cross zero), on our fused step
(``foreach=None``) and our per-parameter loop (``foreach=False``) alike (Adafactor has the
loop only), PyTorch running its single-tensor step. Schedulers: the lr (and the momentum or beta1 CyclicLR cycles) after
each of 30 steps, with SGD and Adam. Then state dicts, errors, and a compiled training
step against eager.
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import optim
from tracegrad.optim import lr_scheduler as sched

torch = pytest.importorskip("torch")

STEPS = 10
SHAPES = [(4, 3), (5,), (), (2, 3, 2)]
RTOL = {"float64": 1e-12, "float32": 1e-6}
FOREACH = [False, None]


def arrays(dtype, seed=0, steps=STEPS):
    """Initial parameters, then one list of gradients per step (gradients that often
    change sign from one step to the next, so Rprop's three cases all occur)."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]
    return init, grads


def assert_close(ours, theirs, dtype, what):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, what
    rtol = RTOL[dtype]
    atol = rtol * float(np.max(np.abs(theirs), initial=0.0))
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=what)


def assert_same_state(g_opt, t_opt, dtype, step):
    sd, tsd = g_opt.state_dict(), t_opt.state_dict()
    options = [{k: v for k, v in g.items() if k != "foreach"} for g in sd["param_groups"]]
    assert options == [{k: v for k, v in g.items() if k != "foreach"}
                       for g in tsd["param_groups"]]
    assert list(sd["state"]) == list(tsd["state"])
    for i, state in sd["state"].items():
        assert list(state) == list(tsd["state"][i]), i
        for key, value in state.items():
            tvalue = tsd["state"][i][key]
            assert value.dtype.name == str(tvalue.dtype).split(".")[1], key
            assert_close(value.numpy(), tvalue.numpy(), dtype, f"step {step} state {i} {key}")


def step_both(g_opt, t_opt, g_params, t_params, step_grads):
    for p, tp, g in zip(g_params, t_params, step_grads):
        p.grad, tp.grad = tg.tensor(g), torch.tensor(g)
    g_opt.step()
    t_opt.step()


def compare_steps(cls, kw, dtype, foreach, seed=0):
    """Run ours and PyTorch's side by side, checking parameters and state at every step."""
    init, grads = arrays(dtype, seed)
    g_params = [tg.tensor(a, requires_grad=True) for a in init]
    t_params = [torch.tensor(a, requires_grad=True) for a in init]
    g_opt = getattr(optim, cls)(g_params, foreach=foreach, **kw)
    t_opt = getattr(torch.optim, cls)(t_params, foreach=False, **kw)
    for step, step_grads in enumerate(grads, 1):
        step_both(g_opt, t_opt, g_params, t_params, step_grads)
        for i, (p, tp) in enumerate(zip(g_params, t_params)):
            assert p.dtype.name == dtype
            assert_close(p.detach().numpy(), tp.detach().numpy(), dtype, f"step {step} p{i}")
        assert_same_state(g_opt, t_opt, dtype, step)
    return g_opt, t_opt


RPROP = {
    "default": {},
    "maximize": {"maximize": True},
    # step sizes clamped at both ends within 10 steps
    "etas_step_sizes": {"lr": 0.01, "etas": (0.3, 1.5), "step_sizes": (4e-3, 0.03)},
    "all": {"lr": 0.02, "etas": (0.4, 1.3), "step_sizes": (1e-2, 0.05), "maximize": True},
}
ASGD = {
    "default": {},                                      # mu stays 1: ax copies p
    "averaging": {"lr": 0.05, "t0": 3},                 # mu = 1 / (t - 3) from step 4
    "lambd_alpha": {"lr": 0.1, "lambd": 0.5, "alpha": 0.5, "t0": 0},
    "weight_decay": {"lr": 0.05, "weight_decay": 0.1, "t0": 2},
    "maximize": {"lr": 0.05, "maximize": True, "t0": 5},
    "all": {"lr": 0.1, "lambd": 0.2, "alpha": 0.9, "t0": 4, "weight_decay": 0.05,
            "maximize": True},
}

ADAFACTOR = {
    "default": {},
    "lr": {"lr": 0.5},                                  # rho = 1 / sqrt(t) from step 5
    "maximize": {"lr": 0.05, "maximize": True},
    "weight_decay": {"lr": 0.05, "weight_decay": 0.2},
    "eps": {"lr": 0.05, "eps": (1e-2, 2.0)},            # both floors bite
    "d_beta2_decay": {"lr": 0.05, "d": 1.2, "beta2_decay": -0.5},
    "all": {"lr": 0.1, "beta2_decay": -0.6, "eps": (1e-5, 1e-2), "d": 2.0,
            "weight_decay": 0.05, "maximize": True},
}


@pytest.mark.parametrize("foreach", FOREACH, ids=["loop", "fused"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(RPROP))
def test_rprop_matches_torch_step_for_step(name, dtype, foreach):
    compare_steps("Rprop", RPROP[name], dtype, foreach)


@pytest.mark.parametrize("foreach", FOREACH, ids=["loop", "fused"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(ASGD))
def test_asgd_matches_torch_step_for_step(name, dtype, foreach):
    compare_steps("ASGD", ASGD[name], dtype, foreach)


@pytest.mark.parametrize("foreach", FOREACH, ids=["loop", "foreach_none"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(ADAFACTOR))
def test_adafactor_matches_torch_step_for_step(name, dtype, foreach):
    compare_steps("Adafactor", ADAFACTOR[name], dtype, foreach)


def test_rprop_clamps_reach_both_bounds():
    g_opt, _ = compare_steps("Rprop", RPROP["etas_step_sizes"], "float64", None)
    sizes = np.concatenate([s["step_size"].numpy().ravel() for s in g_opt.state.values()])
    assert sizes.min() == 4e-3 and sizes.max() == 0.03


@pytest.mark.parametrize("cls, kw", [("Rprop", RPROP["all"]), ("ASGD", ASGD["all"])])
def test_fused_and_loop_are_bit_for_bit_with_the_same_versions(cls, kw):
    init, grads = arrays("float32", seed=3)
    runs = []
    for foreach in FOREACH:
        params = [tg.tensor(a, requires_grad=True) for a in init]
        opt = getattr(optim, cls)(params, foreach=foreach, **kw)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = tg.tensor(g)
            opt.step()
        state = [(k, t.numpy().copy(), t._version) for s in opt.state.values()
                 for k, t in s.items()]
        runs.append(([p.detach().numpy().copy() for p in params],
                     [p._version for p in params], state))
    (p1, v1, s1), (p2, v2, s2) = runs
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(a, b)
    assert v1 == v2
    for (k1, a, va), (k2, b, vb) in zip(s1, s2):
        assert k1 == k2 and va == vb, k1
        np.testing.assert_array_equal(a, b, err_msg=k1)


@pytest.mark.parametrize("cls, kw", [("Rprop", RPROP["all"]), ("ASGD", ASGD["all"]),
                                     ("Adafactor", ADAFACTOR["all"])])
def test_state_dict_carries_over_from_torch_halfway(cls, kw):
    """PyTorch's state dict after 5 steps, loaded into ours and into a new PyTorch optimizer
    (which casts the state but ``step`` to the parameters' dtype), continues as PyTorch's."""
    dtype = "float64"
    init, grads = arrays(dtype, seed=4)
    t_params = [torch.tensor(a, requires_grad=True) for a in init]
    t_opt = getattr(torch.optim, cls)(t_params, foreach=False, **kw)
    for step_grads in grads[:5]:
        for tp, g in zip(t_params, step_grads):
            tp.grad = torch.tensor(g)
        t_opt.step()
    saved = t_opt.state_dict()
    t_params = [tp.detach().clone().requires_grad_() for tp in t_params]
    t_opt = getattr(torch.optim, cls)(t_params, foreach=False, **kw)
    t_opt.load_state_dict(saved)
    g_params = [tg.tensor(tp.detach().numpy().copy(), requires_grad=True) for tp in t_params]
    g_opt = getattr(optim, cls)(g_params, **kw)
    g_opt.load_state_dict({
        "state": {i: {k: tg.tensor(v.numpy()) for k, v in s.items()}
                  for i, s in saved["state"].items()},
        "param_groups": saved["param_groups"]})
    for step, step_grads in enumerate(grads[5:], 6):
        step_both(g_opt, t_opt, g_params, t_params, step_grads)
        for p, tp in zip(g_params, t_params):
            assert_close(p.detach().numpy(), tp.detach().numpy(), dtype, f"step {step}")
        assert_same_state(g_opt, t_opt, dtype, step)


@pytest.mark.parametrize("cls, kw", [("Rprop", RPROP["all"]), ("ASGD", ASGD["all"]),
                                     ("Adafactor", ADAFACTOR["all"])])
def test_own_state_dict_round_trip(cls, kw):
    init, grads = arrays("float32", seed=5)

    def run(split):
        params = [tg.tensor(a, requires_grad=True) for a in init]
        opt = getattr(optim, cls)(params, **kw)
        for step, step_grads in enumerate(grads):
            if step == split:
                saved = opt.state_dict()
                params = [tg.tensor(p.detach().numpy().copy(), requires_grad=True)
                          for p in params]
                opt = getattr(optim, cls)(params, **kw)
                opt.load_state_dict(saved)
            for p, g in zip(params, step_grads):
                p.grad = tg.tensor(g)
            opt.step()
        return [p.detach().numpy() for p in params]
    for a, b in zip(run(split=4), run(split=None)):
        np.testing.assert_array_equal(a, b)


def test_defaults_and_keywords_as_torch():
    p, tp = [tg.zeros(2, requires_grad=True)], [torch.zeros(2, requires_grad=True)]
    for cls in ("Rprop", "ASGD"):
        ours, theirs = getattr(optim, cls)(p), getattr(torch.optim, cls)(tp)
        assert ours.defaults == theirs.defaults
        kw = dict(foreach=True, maximize=True, differentiable=False, capturable=True)
        ours, theirs = getattr(optim, cls)(p, **kw), getattr(torch.optim, cls)(tp, **kw)
        assert ours.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]
    ours, theirs = optim.Adafactor(p, foreach=True, maximize=True), \
        torch.optim.Adafactor(tp, foreach=True, maximize=True)
    assert ours.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]


@pytest.mark.parametrize("cls, kw", [
    ("Rprop", {"lr": -0.1}), ("Rprop", {"etas": (1.2, 0.5)}), ("Rprop", {"etas": (0.0, 1.2)}),
    ("Rprop", {"etas": (0.5, 1.0)}), ("ASGD", {"lr": -1.0}), ("ASGD", {"weight_decay": -0.1}),
    ("Adafactor", {"lr": -1.0}), ("Adafactor", {"beta2_decay": 0.5}),
    ("Adafactor", {"eps": (-1.0, 1e-3)}), ("Adafactor", {"eps": (None, -1.0)}),
    ("Adafactor", {"d": 0.5}), ("Adafactor", {"weight_decay": -0.1}),
])
def test_bad_arguments_raise_torchs_errors(cls, kw):
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, cls)([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as ours:
        getattr(optim, cls)([tg.zeros(2, requires_grad=True)], **kw)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("cls", ["Rprop", "ASGD", "Adafactor"])
def test_tensor_lr_must_have_one_element(cls):
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        getattr(optim, cls)([tg.zeros(2, requires_grad=True)], lr=tg.tensor([0.1, 0.2]))


def test_pytorch_module_paths():
    from tracegrad.optim._adafactor import Adafactor as adafactor_cls
    from tracegrad.optim.asgd import ASGD as asgd_cls
    from tracegrad.optim.rprop import Rprop as rprop_cls
    assert rprop_cls is tg.optim.Rprop and asgd_cls is tg.optim.ASGD
    assert adafactor_cls is tg.optim.Adafactor
    assert tg.optim.Adafactor.__module__ == "tracegrad.optim"   # torch.optim's is "torch.optim"
    for name in ("ConstantLR", "MultiplicativeLR", "PolynomialLR", "CyclicLR",
                 "ChainedScheduler"):
        assert name in sched.__all__ and hasattr(torch.optim.lr_scheduler, name)


# schedulers ------------------------------------------------------------------------------
SCHED_STEPS = 30


class Halving:
    """A callable object (its ``__dict__`` goes into state dicts) for the lambda schedulers."""

    def __init__(self, base):
        self.base = base

    def __call__(self, epoch):
        return self.base ** (epoch % 3)


SCHEDULERS = {
    "constant": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "constant_default": lambda m, o: m.ConstantLR(o),
    "multiplicative": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95),
    "multiplicative_per_group": lambda m, o: m.MultiplicativeLR(
        o, [lambda e: 0.9, Halving(0.98)]),
    "polynomial": lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0),
    "polynomial_default": lambda m, o: m.PolynomialLR(o),
    "cyclic_triangular": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=4,
                                                 step_size_down=3),
    "cyclic_triangular2": lambda m, o: m.CyclicLR(o, [0.01, 0.02], [0.1, 0.05],
                                                  step_size_up=5, mode="triangular2"),
    "cyclic_exp_range": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=4,
                                                mode="exp_range", gamma=0.9),
    "cyclic_scale_fn_cycle": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                     scale_fn=lambda x: 0.8 ** x),
    "cyclic_scale_fn_iterations": lambda m, o: m.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, step_size_down=6, scale_fn=lambda x: 1 / (1 + 0.1 * x),
        scale_mode="iterations", base_momentum=[0.7, 0.75], max_momentum=0.95),
    "cyclic_no_momentum": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                  cycle_momentum=False),
    "chained_constant_exponential": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.1, total_iters=20), m.ExponentialLR(o, gamma=0.9)]),
    "chained_three": lambda m, o: m.ChainedScheduler(
        [m.PolynomialLR(o, total_iters=10), m.MultiplicativeLR(o, lambda e: 0.99),
         m.StepLR(o, step_size=7, gamma=0.5)], optimizer=o),
    "sequential_of_new": lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.2, total_iters=3), m.PolynomialLR(o, total_iters=15)],
        milestones=[5]),
}


def make_optimizer(lib, kind, *, sizes=(3, 2)):
    """SGD with momentum or Adam over two parameter groups (lrs 0.1 and 0.05)."""
    groups = [{"params": [lib.zeros(n, requires_grad=True)], "lr": lr}
              for n, lr in zip(sizes, (0.1, 0.05))]
    if kind == "sgd":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return lib.optim.Adam(groups, lr=0.1)


def momentum(opt):
    return [g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups]


def schedule(lib, kind, name, steps=SCHED_STEPS):
    """(lrs from get_last_lr, the groups' lrs, their momentum) after each step."""
    opt = make_optimizer(lib, kind)
    scheduler = SCHEDULERS[name](lib.optim.lr_scheduler, opt)
    out = [(scheduler.get_last_lr(), [g["lr"] for g in opt.param_groups], momentum(opt))]
    for _ in range(steps):
        opt.step()
        scheduler.step()
        out.append((scheduler.get_last_lr(), [g["lr"] for g in opt.param_groups],
                    momentum(opt)))
    return out


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_schedule_matches_torch(name, kind):
    ours, theirs = schedule(tg, kind, name), schedule(torch, kind, name)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(np.array(a, float), np.array(b, float), rtol=1e-15,
                                   atol=0, err_msg=f"step {step}")


def test_cyclic_momentum_moves_inversely_to_the_lr():
    out = schedule(tg, "adam", "cyclic_triangular")
    lrs = [lr[0] for _, lr, _ in out]
    betas = [m[0] for _, _, m in out]
    assert lrs[4] == pytest.approx(0.1) and betas[4] == pytest.approx(0.8)
    assert lrs[0] == pytest.approx(0.01) and betas[0] == pytest.approx(0.9)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_state_dict_round_trip(name, kind):
    """A scheduler's state dict has PyTorch's keys, and a new scheduler (on a new optimizer)
    loaded halfway with it and the optimizer's continues as PyTorch's uninterrupted one."""
    opt = make_optimizer(tg, kind)
    scheduler = SCHEDULERS[name](sched, opt)
    t_opt = make_optimizer(torch, kind)
    t_scheduler = SCHEDULERS[name](torch.optim.lr_scheduler, t_opt)
    assert sorted(scheduler.state_dict()) == sorted(t_scheduler.state_dict())
    for _ in range(12):
        opt.step(), scheduler.step(), t_opt.step(), t_scheduler.step()
    saved, saved_opt = scheduler.state_dict(), opt.state_dict()
    opt = make_optimizer(tg, kind)
    scheduler = SCHEDULERS[name](sched, opt)
    opt.load_state_dict(saved_opt)
    scheduler.load_state_dict(saved)
    for step in range(12):
        opt.step(), scheduler.step(), t_opt.step(), t_scheduler.step()
        assert scheduler.get_last_lr() == pytest.approx(t_scheduler.get_last_lr(), rel=1e-15)
        assert momentum(opt) == pytest.approx(momentum(t_opt), rel=1e-15), step


def test_lambda_state_dict_keeps_callable_objects_only():
    opt = make_optimizer(tg, "sgd")
    scheduler = sched.MultiplicativeLR(opt, [lambda e: 0.9, Halving(0.98)])
    assert scheduler.state_dict()["lr_lambdas"] == [None, {"base": 0.98}]
    other = sched.MultiplicativeLR(make_optimizer(tg, "sgd"), [lambda e: 0.9, Halving(0.5)])
    other.load_state_dict(scheduler.state_dict())
    assert other.lr_lambdas[1].base == 0.98
    cyclic = sched.CyclicLR(opt, 0.01, 0.1, scale_fn=Halving(0.7))
    assert cyclic.state_dict()["_scale_fn_custom"] == {"base": 0.7}
    assert "_scale_fn_ref" not in sched.CyclicLR(opt, 0.01, 0.1).state_dict()


@pytest.mark.parametrize("name, epochs", [("constant", [2, 6, 3]), ("polynomial", [7, 25, 1])])
def test_step_with_epoch_uses_the_closed_form(name, epochs):
    def run(lib):
        opt = make_optimizer(lib, "sgd")
        scheduler = SCHEDULERS[name](lib.optim.lr_scheduler, opt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = []
            for epoch in epochs:
                opt.step()
                scheduler.step(epoch)
                out.append(scheduler.get_last_lr())
        return out
    np.testing.assert_allclose(run(tg), run(torch), rtol=1e-15, atol=0)


def _error(lib, make):
    with pytest.raises((ValueError, TypeError)) as info:
        make(lib)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("make", [
    lambda lib: lib.optim.lr_scheduler.ConstantLR(make_optimizer(lib, "sgd"), factor=1.5),
    lambda lib: lib.optim.lr_scheduler.ConstantLR(make_optimizer(lib, "sgd"), factor=-0.1),
    lambda lib: lib.optim.lr_scheduler.MultiplicativeLR(make_optimizer(lib, "sgd"), 0.9),
    lambda lib: lib.optim.lr_scheduler.MultiplicativeLR(make_optimizer(lib, "sgd"),
                                                       [lambda e: 1.0]),
    lambda lib: lib.optim.lr_scheduler.CyclicLR(make_optimizer(lib, "sgd"), 0.01, 0.1,
                                               mode="cosine"),
    lambda lib: lib.optim.lr_scheduler.CyclicLR(make_optimizer(lib, "sgd"), [0.01], 0.1),
    lambda lib: lib.optim.lr_scheduler.CyclicLR(
        lib.optim.Rprop([lib.zeros(2, requires_grad=True)]), 0.01, 0.1),
    lambda lib: lib.optim.lr_scheduler.CyclicLR(None, 0.01, 0.1),
    lambda lib: lib.optim.lr_scheduler.ChainedScheduler([]),
    lambda lib: lib.optim.lr_scheduler.ChainedScheduler([
        lib.optim.lr_scheduler.ExponentialLR(make_optimizer(lib, "sgd"), 0.9),
        lib.optim.lr_scheduler.ExponentialLR(make_optimizer(lib, "adam"), 0.9)]),
    lambda lib: lib.optim.lr_scheduler.ChainedScheduler([
        lib.optim.lr_scheduler.ReduceLROnPlateau(make_optimizer(lib, "sgd"))]),
], ids=["constant_factor_high", "constant_factor_negative", "multiplicative_not_callable",
        "multiplicative_wrong_count", "cyclic_mode", "cyclic_base_lr_count",
        "cyclic_no_momentum_to_cycle", "cyclic_not_an_optimizer", "chained_empty",
        "chained_two_optimizers", "chained_plateau"])
def test_scheduler_errors_as_torch(make):
    (t_type, t_msg), (g_type, g_msg) = _error(torch, make), _error(tg, make)
    assert g_type is t_type
    if "different from" not in t_msg:       # that one names the optimizer's repr
        assert g_msg == t_msg


# a compiled training step ---------------------------------------------------------------
RTOL_COMPILED, ATOL_COMPILED = 1e-5, 1e-6

COMPILED = {
    "rprop": (lambda p: optim.Rprop(p, lr=0.01), None),
    "rprop_all": (lambda p: optim.Rprop(p, lr=0.02, etas=(0.4, 1.3), step_sizes=(1e-3, 0.05),
                                        maximize=False), None),
    "asgd_averaging": (lambda p: optim.ASGD(p, lr=0.05, lambd=0.01, t0=2, weight_decay=0.01),
                       None),
    "sgd_constant": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                     lambda o: sched.ConstantLR(o, factor=0.5, total_iters=3)),
    "adam_multiplicative": (lambda p: optim.Adam(p, lr=0.05),
                            lambda o: sched.MultiplicativeLR(o, lambda e: 0.9)),
    "adamw_polynomial": (lambda p: optim.AdamW(p, lr=0.05),
                         lambda o: sched.PolynomialLR(o, total_iters=6, power=2.0)),
    "sgd_cyclic": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                   lambda o: sched.CyclicLR(o, 0.01, 0.1, step_size_up=3)),
    "adam_cyclic_exp_range": (lambda p: optim.Adam(p, lr=0.05),
                              lambda o: sched.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                       mode="exp_range", gamma=0.9)),
    "adam_chained": (lambda p: optim.Adam(p, lr=0.05), lambda o: sched.ChainedScheduler(
        [sched.ConstantLR(o, factor=0.5, total_iters=3), sched.PolynomialLR(o, total_iters=6),
         sched.MultiplicativeLR(o, lambda e: 0.9)])),
    "adafactor": (lambda p: optim.Adafactor(p, lr=0.05), None),
    "adafactor_all_cyclic": (lambda p: optim.Adafactor(p, lr=0.05, weight_decay=0.1, d=1.5,
                                                       eps=(1e-4, 1e-2), beta2_decay=-0.6),
                             lambda o: sched.CyclicLR(o, 0.01, 0.05, step_size_up=2,
                                                      cycle_momentum=False)),
    "asgd_cyclic_lr_only": (lambda p: optim.ASGD(p, lr=0.05, t0=3),
                            lambda o: sched.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                     cycle_momentum=False)),
}


def _model():
    tg.manual_seed(0)
    return tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 1))


def _train(make_opt, make_sched, compiled, steps=8):
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = tg.tensor(rng.standard_normal((16, 1)).astype(np.float32))
    model = _model()
    opt = make_opt(model.parameters())
    scheduler = make_sched(opt) if make_sched else None

    def train_step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if scheduler is not None:
            scheduler.step()
        return loss

    step = tg.compile(train_step) if compiled else train_step
    history = []
    for _ in range(steps):
        loss = step(x, y).item()
        history.append((loss, [p.detach().numpy().copy() for p in model.parameters()],
                        [dict(g) for g in opt.param_groups]))
    return history, step


@pytest.mark.parametrize("name", list(COMPILED))
def test_compiled_train_step_matches_eager_and_compiles_once(name):
    make_opt, make_sched = COMPILED[name]
    eager, _ = _train(make_opt, make_sched, compiled=False)
    compiled, step = _train(make_opt, make_sched, compiled=True)
    for i, ((e_loss, e_params, e_groups), (c_loss, c_params, c_groups)) in enumerate(
            zip(eager, compiled)):
        np.testing.assert_allclose(c_loss, e_loss, rtol=RTOL_COMPILED, atol=ATOL_COMPILED)
        for a, b in zip(c_params, e_params):
            np.testing.assert_allclose(a, b, rtol=RTOL_COMPILED, atol=ATOL_COMPILED,
                                       err_msg=f"step {i}")
        for a, b in zip(c_groups, e_groups):     # the scheduler's lr and momentum
            assert {k: v for k, v in a.items() if k != "params"} == \
                {k: v for k, v in b.items() if k != "params"}, f"step {i}"
    # the first step makes the state (SGD's momentum buffers too) and runs eagerly
    assert step.stats["compiles"] == 1, step.explain()
    assert len(step.stats["eager_runs"]) == 1, step.explain()


class CountingScale:
    """A scale function that counts its calls: CyclicLR must call it as often as PyTorch's."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return 1.0 / (1 + 0.01 * self.calls)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_cyclic_calls_a_stateful_scale_fn_as_torch(kind):
    def run(lib):
        opt = make_optimizer(lib, kind)
        fn = CountingScale()
        scheduler = lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=3,
                                                    scale_fn=fn)
        out = []
        for _ in range(10):
            opt.step()
            scheduler.step()
            out.append(scheduler.get_last_lr() + momentum(opt))
        return out, fn.calls, scheduler.state_dict()["_scale_fn_custom"]
    (ours, calls, saved), (theirs, t_calls, t_saved) = run(tg), run(torch)
    assert calls == t_calls and saved == t_saved
    np.testing.assert_allclose(ours, theirs, rtol=1e-15, atol=0)


@pytest.mark.parametrize("foreach", FOREACH, ids=["loop", "fused"])
@pytest.mark.parametrize("cls, kw", [("Rprop", RPROP["all"]), ("ASGD", ASGD["all"]),
                                     ("Adafactor", ADAFACTOR["all"])])
def test_groups_with_their_own_options_a_parameter_without_grad_and_a_closure(cls, kw,
                                                                              foreach):
    """Two groups (the second with its own lr), one parameter never given a gradient (no
    state, never moved), the loss a closure returns."""
    dtype = "float64"
    init, grads = arrays(dtype, seed=6)

    def build(lib, params):
        groups = [{"params": params[:2]}, {"params": params[2:], "lr": 0.003}]
        return getattr(lib.optim, cls)(groups, foreach=foreach if lib is tg else False, **kw)
    g_params = [tg.tensor(a, requires_grad=True) for a in init]
    t_params = [torch.tensor(a, requires_grad=True) for a in init]
    g_opt, t_opt = build(tg, g_params), build(torch, t_params)
    for step, step_grads in enumerate(grads, 1):
        for p, tp, g in list(zip(g_params, t_params, step_grads))[:-1]:
            p.grad, tp.grad = tg.tensor(g), torch.tensor(g)
        assert g_opt.step(lambda: 7.0) == t_opt.step(lambda: 7.0) == 7.0
        for i, (p, tp) in enumerate(zip(g_params, t_params)):
            assert_close(p.detach().numpy(), tp.detach().numpy(), dtype, f"step {step} p{i}")
        assert_same_state(g_opt, t_opt, dtype, step)
    np.testing.assert_array_equal(g_params[-1].detach().numpy(), init[-1])
    assert g_params[-1] not in g_opt.state
