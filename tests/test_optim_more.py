"""RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam against PyTorch's ``foreach=False`` updates.

Both libraries start from the same parameters and get the same random
gradients, set directly on ``.grad``, for 15 steps; parameters and state must
agree to rounding (PyTorch's CPU kernels fuse some multiply-adds), and the
state dict must have PyTorch's structure.
"""
import copy

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.optim.adadelta import Adadelta
from tracegrad.optim.adagrad import Adagrad
from tracegrad.optim.adamax import Adamax
from tracegrad.optim.nadam import NAdam
from tracegrad.optim.radam import RAdam
from tracegrad.optim.rmsprop import RMSprop

from tolerances import close

OURS = {"RMSprop": RMSprop, "Adagrad": Adagrad, "Adadelta": Adadelta, "Adamax": Adamax,
        "NAdam": NAdam, "RAdam": RAdam}
SHAPES = [(4, 3), (3,), ()]
STEPS = 15
# Each step is about ten elementwise roundings per entry (the moment updates, a square root,
# a division, the bias corrections), which PyTorch's kernels may fuse into multiply-adds; the
# updates do not amplify a difference (each is a contraction of the state plus the new
# gradient), so after 15 steps the runs are within 150 operations' ulps, on values of order 1.
TOL = {dtype: close(dtype, n_ops=10 * STEPS) for dtype in ("float32", "float64")}


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)    # tiny tensors: threads only add contention on a busy machine
    return torch


def arrays(dtype, seed=0):
    """Initial parameters, then one list of gradients per step."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    return init, grads


def run(lib, opt, params, grads):
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = lib.tensor(g)
        opt.step()


def both(cls, kw, dtype):
    """Our optimizer and PyTorch's after all steps, with their parameters."""
    torch = _torch()
    init, grads = arrays(dtype)
    g_params = [tg.tensor(a, requires_grad=True) for a in init]
    t_params = [torch.tensor(a, requires_grad=True) for a in init]
    g_opt = OURS[cls](g_params, foreach=False, **kw)
    t_opt = getattr(torch.optim, cls)(t_params, foreach=False, **kw)
    run(tg, g_opt, g_params, grads)
    run(torch, t_opt, t_params, grads)
    return (g_opt, g_params), (t_opt, t_params)


def assert_matches(g_params, t_params, sd, tsd, dtype):
    for i, (p, tp) in enumerate(zip(g_params, t_params)):
        assert p.dtype.name == dtype
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), err_msg=f"param {i}",
                                   **TOL[dtype])
    assert sd["param_groups"] == tsd["param_groups"]
    assert list(sd["state"]) == list(tsd["state"])
    for i in sd["state"]:
        assert list(sd["state"][i]) == list(tsd["state"][i])
        for key, value in sd["state"][i].items():
            tvalue = tsd["state"][i][key]
            assert tuple(value.shape) == tuple(tvalue.shape), key
            assert value.dtype.name == str(tvalue.dtype).split(".")[1], key
            np.testing.assert_allclose(value.numpy(), tvalue.numpy(), err_msg=key, **TOL[dtype])


CONFIGS = {
    "rmsprop": ("RMSprop", {"lr": 0.01}, "float32"),
    "rmsprop_momentum_wd": ("RMSprop", {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1,
                                        "alpha": 0.9}, "float64"),
    "rmsprop_centered": ("RMSprop", {"lr": 0.01, "centered": True, "eps": 1e-6}, "float32"),
    "rmsprop_all": ("RMSprop", {"lr": 0.005, "centered": True, "momentum": 0.5,
                                "maximize": True, "weight_decay": 0.01}, "float64"),
    "adagrad": ("Adagrad", {"lr": 0.1}, "float32"),
    "adagrad_decay": ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1},
                      "float64"),
    "adagrad_init_max": ("Adagrad", {"lr": 0.05, "initial_accumulator_value": 0.5,
                                     "eps": 1e-6, "maximize": True}, "float32"),
    "adagrad_all": ("Adagrad", {"lr": 0.05, "lr_decay": 0.01, "weight_decay": 0.01,
                                "initial_accumulator_value": 0.1, "maximize": True}, "float64"),
    "adadelta": ("Adadelta", {}, "float32"),
    "adadelta_f64": ("Adadelta", {}, "float64"),
    "adadelta_all": ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1,
                                  "maximize": True}, "float32"),
    "adadelta_all_f64": ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1,
                                      "maximize": True}, "float64"),
    "adamax": ("Adamax", {"lr": 0.02}, "float32"),
    "adamax_wd": ("Adamax", {"lr": 0.02, "weight_decay": 0.1, "betas": (0.8, 0.99)}, "float64"),
    "adamax_max_eps": ("Adamax", {"lr": 0.01, "maximize": True, "eps": 1e-3}, "float32"),
    "adamax_all": ("Adamax", {"lr": 0.01, "betas": (0.7, 0.9), "eps": 1e-4, "weight_decay": 0.05,
                              "maximize": True}, "float64"),
    "nadam": ("NAdam", {"lr": 0.01}, "float32"),
    "nadam_wd": ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "momentum_decay": 0.01},
                 "float64"),
    "nadam_decoupled": ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True,
                                  "betas": (0.8, 0.99), "eps": 1e-6}, "float32"),
    "nadam_all": ("NAdam", {"lr": 0.01, "weight_decay": 0.05, "decoupled_weight_decay": True,
                            "momentum_decay": 0.1, "maximize": True}, "float64"),
    # beta2 = 0.999 keeps rho_t <= 5 for the first 5 steps, then rectifies
    "radam": ("RAdam", {"lr": 0.01}, "float32"),
    "radam_wd": ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "eps": 1e-6}, "float64"),
    "radam_decoupled": ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True,
                                  "betas": (0.8, 0.99)}, "float32"),
    "radam_all": ("RAdam", {"lr": 0.01, "weight_decay": 0.05, "decoupled_weight_decay": True,
                            "betas": (0.5, 0.9), "maximize": True}, "float64"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_steps_match_torch(name):
    cls, kw, dtype = CONFIGS[name]
    (g_opt, g_params), (t_opt, t_params) = both(cls, kw, dtype)
    assert_matches(g_params, t_params, g_opt.state_dict(), t_opt.state_dict(), dtype)


@pytest.mark.parametrize("name", ["rmsprop_all", "adagrad_all", "adadelta_all", "adamax_all",
                                  "nadam_decoupled", "radam_all"])
def test_state_dict_round_trip(name):
    """A new optimizer loaded halfway continues exactly as the original."""
    cls, kw, dtype = CONFIGS[name]
    init, grads = arrays(dtype, seed=1)
    params = [tg.tensor(a, requires_grad=True) for a in init]
    opt = OURS[cls](params, **kw)
    run(tg, opt, params, grads[:7])
    params2 = [p.detach().clone().requires_grad_() for p in params]
    opt2 = OURS[cls](params2, lr=1.0)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert opt2.param_groups[0]["lr"] == kw["lr"]
    assert all(a is b for a, b in zip(opt2.param_groups[0]["params"], params2))
    run(tg, opt, params, grads[7:])
    run(tg, opt2, params2, grads[7:])
    for p, q in zip(params, params2):
        assert p.equal(q)
    assert opt2.state[params2[0]]["step"].item() == STEPS


def test_nadam_mu_product_takes_a_float64_params_dtype_on_load_like_torch():
    """PyTorch's load_state_dict casts every state tensor but ``step`` to the parameter's
    dtype, ``mu_product`` included, so a float64 NAdam resumes with a float64 product."""
    torch = _torch()
    p, tp = tg.zeros(3, dtype=tg.float64, requires_grad=True), torch.zeros(
        3, dtype=torch.float64, requires_grad=True)
    opt, topt = NAdam([p]), torch.optim.NAdam([tp])
    run(tg, opt, [p], [[np.ones(3)]])
    run(torch, topt, [tp], [[np.ones(3)]])
    opt2, topt2 = NAdam([p]), torch.optim.NAdam([tp])
    opt2.load_state_dict(opt.state_dict())
    topt2.load_state_dict(topt.state_dict())
    assert {k: v.dtype.name for k, v in opt2.state[p].items()} == {
        k: str(v.dtype).split(".")[1] for k, v in topt2.state[tp].items()}


def test_adagrad_state_is_made_for_every_parameter_up_front_like_torch():
    torch = _torch()
    opt = Adagrad([tg.ones(2, requires_grad=True)], initial_accumulator_value=0.25)
    tsd = torch.optim.Adagrad([torch.ones(2, requires_grad=True)],
                              initial_accumulator_value=0.25).state_dict()
    sd = opt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert {k: list(v) for k, v in sd["state"].items()} == {
        k: list(v) for k, v in tsd["state"].items()}
    assert sd["state"][0]["sum"].tolist() == [0.25, 0.25]


@pytest.mark.parametrize("cls", list(OURS))
def test_invalid_learning_rate(cls):
    with pytest.raises(ValueError, match="Invalid learning rate: -0.5"):
        OURS[cls]([tg.ones(2, requires_grad=True)], lr=-0.5)


def test_adadelta_options_and_errors_like_torch():
    torch = _torch()
    p = tg.zeros(2, requires_grad=True)
    opt = Adadelta([p], foreach=True, capturable=True, differentiable=False)
    tp = torch.zeros(2, requires_grad=True)
    t_opt = torch.optim.Adadelta([tp])
    assert set(opt.param_groups[0]) == set(t_opt.param_groups[0])
    assert opt.defaults["lr"] == t_opt.defaults["lr"] == 1.0
    assert opt.defaults["rho"] == t_opt.defaults["rho"] == 0.9
    assert opt.defaults["eps"] == t_opt.defaults["eps"] == 1e-6
    for kw, msg in (({"lr": -1.0}, "Invalid learning rate"), ({"rho": 1.5}, "Invalid rho value"),
                    ({"eps": -1.0}, "Invalid epsilon value"),
                    ({"weight_decay": -1.0}, "Invalid weight_decay value")):
        with pytest.raises(ValueError, match=msg):
            Adadelta([p], **kw)
        with pytest.raises(ValueError, match=msg):
            torch.optim.Adadelta([tp], **kw)
    opt.step()                      # no gradient yet: no state, as in PyTorch
    assert opt.state_dict()["state"] == {}
