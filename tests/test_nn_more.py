"""More of ``nn.functional`` and ``nn`` against PyTorch: leaky_relu, elu, softplus, mish,
hardswish, hardsigmoid, prelu, glu, normalize, cosine_similarity and the smooth L1, Huber
and KL-divergence losses, with their modules.

Each function runs on the same float64 and float32 input in both libraries (values and
gradients), through ``gradcheck``/``gradgradcheck`` in float64, and compiled against eager
on the NumPy and C tiers. Inputs keep |x - kink| > 1e-3 so finite differences stay on one
side of a kink; the kinks themselves are pinned separately.
"""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.autograd import gradcheck, gradgradcheck
from tracegrad.nn import functional as F

from tolerances import close


def _tol(dtype):
    """The functions here are a few dozen operations deep with their backward (mish: an exp,
    a log1p, a tanh and their derivatives; a norm: a sum over a row and a root), on inputs
    up to a few hundred (the *_large cases scale x by 300-400), and PyTorch's vectorised
    exp/log/tanh round a few ulps from NumPy's."""
    return close(dtype, n_ops=32, scale=16)


# PyTorch's hardsigmoid backward multiplies by 1/6 rounded to float32, even in float64: a
# relative error of 3e-8 that no rounding of ours reproduces.
HARDSIGMOID_SIXTH = abs(float(np.float32(1 / 6)) - 1 / 6) * 6


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _away(x, kinks, gap=1e-3):
    """``x`` with every entry within ``gap`` of a kink pushed ``2 * gap`` away."""
    x = x.copy()
    for k in kinks:
        near = np.abs(x - k) < gap
        x[near] = k + 2 * gap
    return x


def _x(*shape, seed=0, scale=3.0, kinks=(0.0,)):
    return _away(np.random.default_rng(seed).standard_normal(shape) * scale, kinks)


# name -> (tracegrad fn, torch fn name/callable, input kinks, smooth)
# each fn takes (lib, x) or (lib, x, y) with lib the functional module
UNARY = {
    "leaky_relu": (lambda F, x: F.leaky_relu(x, 0.1), (0.0,), False),
    "leaky_relu_default": (lambda F, x: F.leaky_relu(x), (0.0,), False),
    "elu": (lambda F, x: F.elu(x, alpha=0.7), (0.0,), False),
    "elu_large": (lambda F, x: F.elu(x * 300), (0.0,), False),
    "softplus": (lambda F, x: F.softplus(x), (), True),
    "softplus_beta": (lambda F, x: F.softplus(x, beta=2.0, threshold=3.0), (1.5,), False),
    "softplus_large": (lambda F, x: F.softplus(x * 400), (), False),
    "logsigmoid": (lambda F, x: F.logsigmoid(x), (), True),
    "mish": (lambda F, x: F.mish(x), (), True),
    "mish_large": (lambda F, x: F.mish(x * 400), (), False),
    "hardswish": (lambda F, x: F.hardswish(x), (-3.0, 3.0), False),
    "hardsigmoid": (lambda F, x: F.hardsigmoid(x), (-3.0, 3.0), False),
    "glu": (lambda F, x: F.glu(x), (), True),
    "glu_dim1": (lambda F, x: F.glu(x, 1), (), True),
    "normalize": (lambda F, x: F.normalize(x), (), True),
    "normalize_p1_dim0": (lambda F, x: F.normalize(x, p=1.0, dim=0), (0.0,), False),
    "normalize_p3": (lambda F, x: F.normalize(x, p=3.0, dim=-1), (0.0,), False),
}

BINARY = {
    "prelu_scalar": (lambda F, x, w: F.prelu(x, w[:1]), (0.0,), False),
    "prelu_channels": (lambda F, x, w: F.prelu(x, w), (0.0,), False),
    "cosine_similarity": (lambda F, x, y: F.cosine_similarity(x, y), (), True),
    "cosine_similarity_dim": (lambda F, x, y: F.cosine_similarity(x, y, dim=-1, eps=1e-6),
                              (), True),
}


def _second(name, shape):
    if name.startswith("prelu"):
        return np.random.default_rng(7).uniform(-0.5, 0.5, shape[1])
    return np.random.default_rng(7).standard_normal(shape) * 2


def _check_torch(fn, arrays, dtype, rtol, atol):
    torch = _torch()
    tdt = torch.float64 if dtype is tg.float64 else torch.float32
    ta = [torch.tensor(a, dtype=tdt, requires_grad=True) for a in arrays]
    ga = [tg.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    yt, yg = fn(torch.nn.functional, *ta), fn(F, *ga)
    assert yg.dtype is dtype
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=atol)
    w = np.random.default_rng(3).standard_normal(yt.shape)
    gt = torch.autograd.grad(yt, ta, torch.tensor(w, dtype=tdt))
    gg = tg.autograd.grad(yg, ga, tg.tensor(w, dtype=dtype))
    for a, b in zip(gg, gt):
        assert np.isfinite(a.numpy()).all()
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol)


CASES = {**{k: (v[0], v[1], v[2], 1) for k, v in UNARY.items()},
         **{k: (v[0], v[1], v[2], 2) for k, v in BINARY.items()}}


def _arrays(name, nargs):
    x = _x(4, 6, kinks=CASES[name][1])
    return [x] if nargs == 1 else [x, _second(name, x.shape)]


@pytest.mark.parametrize("dtype", [tg.float64, tg.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(CASES))
def test_functional_matches_torch(name, dtype):
    fn, _, _, nargs = CASES[name]
    tol = _tol(dtype)
    if name == "hardsigmoid":
        tol["rtol"] += 2 * HARDSIGMOID_SIXTH
    _check_torch(fn, _arrays(name, nargs), dtype, **tol)


@pytest.mark.parametrize("name", [k for k, v in CASES.items() if v[2]])
def test_gradcheck_and_gradgradcheck(name):
    fn, _, _, nargs = CASES[name]
    ts = [tg.tensor(a, requires_grad=True) for a in _arrays(name, nargs)]
    f = lambda *a: fn(F, *a)    # noqa: E731
    assert gradcheck(f, ts)
    assert gradgradcheck(f, ts)


# (the *_large cases scale the input by hundreds: finite differences cannot resolve them)
@pytest.mark.parametrize("name", [k for k, v in CASES.items()
                                  if not v[2] and not k.endswith("_large")])
def test_gradcheck_piecewise_away_from_kinks(name):
    fn, _, _, nargs = CASES[name]
    ts = [tg.tensor(a, requires_grad=True) for a in _arrays(name, nargs)]
    assert gradcheck(lambda *a: fn(F, *a), ts)


@pytest.mark.parametrize("backend", ["numpy", "c"])
@pytest.mark.parametrize("dtype", [tg.float64, tg.float32], ids=["f64", "f32"])
def test_compiled_matches_eager(backend, dtype):
    tol = _tol(dtype)   # the C tier has its own exp/log/tanh (the C library's)
    for name, (fn, _, _, nargs) in CASES.items():
        arrays = _arrays(name, nargs)
        compiled = tg.compile(lambda *a, fn=fn: fn(F, *a), backend=backend)
        results = []
        for f in (lambda *a: fn(F, *a), compiled):
            ts = [tg.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
            y = f(*ts)
            w = tg.tensor(np.random.default_rng(3).standard_normal(y.shape), dtype=dtype)
            results.append([y.detach().numpy()] + [g.numpy() for g in
                                                   tg.autograd.grad(y, ts, w)])
        for a, b in zip(*results):
            np.testing.assert_allclose(a, b, err_msg=name, **tol)


def test_kinks_match_torch():
    """The slope exactly at each kink is PyTorch's."""
    _torch()
    x = np.array([-3.0, -1.0, 0.0, 1.0, 3.0, 1.5])
    for fn in (lambda F, x: F.leaky_relu(x, 0.2), lambda F, x: F.elu(x, 0.5),
               lambda F, x: F.hardswish(x), lambda F, x: F.hardsigmoid(x),
               lambda F, x: F.softplus(x, beta=2.0, threshold=3.0), lambda F, x: F.mish(x),
               lambda F, x: F.logsigmoid(x)):
        _check_torch(fn, [x], tg.float64, _tol(tg.float64)["rtol"] + 2 * HARDSIGMOID_SIXTH,
                     _tol(tg.float64)["atol"])
    _check_torch(lambda F, x, w: F.prelu(x, w), [x, np.array([0.3])], tg.float64,
                 **_tol(tg.float64))


def test_zero_vectors_normalize_and_cosine_similarity():
    # PyTorch's norm has a zero gradient at a zero vector; the eps clamps take over
    x = np.zeros((2, 3))
    x[1] = [1.0, -2.0, 0.5]
    _check_torch(lambda F, x: F.normalize(x), [x], tg.float64, **_tol(tg.float64))
    _check_torch(lambda F, x: F.normalize(x, p=3.0), [x], tg.float64, **_tol(tg.float64))
    y = np.ones((2, 3))
    _check_torch(lambda F, a, b: F.cosine_similarity(a, b), [x, y], tg.float64,
                 **_tol(tg.float64))
    tiny = np.full((2, 3), 1e-10)
    # the gradient of the tiny vector is of order 1e10: its ulps count relative to that
    _check_torch(lambda F, a, b: F.cosine_similarity(a, b), [tiny, y], tg.float64,
                 **_tol(tg.float64))


def test_cosine_similarity_broadcasts():
    _check_torch(lambda F, a, b: F.cosine_similarity(a, b[:1], dim=-1),
                 [_x(3, 4), _x(3, 4, seed=1)], tg.float64, **_tol(tg.float64))


# inplace ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["leaky_relu", "elu", "mish", "hardswish", "hardsigmoid"])
def test_inplace_matches_out_of_place(name):
    torch = _torch()
    x = _x(3, 4, kinks=(0.0, -3.0, 3.0))
    out = getattr(torch.nn.functional, name)(torch.tensor(x).clone(), inplace=True)
    a = tg.tensor(x, requires_grad=True)
    h = a * 1
    y = getattr(F, name)(h, inplace=True)
    assert y is h and h._version == 1
    np.testing.assert_allclose(y.detach().numpy(), out.numpy(), **_tol(tg.float64),
                               err_msg=name)
    y.sum().backward()
    b = tg.tensor(x, requires_grad=True)
    getattr(F, name)(b).sum().backward()
    # the in-place backward recomputes from the saved output where the out-of-place one
    # uses the input: the same function by another formula
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **_tol(tg.float64))


# modules ------------------------------------------------------------------------------------

MODULES = {
    "LeakyReLU": lambda m: m.LeakyReLU(), "LeakyReLU2": lambda m: m.LeakyReLU(0.2, inplace=True),
    "ELU": lambda m: m.ELU(), "ELU2": lambda m: m.ELU(alpha=0.5, inplace=True),
    "Softplus": lambda m: m.Softplus(), "Softplus2": lambda m: m.Softplus(beta=2, threshold=5),
    "Mish": lambda m: m.Mish(), "Hardswish": lambda m: m.Hardswish(),
    "Hardsigmoid": lambda m: m.Hardsigmoid(inplace=True), "PReLU": lambda m: m.PReLU(),
    "PReLU3": lambda m: m.PReLU(3, init=0.1), "GLU": lambda m: m.GLU(),
    "GLU0": lambda m: m.GLU(dim=0), "Hardswish2": lambda m: m.Hardswish(inplace=True),
    "Mish2": lambda m: m.Mish(inplace=True),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_torch(name, dtype):
    torch = _torch()
    th, g = MODULES[name](torch.nn), MODULES[name](nn)
    assert repr(g) == repr(th)
    th.to(getattr(torch, dtype)), g.to(getattr(tg, dtype))
    x = _x(2, 3, 4, kinks=(0.0, -3.0, 3.0))
    xt = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    xg = tg.tensor(x, dtype=getattr(tg, dtype), requires_grad=True)
    yt, yg = th(xt * 1), g(xg * 1)     # * 1: the inplace ones may not write into a leaf
    tol = _tol(dtype)
    if name == "Hardsigmoid":
        tol["rtol"] += 2 * HARDSIGMOID_SIXTH
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), **tol)
    yt.sum().backward()
    yg.sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), **tol)
    for (n1, p1), (n2, p2) in zip(g.named_parameters(), th.named_parameters()):
        assert n1 == n2
        np.testing.assert_allclose(p1.grad.numpy(), p2.grad.numpy(), **tol)


def test_prelu_parameter_and_state_dict():
    torch = _torch()
    m = nn.PReLU(3, init=0.1)
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    assert list(m.state_dict()) == list(torch.nn.PReLU(3).state_dict()) == ["weight"]
    # exact: the init value is stored, rounded to float32 once as NumPy rounds it
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.full(3, 0.1, np.float32))
    assert m.weight.dtype is tg.float32
    m.load_state_dict({"weight": tg.tensor([0.5, 1.0, 2.0])})
    # exact: powers of two times -2
    np.testing.assert_array_equal(m(tg.full((1, 3), -2.0)).detach().numpy(), [[-1.0, -2.0, -4.0]])
    assert nn.PReLU(dtype=tg.float64).weight.dtype is tg.float64
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel "
                                           "size. Found parameter numbers = 3 and channel "
                                           "size = 4."):
        m(tg.ones(2, 4))
    with pytest.raises(RuntimeError, match="Type promoting not supported"):
        F.prelu(tg.ones(2, 3, dtype=tg.float64), tg.ones(1))


def test_glu_errors_like_torch():
    torch = _torch()
    for bad, msg in ((tg.ones(2, 5), "Halving dimension must be even, but dimension 1 is size 5"),
                     (tg.tensor(1.0), "glu does not support scalars")):
        with pytest.raises(RuntimeError, match=msg):
            F.glu(bad)
        with pytest.raises(RuntimeError, match=msg):
            torch.nn.functional.glu(torch.tensor(bad.numpy()))


# losses -------------------------------------------------------------------------------------

LOSSES = {
    "smooth_l1": lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r),
    "smooth_l1_beta": lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.5),
    "smooth_l1_beta0": lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0),
    "huber": lambda F, x, t, r: F.huber_loss(x, t, reduction=r),
    "huber_delta": lambda F, x, t, r: F.huber_loss(x, t, reduction=r, delta=2.5),
    "kl_div": lambda F, x, t, r: F.kl_div(x, t, reduction=r),
    "kl_div_log_target": lambda F, x, t, r: F.kl_div(x, t, reduction=r, log_target=True),
}


def _loss_inputs(name):
    rng = np.random.default_rng(11)
    if name.startswith("kl_div"):
        x = np.log(rng.dirichlet(np.ones(5), size=4))
        t = rng.dirichlet(np.ones(5), size=4)
        t[0, 0] = 0.0           # xlogy(0, 0) = 0
        return x, (np.log(t + 0.1) if name.endswith("log_target") else t)
    x, t = rng.standard_normal((4, 5)) * 2, rng.standard_normal((4, 5))
    # keep |x - t| away from 0 and from beta/delta
    d = _away(x - t, (0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5), gap=1e-2)
    return t + d, t


@pytest.mark.parametrize("dtype", [tg.float64, tg.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "batchmean"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_losses_match_torch(name, reduction, dtype):
    if reduction == "batchmean" and not name.startswith("kl_div"):
        with pytest.raises(ValueError, match="batchmean is not a valid value for reduction"):
            LOSSES[name](F, tg.ones(2), tg.ones(2), reduction)
        return
    torch = _torch()
    fn = LOSSES[name]
    tol = _tol(dtype)       # a loss over 20 elements: its sum is within the 32 operations
    x, t = _loss_inputs(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # kl_div's 'mean' warning, checked below
        _check_torch(lambda F, a, b: fn(F, a, b, reduction), [x, t] if "kl" not in name or
                     "log_target" in name else [x, np.where(t == 0, 0.3, t)], dtype, **tol)
        # with a zero in the target, the gradient of the input only (PyTorch's target
        # gradient is NaN there)
        tdt = torch.float64 if dtype is tg.float64 else torch.float32
        xt = torch.tensor(x, dtype=tdt, requires_grad=True)
        xg = tg.tensor(x, dtype=dtype, requires_grad=True)
        lt, lg = fn(torch.nn.functional, xt, torch.tensor(t, dtype=tdt), reduction), \
            fn(F, xg, tg.tensor(t, dtype=dtype), reduction)
    np.testing.assert_allclose(lg.detach().numpy(), lt.detach().numpy(), **tol)
    lt.sum().backward()
    lg.sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), **tol)


@pytest.mark.parametrize("name", list(LOSSES))
def test_losses_gradcheck_and_compiled(name):
    fn = LOSSES[name]
    x, t = _loss_inputs(name)
    if name == "kl_div":
        t = np.where(t == 0, 0.3, t)
    reduction = "batchmean" if name.startswith("kl") else "mean"
    f = lambda a, b: fn(F, a, b, reduction)    # noqa: E731
    args = [tg.tensor(x, requires_grad=True), tg.tensor(t, requires_grad=True)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(f, args)
        if not name.startswith(("smooth_l1", "huber")):     # piecewise quadratic: f'' jumps
            assert gradgradcheck(f, args)
        for backend in ("numpy", "c"):
            compiled = tg.compile(f, backend=backend)
            for g in (f, compiled):
                ts = [tg.tensor(a, requires_grad=True) for a in (x, t)]
                y = g(*ts)
                grads = tg.autograd.grad(y, ts)
                if g is f:
                    want = [y.item()] + [a.numpy() for a in grads]
                else:
                    got = [y.item()] + [a.numpy() for a in grads]
                    for a, b in zip(got, want):
                        np.testing.assert_allclose(a, b, **_tol(tg.float64), err_msg=backend)


def test_loss_modules_match_functional_and_repr():
    torch = _torch()
    x, t = _loss_inputs("smooth_l1")
    pairs = [(nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)),
             (nn.SmoothL1Loss(reduction="sum"), torch.nn.SmoothL1Loss(reduction="sum")),
             (nn.HuberLoss(delta=2.0, reduction="none"),
              torch.nn.HuberLoss(delta=2.0, reduction="none")),
             (nn.KLDivLoss(reduction="batchmean"), torch.nn.KLDivLoss(reduction="batchmean")),
             (nn.KLDivLoss(reduction="sum", log_target=True),
              torch.nn.KLDivLoss(reduction="sum", log_target=True))]
    for g, th in pairs:
        assert repr(g) == repr(th)
        a, b = (_loss_inputs("kl_div_log_target" if g.log_target else "kl_div")
                if isinstance(g, nn.KLDivLoss) else (x, t))
        np.testing.assert_allclose(g(tg.tensor(a), tg.tensor(b)).numpy(),
                                   th(torch.tensor(a), torch.tensor(b)).numpy(),
                                   **_tol(tg.float64))


def test_loss_warnings_and_errors_like_torch():
    torch = _torch()
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss by both"):
        F.kl_div(tg.zeros(2, 3), tg.ones(2, 3))
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss by both"):
        nn.KLDivLoss()(tg.zeros(2, 3), tg.ones(2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.kl_div(tg.zeros(2, 3), tg.ones(2, 3), reduction="batchmean")
    for fn in (F.smooth_l1_loss, F.huber_loss):
        with pytest.warns(UserWarning, match="different to the input size"):
            fn(tg.ones(3, 1), tg.ones(3))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values"):
        F.smooth_l1_loss(tg.ones(3), tg.ones(3), beta=-1.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values"):
        F.huber_loss(tg.ones(3), tg.ones(3), delta=0.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values"):
        torch.nn.functional.huber_loss(torch.ones(3), torch.ones(3), delta=0.0)
    # a 0-d input under batchmean: the plain sum, as in PyTorch
    np.testing.assert_allclose(
        F.kl_div(tg.tensor(-1.0), tg.tensor(0.5), reduction="batchmean").item(),
        torch.nn.functional.kl_div(torch.tensor(-1.0), torch.tensor(0.5),
                                   reduction="batchmean").item(), **_tol(tg.float32))


def test_all_new_names_are_exported():
    for name in ("LeakyReLU", "ELU", "Softplus", "Mish", "Hardswish", "Hardsigmoid", "PReLU",
                 "GLU", "SmoothL1Loss", "HuberLoss", "KLDivLoss"):
        assert name in nn.__all__ and getattr(nn, name).__name__ == name


# ParameterList, ParameterDict, Unflatten, full backward hooks -----------------------------


def test_parameter_list_and_dict_register_like_torch():
    torch = _torch()

    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.plist = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)),
                                                   lib.zeros(3)])
                self.plist.append(lib.nn.Parameter(lib.ones(1, 2)))
                self.pdict = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(4))})
                self.pdict["b"] = lib.zeros(2, 2)
                self.pdict.update({"c": lib.nn.Parameter(lib.ones(1))})
        return Net()
    ref, mine = build(torch), build(tg)
    assert [(k, tuple(v.shape)) for k, v in mine.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in ref.state_dict().items()]
    assert [n for n, _ in mine.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert len(mine.plist) == 3 and len(mine.pdict) == 3
    assert isinstance(mine.plist[1], nn.Parameter) and mine.plist[1].requires_grad
    assert isinstance(mine.pdict["b"], nn.Parameter)
    assert list(mine.pdict.keys()) == ["a", "b", "c"] and "b" in mine.pdict
    assert [tuple(p.shape) for p in mine.plist] == [(2,), (3,), (1, 2)]
    assert tuple(mine.plist[-1].shape) == (1, 2) and len(mine.plist[1:]) == 2
    mine.plist[0] = nn.Parameter(tg.zeros(5))
    assert tuple(mine.state_dict()["plist.0"].shape) == (5,)
    popped = mine.pdict.pop("a")
    assert tuple(popped.shape) == (4,) and "pdict.a" not in mine.state_dict()
    # parameters in the containers train
    loss = sum((p * p).sum() for p in mine.plist) + mine.pdict["c"].sum()
    loss.backward()
    # exact: d(p * p)/dp at p = 1 (the containers' fill) is 2, and ones sum to one
    np.testing.assert_array_equal(mine.plist[2].grad.numpy(), 2 * np.ones((1, 2)))
    np.testing.assert_array_equal(mine.pdict["c"].grad.numpy(), np.ones(1))


def test_unflatten_and_flatten_match_torch():
    torch = _torch()
    x = np.arange(24.0).reshape(2, 12)
    # a reshape moves values without arithmetic: exact
    np.testing.assert_array_equal(nn.Unflatten(1, (3, 4))(tg.tensor(x)).numpy(),
                                  torch.nn.Unflatten(1, (3, 4))(torch.tensor(x)).numpy())
    y = nn.Unflatten(-1, (2, -1))(tg.tensor(x))
    assert tuple(y.shape) == (2, 2, 6)
    assert tuple(nn.Flatten()(y).shape) == (2, 12)
    assert repr(nn.Unflatten(1, (3, 4))) == repr(torch.nn.Unflatten(1, (3, 4)))


class _Two:
    """A module with two tensor inputs and a non-tensor flag, two outputs, in either
    library."""

    @staticmethod
    def build(lib):
        class Two(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(3, 3)

            def forward(self, x, flag, y):
                h = self.lin(x) * y
                return h.tanh(), (h * 2 if flag else h).sum(1)
        return Two()


def _run_hooked(lib, prehook=None, hook=None, y_grad=True):
    lib.manual_seed(0)
    m = _Two.build(lib)
    with lib.no_grad():
        m.lin.weight.copy_(lib.tensor(np.linspace(-1, 1, 9).reshape(3, 3), dtype=lib.float32))
        m.lin.bias.copy_(lib.tensor([0.1, -0.2, 0.3]))
    calls = []

    def record(mod, grad_input, grad_output):
        calls.append(("hook", [None if g is None else g.detach().numpy().copy()
                               for g in grad_input],
                      [None if g is None else g.detach().numpy().copy() for g in grad_output]))
        return hook(grad_input) if hook else None

    def record_pre(mod, grad_output):
        calls.append(("pre", [None if g is None else g.detach().numpy().copy()
                              for g in grad_output]))
        return prehook(grad_output) if prehook else None
    m.register_full_backward_hook(record)
    m.register_full_backward_pre_hook(record_pre)
    x = lib.tensor(np.linspace(-1, 1, 6).reshape(2, 3), dtype=lib.float32, requires_grad=True)
    y = lib.tensor(np.linspace(0.5, 1, 6).reshape(2, 3), dtype=lib.float32,
                   requires_grad=y_grad)
    a, b = m(x, True, y)
    (a.sum() * 3 + b.sum()).backward()
    return calls, x.grad.numpy(), None if y.grad is None else y.grad.numpy(), \
        m.lin.weight.grad.numpy()


# float32 through a 3-term Linear, a product, a tanh and back (1 - tanh**2, the products, the
# transposed matmul, the weight's gradient over the batch): about 16 roundings, PyTorch's
# tanh a few ulps from NumPy's; gradients up to about 10 (the hook's x10).
HOOK_TOL = close("float32", n_ops=16, scale=10)


@pytest.mark.parametrize("variant", ["observe", "replace_grad_input", "replace_grad_output",
                                     "one_input_without_grad"])
def test_full_backward_hooks_match_torch(variant):
    torch = _torch()
    kwargs = {
        "observe": {},
        "replace_grad_input": dict(hook=lambda gi: (gi[0] * 10, None, gi[2] * 0)),
        "replace_grad_output": dict(prehook=lambda go: (go[0] * 2, go[1] * -1)),
        "one_input_without_grad": dict(y_grad=False),
    }[variant]
    ref, mine = _run_hooked(torch, **kwargs), _run_hooked(tg, **kwargs)
    calls_ref, calls_mine = ref[0], mine[0]
    assert [c[0] for c in calls_mine] == [c[0] for c in calls_ref] == ["pre", "hook"]
    for c_ref, c_mine in zip(calls_ref, calls_mine):
        for grads_ref, grads_mine in zip(c_ref[1:], c_mine[1:]):
            assert [g is None for g in grads_mine] == [g is None for g in grads_ref]
            for g_ref, g_mine in zip(grads_ref, grads_mine):
                if g_ref is not None:
                    np.testing.assert_allclose(g_mine, g_ref, **HOOK_TOL)
    for a, b in zip(mine[1:], ref[1:]):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, **HOOK_TOL)


def test_full_backward_hook_without_input_grads_and_removal():
    m = nn.Linear(3, 2)
    seen = []
    handle = m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go[0].shape)))
    m(tg.randn(4, 3)).sum().backward()          # only the parameters need grads
    assert seen == [((None,), (4, 2))]
    handle.remove()
    m(tg.randn(4, 3, requires_grad=True)).sum().backward()
    assert len(seen) == 1
    with tg.no_grad():
        m(tg.randn(4, 3, requires_grad=True))    # nothing recorded, nothing fires
    assert len(seen) == 1


# channel-wise dropout ---------------------------------------------------------------------------

DROPOUT_ND = [  # (function, module, input shape, the dims one draw covers)
    ("dropout1d", "Dropout1d", (6, 40, 5), (2,)),
    ("dropout1d", "Dropout1d", (40, 5), (1,)),           # (C, L): no batch dim
    ("dropout2d", "Dropout2d", (6, 40, 3, 4), (2, 3)),
    ("dropout3d", "Dropout3d", (4, 30, 2, 3, 2), (2, 3, 4)),
    ("dropout3d", "Dropout3d", (30, 2, 3, 2), (1, 2, 3)),    # (C, D, H, W)
]


@pytest.mark.parametrize("fname, mname, shape, spatial", DROPOUT_ND)
def test_dropout_nd_zeroes_whole_channels_and_scales_the_rest(fname, mname, shape, spatial):
    p = 0.4
    x = tg.tensor(np.random.default_rng(0).uniform(1, 2, shape).astype(np.float32),
                  requires_grad=True)
    tg.manual_seed(0)
    y = getattr(F, fname)(x, p)
    out, xs = y.detach().numpy(), x.detach().numpy()
    kept = out != 0                         # the inputs are in [1, 2): zero means dropped
    per_channel = kept.any(axis=spatial)
    assert np.array_equal(kept.all(axis=spatial), per_channel)      # one draw per channel
    scale = np.float32(1 / (1 - p))
    np.testing.assert_array_equal(out, np.where(kept, xs * scale, 0))   # kept ones scaled
    assert 0.15 < 1 - per_channel.mean() < 0.65     # about p of the channels dropped
    y.sum().backward()                              # d/dx: the same mask and scale
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, scale, 0))
    m = getattr(nn, mname)(p)
    assert repr(m) == f"{mname}(p=0.4, inplace=False)"
    m.eval()
    assert m(x) is x                             # eval: the identity, as PyTorch returns it
    m.train()
    tg.manual_seed(0)
    np.testing.assert_array_equal(m(x).detach().numpy(), out)   # the module is the function


def test_dropout_nd_edges():
    x = tg.ones(2, 3, 4, requires_grad=True)
    assert F.dropout1d(x, 0.0) is x and F.dropout1d(x, 0.5, training=False) is x
    y = F.dropout1d(x, 1.0)
    assert np.array_equal(y.detach().numpy(), np.zeros((2, 3, 4)))
    y.sum().backward()
    assert np.array_equal(x.grad.numpy(), np.zeros((2, 3, 4)))
    z = tg.ones(2, 30, 4)
    tg.manual_seed(1)
    r = F.dropout1d(z, 0.5, inplace=True)
    assert r is z and set(np.unique(z.numpy())) == {0.0, 2.0}
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout2d(x, 1.5)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout3d(-0.1)


def test_dropout_nd_shape_checks_and_warnings_match_torch():
    torch = _torch()
    tF = torch.nn.functional
    for shape in [(5,), (2, 3, 4, 5)]:
        with pytest.raises(RuntimeError) as ours:
            F.dropout1d(tg.ones(*shape))
        with pytest.raises(RuntimeError) as theirs:
            tF.dropout1d(torch.ones(*shape))
        assert str(ours.value) == str(theirs.value)
    cases = [("dropout2d", (2, 3, 4)), ("dropout2d", (2, 3)), ("dropout2d", (1, 2, 3, 4, 5)),
             ("dropout3d", (2, 3, 4)), ("dropout3d", (1, 2, 3, 4, 5, 6))]
    for fname, shape in cases:
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            getattr(F, fname)(tg.ones(*shape))
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            getattr(tF, fname)(torch.ones(*shape))
        assert [str(w.message) for w in ours] == [str(w.message) for w in theirs], (fname, shape)
        assert all(w.filename == __file__ for w in ours)        # the user's line, as PyTorch's
    with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            F.dropout2d(tg.ones(5))
    with warnings.catch_warnings():     # PyTorch reads a 3-D input as (N, C, L): so do we
        warnings.simplefilter("ignore")
        tg.manual_seed(2)
        y = F.dropout2d(tg.ones(4, 30, 5), 0.5).numpy()
    assert np.array_equal(y.min(axis=2), y.max(axis=2))


def test_dropout_nd_gradcheck_with_a_fixed_mask():
    x = tg.tensor(np.random.default_rng(1).standard_normal((2, 4, 3)), requires_grad=True)

    def fn(x):
        tg.manual_seed(3)
        return F.dropout1d(x, 0.3)
    assert gradcheck(fn, (x,)) and gradgradcheck(fn, (x,))


def test_dropout_nd_compiled_draws_a_mask_per_call():
    m = nn.Dropout2d(0.5)
    cm = tg.compile(m)
    x = tg.ones(4, 16, 3, 3)
    outs = [cm(x).numpy() for _ in range(3)]
    for y in outs:
        assert np.array_equal(y.min(axis=(2, 3)), y.max(axis=(2, 3)))
        assert set(np.unique(y)) <= {0.0, 2.0}
    assert not np.array_equal(outs[1], outs[2])
    m.eval()
    assert np.array_equal(cm(x).numpy(), x.numpy())
