"""tracegrad.optim against PyTorch: 100 steps from identical weights on identical data.

The updates follow PyTorch's single-tensor formulas op for op, so float32
parameters agree to float32 rounding (PyTorch's CPU kernels fuse some
multiply-adds, hence a tolerance rather than bit equality).
"""
import copy

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn, optim

from tolerances import assert_close_normwise, close, ulps

# One training step is a forward and backward of the MLP (sums of at most 16 products, a
# tanh, a softmax over 3 classes) and the update: about 40 float32 roundings, which PyTorch's
# kernels may fuse or reorder. A difference in one step's gradient moves the parameters by
# lr times it, and the steps add up, so the parameters stay within one step's ulps times the
# distance they travel (lr x steps x |update|: of order 1 here, for every configuration).
STEP_OPS = 40
TOL = close("float32", n_ops=STEP_OPS, scale=1.0)


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)    # tiny tensors: threads only add contention on a busy machine
    return torch


def models():
    """The same small MLP in both libraries, with PyTorch's weights copied into ours."""
    torch = _torch()
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    gm = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))
    gm.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return gm, tm


def data(steps):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((8, 5)).astype(np.float32),
             rng.integers(0, 3, 8)) for _ in range(steps)]


def train(lib, model, opt, batches):
    F = lib.nn.functional
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(lib.tensor(x)), lib.tensor(y))
        loss.backward()
        opt.step()
    return loss.item()


def assert_same_params(gm, tm, rtol=TOL["rtol"], atol=TOL["atol"]):
    for (name, p), (tname, tp) in zip(gm.named_parameters(), tm.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=name)


CONFIGS = {
    "sgd": ("SGD", {"lr": 0.1}),
    "sgd_momentum": ("SGD", {"lr": 0.05, "momentum": 0.9}),
    "sgd_dampening": ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
    "sgd_nesterov_wd": ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True,
                                "weight_decay": 0.01}),
    "sgd_maximize": ("SGD", {"lr": 0.01, "momentum": 0.5, "maximize": True}),
    "adam": ("Adam", {"lr": 0.01}),
    "adam_wd": ("Adam", {"lr": 0.01, "weight_decay": 0.05, "betas": (0.8, 0.99)}),
    "adam_amsgrad": ("Adam", {"lr": 0.01, "amsgrad": True}),
    "adam_maximize": ("Adam", {"lr": 0.001, "maximize": True, "eps": 1e-6}),
    "adamw": ("AdamW", {"lr": 0.01}),
    "adamw_amsgrad": ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_100_steps_match_torch(name):
    torch = _torch()
    cls, kw = CONFIGS[name]
    gm, tm = models()
    params = list(gm.parameters())
    g_opt = getattr(optim, cls)(gm.parameters(), **kw)
    t_opt = getattr(torch.optim, cls)(tm.parameters(), foreach=False, **kw)
    batches = data(100)
    g_loss = train(tg, gm, g_opt, batches)
    t_loss = train(torch, tm, t_opt, batches)
    assert_same_params(gm, tm)
    # the last loss: one more forward on parameters within TOL of each other
    assert abs(g_loss - t_loss) <= 2 * (TOL["rtol"] * abs(t_loss) + TOL["atol"])
    assert [id(p) for p in gm.parameters()] == [id(p) for p in params]   # updated in place
    assert all(p._version >= 100 for p in params)


def test_param_groups_with_their_own_options():
    torch = _torch()
    gm, tm = models()

    def groups(m, lib_opt):
        return lib_opt.SGD([{"params": m[0].parameters()},
                            {"params": m[2].parameters(), "lr": 0.01, "momentum": 0.5}],
                           lr=0.1, momentum=0.9)
    g_opt, t_opt = groups(gm, optim), groups(tm, torch.optim)
    assert g_opt.param_groups[1]["lr"] == 0.01 and g_opt.param_groups[0]["momentum"] == 0.9
    batches = data(30)
    train(tg, gm, g_opt, batches)
    train(torch, tm, t_opt, batches)
    assert_same_params(gm, tm)
    assert repr(g_opt) == repr(t_opt)


@pytest.mark.parametrize("cls,kw", [("SGD", {"lr": 0.05, "momentum": 0.9}),
                                    ("Adam", {"lr": 0.01, "amsgrad": True}),
                                    ("AdamW", {"lr": 0.01})])
def test_state_dict_format_and_round_trip(cls, kw):
    torch = _torch()
    gm, tm = models()
    g_opt = getattr(optim, cls)(gm.parameters(), **kw)
    t_opt = getattr(torch.optim, cls)(tm.parameters(), **kw)
    batches = data(20)
    train(tg, gm, g_opt, batches[:10])
    train(torch, tm, t_opt, batches[:10])
    sd, tsd = g_opt.state_dict(), t_opt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert list(sd["state"]) == list(tsd["state"]) == [0, 1, 2, 3]
    for i in sd["state"]:
        assert list(sd["state"][i]) == list(tsd["state"][i])
        for key, value in sd["state"][i].items():
            assert value.dtype.name == str(tsd["state"][i][key].dtype).split(".")[1], key
            # the moments average the 10 steps' gradients, each within a step's ulps of
            # the tensor's own scale (an element near zero keeps the others' error)
            assert_close_normwise(value.numpy(), tsd["state"][i][key].numpy(),
                                  ulps("float32", STEP_OPS * 10), err_msg=key)
    # a new model and optimizer resume from the copies and follow the original exactly
    gm2 = copy.deepcopy(gm)
    opt2 = getattr(optim, cls)(gm2.parameters(), lr=1.0)
    opt2.load_state_dict(copy.deepcopy(sd))
    assert opt2.param_groups[0]["lr"] == kw["lr"]
    assert all(a is b for a, b in zip(opt2.param_groups[0]["params"], gm2.parameters()))
    train(tg, gm, g_opt, batches[10:])
    train(tg, gm2, opt2, batches[10:])
    # bit for bit: the same code on the same state and data in one process rounds the same
    # way; a difference is state that the dict failed to carry
    for p, q in zip(gm.parameters(), gm2.parameters()):
        assert p.equal(q)


def test_load_state_dict_from_torch():
    torch = _torch()
    gm, tm = models()
    t_opt = torch.optim.Adam(tm.parameters(), lr=0.01)
    batches = data(20)
    train(torch, tm, t_opt, batches[:10])
    gm.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tsd = t_opt.state_dict()
    sd = {"param_groups": tsd["param_groups"],
          "state": {i: {k: tg.tensor(v.numpy()) for k, v in s.items()}
                    for i, s in tsd["state"].items()}}
    g_opt = optim.Adam(gm.parameters())
    g_opt.load_state_dict(sd)
    train(tg, gm, g_opt, batches[10:])
    train(torch, tm, t_opt, batches[10:])
    assert_same_params(gm, tm)


def test_load_state_dict_mismatches():
    gm, _ = models()
    opt = optim.SGD(gm.parameters(), lr=0.1)
    other = optim.SGD([{"params": gm[0].parameters()}, {"params": gm[2].parameters()}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(other.state_dict())
    small = optim.SGD(gm[0].parameters(), lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(small.state_dict())


def test_zero_grad_and_no_grad_step():
    gm, _ = models()
    opt = optim.SGD(gm.parameters(), lr=0.1)
    gm(tg.randn(2, 5)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in gm.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in gm.parameters())
    gm(tg.randn(2, 5)).sum().backward()
    opt.step()
    assert all(p.is_leaf and p.grad_fn is None for p in gm.parameters())
    assert tg.is_grad_enabled()


def test_step_with_closure_and_params_without_grad():
    w = nn.Parameter(tg.tensor([1.0, 2.0]))
    unused = nn.Parameter(tg.tensor([5.0]))
    opt = optim.Adam([w, unused], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    assert opt.step(closure).item() == 5.0
    assert unused.item() == 5.0 and unused not in opt.state
    assert opt.state[w]["step"].item() == 1.0 and w.detach().numpy().max() < 2.0


def test_named_parameters_are_accepted():
    gm, _ = models()
    opt = optim.SGD(gm.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == [n for n, _ in gm.named_parameters()]


def test_constructor_errors():
    p = [nn.Parameter(tg.ones(1))]
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.SGD(p, lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero "
                                         "dampening"):
        optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.Adam(p[0])
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": set(p)}])
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": p}, {"params": p}])
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p[0] * 2])
