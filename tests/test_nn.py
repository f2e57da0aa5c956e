"""tracegrad.nn against PyTorch: layers, losses, BatchNorm state, Dropout, the Module API.

Each layer test builds the same layer in both libraries, copies PyTorch's
weights in through ``load_state_dict``, runs the same input and compares
the output and the gradients of the input and of every parameter.
"""
import copy
import math
import pickle
import warnings

import numpy as np
import pytest

import tracegrad as tg

from tolerances import close as _tolerance, ulps

# The layers here run in float32; the longest computation is a batch norm's statistics over
# at most 60 elements (3 x 4 x 5 per channel) and the backward's sums over the same (a Linear
# sums at most 8 products): 128 roundings on values of order one (inputs up to 3 x 3 + 2).
F32 = _tolerance("float32", n_ops=128, scale=4)
from tracegrad import nn
from tracegrad.nn import functional as F


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)    # tiny tensors: threads only add contention on a busy machine
    return torch


def tg_state(th_module):
    """A torch module's state_dict as tracegrad tensors (through NumPy)."""
    return {k: tg.tensor(v.detach().numpy()) for k, v in th_module.state_dict().items()}


def close(actual, expected, rtol=F32["rtol"], atol=F32["atol"]):
    a = actual.detach().numpy() if isinstance(actual, tg.Tensor) else np.asarray(actual)
    e = expected.detach().numpy() if hasattr(expected, "detach") else np.asarray(expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def run_both(tg_mod, th_mod, x, *, extra=(), int_input=False, rtol=F32["rtol"],
             atol=F32["atol"]):
    """Forward and backward of both modules on ``x`` (+ ``extra`` non-differentiable args);
    compares output, input grad and parameter grads."""
    torch = _torch()
    tg_mod.load_state_dict(tg_state(th_mod))
    xt = torch.tensor(x, requires_grad=not int_input)
    xg = tg.tensor(x, requires_grad=not int_input)
    yt = th_mod(xt, *[torch.tensor(e) for e in extra])
    yg = tg_mod(xg, *[tg.tensor(e) for e in extra])
    close(yg, yt, rtol, atol)
    g = np.random.default_rng(1).standard_normal(yt.shape).astype(np.float32)
    yt.backward(torch.tensor(g))
    yg.backward(tg.tensor(g))
    if not int_input:
        close(xg.grad, xt.grad, rtol, atol)
    th_params = dict(th_mod.named_parameters())
    tg_params = dict(tg_mod.named_parameters())
    assert list(tg_params) == list(th_params)
    for name, p in th_params.items():
        if p.grad is None:
            assert tg_params[name].grad is None, name
        else:
            close(tg_params[name].grad, p.grad, rtol, atol)
    return yg, yt


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# layers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
def test_linear(bias, shape):
    torch = _torch()
    run_both(nn.Linear(4, 3, bias=bias), torch.nn.Linear(4, 3, bias=bias), randn(*shape))


def test_linear_bad_input_names_the_layer():
    with pytest.raises(RuntimeError, match="Linear.*last dimension 4.*\\[2, 3\\]") as err:
        nn.Linear(4, 3)(tg.ones(2, 3))
    assert "test_nn.py" in str(err.value)       # and the user's line


@pytest.mark.parametrize("make", [
    lambda m: m.ReLU(), lambda m: m.GELU(), lambda m: m.GELU(approximate="tanh"),
    lambda m: m.Sigmoid(), lambda m: m.Tanh(), lambda m: m.SiLU(), lambda m: m.Softmax(dim=1),
    lambda m: m.LogSoftmax(dim=-1), lambda m: m.Identity(3, foo=1), lambda m: m.Flatten(),
    lambda m: m.Flatten(0, 1),
], ids=["relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu", "softmax", "log_softmax",
        "identity", "flatten", "flatten01"])
def test_activation_and_shape_layers(make):
    torch = _torch()
    x = randn(3, 4, 2)
    x[0, 0, 0] = 0.0        # relu'(0) = 0 in both
    run_both(make(nn), make(torch.nn), x)


def test_relu_inplace_and_functional_forms():
    torch = _torch()
    x = randn(4, 5)
    close(F.relu(tg.tensor(x).clone(), inplace=True), torch.relu(torch.tensor(x)))
    close(F.gelu(tg.tensor(x), approximate="tanh"),
          torch.nn.functional.gelu(torch.tensor(x), approximate="tanh"))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = F.softmax(tg.tensor(x))
    close(y, torch.softmax(torch.tensor(x), 1))
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU(approximate="fast")


def test_sequential_matches_torch():
    torch = _torch()

    def build(m):
        return m.Sequential(m.Linear(6, 8), m.ReLU(), m.Linear(8, 8), m.Tanh(), m.Linear(8, 2))
    run_both(build(nn), build(torch.nn), randn(5, 6))


def test_embedding_with_padding_idx():
    torch = _torch()
    idx = np.array([[1, 2, 0], [4, 0, 3]])
    th = torch.nn.Embedding(5, 3, padding_idx=0)
    g = nn.Embedding(5, 3, padding_idx=0)
    assert g.weight[0].abs().sum().item() == 0     # the padding row starts at zero
    run_both(g, th, idx, int_input=True)
    assert g.weight.grad[0].abs().sum().item() == 0


def test_embedding_errors_and_from_pretrained():
    e = nn.Embedding.from_pretrained(tg.eye(3))
    assert not e.weight.requires_grad
    close(e(tg.tensor([2, 0])), np.eye(3)[[2, 0]])
    with pytest.raises(RuntimeError, match="indices.*Long, Int"):
        e(tg.tensor([1.0]))
    with pytest.raises(IndexError):
        e(tg.tensor([3]))


def test_embedding_max_norm():
    torch = _torch()
    th = torch.nn.Embedding(4, 3, max_norm=1.0)
    g = nn.Embedding(4, 3, max_norm=1.0)
    g.load_state_dict(tg_state(th))
    idx = np.array([0, 2, 2])
    with torch.no_grad():
        yt = th(torch.tensor(idx))
    close(g(tg.tensor(idx)), yt)
    close(g.weight, th.weight)


# normalisation ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5)])
def test_batchnorm1d_train_eval_and_running_stats(shape):
    torch = _torch()
    th, g = torch.nn.BatchNorm1d(3, momentum=0.3), nn.BatchNorm1d(3, momentum=0.3)
    with torch.no_grad():       # a non-trivial affine part
        th.weight.uniform_(0.5, 1.5)
        th.bias.uniform_(-0.5, 0.5)
    g.load_state_dict(tg_state(th))
    mean_obj, var_obj = g.running_mean, g.running_var
    for step in range(4):
        run_both(g, th, randn(*shape, seed=step) * (step + 1) + step)
        close(g.running_mean, th.running_mean)
        close(g.running_var, th.running_var)
    assert g.num_batches_tracked.item() == 4 and g.num_batches_tracked.dtype is tg.int64
    assert g.running_mean is mean_obj and g.running_var is var_obj    # updated in place
    assert not g.running_mean.requires_grad
    th.eval(), g.eval()
    run_both(g, th, randn(*shape, seed=9))
    close(g.running_mean, th.running_mean)
    assert g.num_batches_tracked.item() == 4


def test_batchnorm2d_momentum_none_is_a_cumulative_average():
    torch = _torch()
    th, g = torch.nn.BatchNorm2d(2, momentum=None), nn.BatchNorm2d(2, momentum=None)
    g.load_state_dict(tg_state(th))
    for step in range(3):
        run_both(g, th, randn(3, 2, 4, 5, seed=step) + step)
    close(g.running_mean, th.running_mean)
    close(g.running_var, th.running_var)
    th.eval(), g.eval()
    run_both(g, th, randn(2, 2, 3, 3, seed=7))


@pytest.mark.parametrize("affine,track", [(False, True), (True, False), (False, False)])
def test_batchnorm_affine_false_and_no_running_stats(affine, track):
    torch = _torch()
    th = torch.nn.BatchNorm2d(3, affine=affine, track_running_stats=track)
    g = nn.BatchNorm2d(3, affine=affine, track_running_stats=track)
    assert list(g.state_dict()) == list(th.state_dict())
    for mode in ("train", "eval"):
        getattr(th, mode)(), getattr(g, mode)()
        run_both(g, th, randn(2, 3, 4, 4, seed=3))
    if not track:
        assert g.running_mean is None and g.num_batches_tracked is None


def test_batchnorm_errors_and_repr():
    torch = _torch()
    with pytest.raises(ValueError, match="expected 2D or 3D input \\(got 4D input\\)"):
        nn.BatchNorm1d(3)(tg.ones(2, 3, 4, 4))
    with pytest.raises(ValueError, match="expected 4D input \\(got 2D input\\)"):
        nn.BatchNorm2d(3)(tg.ones(2, 3))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        nn.BatchNorm1d(3)(tg.ones(1, 3))
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        nn.BatchNorm1d(4)(tg.ones(2, 3))
    for kw in ({}, {"momentum": None, "affine": False}, {"track_running_stats": False}):
        assert repr(nn.BatchNorm1d(4, **kw)) == repr(torch.nn.BatchNorm1d(4, **kw))


def test_functional_batch_norm_matches_dummy_bn_forward():
    # the seeds' hand-written BN: batch statistics, biased variance
    x = tg.tensor(randn(4, 3, 5, 5).astype(np.float64))
    w, b = tg.tensor(np.array([1.0, 2.0, 0.5])), tg.tensor(np.array([0.0, -1.0, 1.0]))
    mean, var = x.mean([0, 2, 3]), x.var([0, 2, 3], unbiased=False)
    ref = (x - mean[None, :, None, None]) / tg.sqrt(var[None, :, None, None] + 1e-5)
    ref = ref * w[:, None, None] + b[:, None, None]
    rm, rv = tg.zeros(3, dtype=tg.float64), tg.ones(3, dtype=tg.float64)
    # float64 means and variances over 100 elements, by two formulas: 2 x 128 roundings
    tol = _tolerance("float64", n_ops=256, scale=4)
    close(F.batch_norm(x, rm, rv, w, b, training=True, momentum=1.0), ref, **tol)
    close(rm, mean, **tol)
    close(rv, x.var([0, 2, 3], unbiased=True), **tol)


@pytest.mark.parametrize("kwargs,shape", [
    ({"normalized_shape": 4}, (3, 4)),
    ({"normalized_shape": (3, 4)}, (2, 3, 4)),
    ({"normalized_shape": 4, "elementwise_affine": False}, (2, 3, 4)),
    ({"normalized_shape": 4, "bias": False}, (5, 4)),
])
def test_layernorm(kwargs, shape):
    torch = _torch()
    th, g = torch.nn.LayerNorm(**kwargs), nn.LayerNorm(**kwargs)
    if th.weight is not None:
        with torch.no_grad():
            th.weight.uniform_(0.5, 1.5)
    run_both(g, th, randn(*shape) * 3 + 1)
    assert repr(g) == repr(th)


def test_layernorm_shape_error():
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 4\], but got input "
                                           r"of size\[2, 3\]"):
        nn.LayerNorm(4)(tg.ones(2, 3))


# dropout ------------------------------------------------------------------------------------

def test_dropout_statistics_and_scaling():
    tg.manual_seed(0)
    d = nn.Dropout(0.3)
    x = tg.ones(200, 500, requires_grad=True)
    y = d(x)
    vals = np.unique(y.detach().numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.7], rtol=ulps("float32", 2))     # 1 * (1 / 0.7)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.01
    assert abs(y.mean().item() - 1.0) < 0.02
    y.sum().backward()
    # the gradient is the same mask and scale
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


def test_dropout_eval_identity_p0_p1_and_seeding():
    x = tg.randn(4, 5)
    d = nn.Dropout(0.5).eval()
    assert d(x) is x
    assert nn.Dropout(0.0)(x) is x
    assert (nn.Dropout(1.0)(x) == 0).all().item()
    tg.manual_seed(3)
    a = nn.Dropout(0.5)(tg.ones(50))
    tg.manual_seed(3)
    b = nn.Dropout(0.5)(tg.ones(50))
    assert a.equal(b)       # bit for bit: the same seed draws the same mask, scaled the same
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"


def test_dropout_inplace():
    tg.manual_seed(1)
    x = tg.ones(100)
    y = F.dropout(x, 0.5, inplace=True)
    assert y is x and x._version == 1 and set(np.unique(x.numpy())) <= {0.0, 2.0}


# losses -------------------------------------------------------------------------------------

def _loss_both(tg_fn, th_fn, x, target, *, int_target=False, rtol=F32["rtol"], atol=F32["atol"],
               **kw):
    torch = _torch()
    xt, xg = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    tt, tgt = torch.tensor(target), tg.tensor(target)
    th_kw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    tg_kw = {k: tg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    lt, lg = th_fn(xt, tt, **th_kw), tg_fn(xg, tgt, **tg_kw)
    close(lg, lt, rtol, atol)
    g = np.random.default_rng(2).standard_normal(lt.shape).astype(np.float32)
    lt.backward(torch.tensor(g))
    lg.backward(tg.tensor(g))
    close(xg.grad, xt.grad, rtol, atol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1_loss(reduction):
    torch = _torch()
    x, t = randn(4, 3), randn(4, 3, seed=1)
    _loss_both(nn.MSELoss(reduction=reduction), torch.nn.MSELoss(reduction=reduction), x, t)
    _loss_both(nn.L1Loss(reduction=reduction), torch.nn.L1Loss(reduction=reduction), x, t)


def test_mse_loss_warns_on_broadcasting_target():
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(tg.ones(3, 1), tg.ones(3))
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        F.mse_loss(tg.ones(3), tg.ones(3), reduction="avg")


CE_CASES = {
    "plain": {},
    "sum": {"reduction": "sum"},
    "none": {"reduction": "none"},
    "weight": {"weight": np.array([0.2, 1.0, 2.0, 0.5], dtype=np.float32)},
    "ignore": {"ignore_index": 1},
    "weight_ignore": {"weight": np.array([0.2, 1.0, 2.0, 0.5], dtype=np.float32),
                      "ignore_index": 2},
    "smoothing": {"label_smoothing": 0.1},
    "smoothing_weight_ignore": {"label_smoothing": 0.2, "ignore_index": 0,
                                "weight": np.array([0.2, 1.0, 2.0, 0.5], dtype=np.float32)},
    "smoothing_ignore_sum": {"label_smoothing": 0.2, "ignore_index": 3, "reduction": "sum"},
    "smoothing_none": {"label_smoothing": 0.3, "reduction": "none"},
}


@pytest.mark.parametrize("case", list(CE_CASES))
@pytest.mark.parametrize("shape", [(6, 4), (2, 4, 3)], ids=["2d", "kdim"])
def test_cross_entropy_class_indices(case, shape):
    torch = _torch()
    x = randn(*shape) * 2
    target = np.random.default_rng(5).integers(0, 4, (shape[0],) + shape[2:])
    target.flat[0], target.flat[1] = 1, 2     # each ignored class occurs
    target.flat[2] = 0
    target.flat[-1] = 3
    kw = CE_CASES[case]
    _loss_both(F.cross_entropy, torch.nn.functional.cross_entropy, x, target, **kw)
    _loss_both(nn.CrossEntropyLoss(**{k: tg.tensor(v) if isinstance(v, np.ndarray) else v
                                      for k, v in kw.items()}),
               torch.nn.CrossEntropyLoss(**{k: torch.tensor(v) if isinstance(v, np.ndarray)
                                            else v for k, v in kw.items()}), x, target)


@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1}, {"weight": True}])
def test_cross_entropy_all_targets_ignored(kw):
    # a batch of padding only: the loss is NaN and the gradient zero, as in PyTorch
    torch = _torch()
    if kw.get("weight"):
        kw = {"weight": np.ones(4, dtype=np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no 0/0 warnings from NumPy either
        _loss_both(F.cross_entropy, torch.nn.functional.cross_entropy, randn(3, 4),
                   np.array([-100, -100, -100]), **kw)


def test_cross_entropy_unbatched_and_probabilities():
    torch = _torch()
    _loss_both(F.cross_entropy, torch.nn.functional.cross_entropy, randn(5), np.array(3))
    probs = np.random.default_rng(3).dirichlet(np.ones(4), size=6).astype(np.float32)
    w = np.array([1.0, 0.5, 2.0, 1.0], dtype=np.float32)
    for kw in ({}, {"label_smoothing": 0.2}, {"weight": w, "reduction": "sum"},
               {"weight": w, "reduction": "none"}):
        _loss_both(F.cross_entropy, torch.nn.functional.cross_entropy, randn(6, 4), probs, **kw)


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"ignore_index": 2},
                                {"weight": np.array([1.0, 2.0, 0.5], dtype=np.float32)}])
def test_nll_loss(kw):
    torch = _torch()
    x = randn(5, 3)
    t = np.array([0, 2, 1, 2, 0])
    _loss_both(F.nll_loss, torch.nn.functional.nll_loss, x, t, **kw)
    _loss_both(nn.NLLLoss(**{k: tg.tensor(v) if isinstance(v, np.ndarray) else v
                             for k, v in kw.items()}),
               torch.nn.NLLLoss(**{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                   for k, v in kw.items()}), x, t)


def test_nll_loss_errors():
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target "
                                         r"batch_size \(2\)"):
        F.nll_loss(tg.zeros(3, 4), tg.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="expected scalar type Long"):
        F.nll_loss(tg.zeros(3, 4), tg.zeros(3))
    with pytest.raises(RuntimeError, match="expected class-probability target"):
        F.cross_entropy(tg.zeros(3, 4), tg.zeros(3, 5))


@pytest.mark.parametrize("kw", [
    {}, {"reduction": "sum"}, {"reduction": "none"},
    {"pos_weight": np.array([0.5, 2.0, 3.0], dtype=np.float32)},
    {"weight": np.array([[1.0, 0.0, 2.0]], dtype=np.float32),
     "pos_weight": np.array([1.5, 1.0, 0.2], dtype=np.float32), "reduction": "none"},
])
def test_binary_cross_entropy_with_logits(kw):
    torch = _torch()
    x = randn(4, 3) * 4
    x[0, 0], x[1, 1] = 0.0, 60.0        # the kink of log_sigmoid and a saturated logit
    t = (np.random.default_rng(4).random((4, 3)) > 0.5).astype(np.float32)
    _loss_both(F.binary_cross_entropy_with_logits,
               torch.nn.functional.binary_cross_entropy_with_logits, x, t, **kw)
    mod_kw = dict(kw)
    _loss_both(nn.BCEWithLogitsLoss(**{k: tg.tensor(v) if isinstance(v, np.ndarray) else v
                                       for k, v in mod_kw.items()}),
               torch.nn.BCEWithLogitsLoss(**{k: torch.tensor(v) if isinstance(v, np.ndarray)
                                             else v for k, v in mod_kw.items()}), x, t)


@pytest.mark.parametrize("pos_weight", [None, 2.5])
def test_binary_cross_entropy_with_logits_saturated_keeps_precision(pos_weight):
    # loss and gradient against float64 at logits far on either side: no term cancels
    # another, so a true gradient of 2e-9 (x = -20, t = 0) is not rounded to 0
    x64 = np.array([-40.0, -20.0, -6.5, -1.0, 0.0, 1.0, 6.5, 20.0, 40.0])
    p = 1.0 if pos_weight is None else pos_weight
    kw = {} if pos_weight is None else {"pos_weight": tg.tensor(pos_weight)}
    for t in (0.0, 1.0):
        x = tg.tensor(x64.astype(np.float32), requires_grad=True)
        loss = F.binary_cross_entropy_with_logits(x, tg.full((9,), t), reduction="none", **kw)
        loss.sum().backward()
        xs = x64.astype(np.float32).astype(np.float64)
        want = (1 - t) * np.logaddexp(0, xs) + p * t * np.logaddexp(0, -xs)
        want_grad = (1 - t) / (1 + np.exp(-xs)) - p * t / (1 + np.exp(xs))
        np.testing.assert_allclose(loss.detach().numpy(), want, rtol=ulps(np.float32, 8))
        np.testing.assert_allclose(x.grad.numpy(), want_grad, rtol=ulps(np.float32, 8))


def test_binary_cross_entropy():
    torch = _torch()
    x = np.random.default_rng(6).uniform(0.05, 0.95, (4, 3)).astype(np.float32)
    t = np.random.default_rng(7).random((4, 3)).astype(np.float32)
    for kw in ({}, {"reduction": "sum"}, {"weight": np.full((4, 3), 0.5, np.float32)}):
        _loss_both(F.binary_cross_entropy, torch.nn.functional.binary_cross_entropy, x, t, **kw)
    _loss_both(nn.BCELoss(), torch.nn.BCELoss(), x, t)
    with pytest.raises(ValueError, match="Target size"):
        F.binary_cross_entropy_with_logits(tg.ones(3), tg.ones(3, 1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_cross_entropy_at_saturated_probabilities_vs_torch(dtype):
    # a saturated sigmoid gives exactly 1.0 in float32: PyTorch's gradient there is
    # (x - t) / max(x (1 - x), 1e-12), finite (0 where x = t), never the formula's NaN
    torch = _torch()
    p = np.array([1.0, 0.0, 1.0, 0.0, 1e-30, 0.3, 0.999], dtype)
    t = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.6, 1.0], dtype)
    got = []
    for lib in (tg, torch):
        x = lib.tensor(p, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy(x, lib.tensor(t), reduction="none")
        loss.sum().backward()
        got.append((loss.detach().numpy(), x.grad.numpy()))
    assert np.isfinite(got[0][1]).all()
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=ulps(p.dtype, 4))
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=ulps(p.dtype, 4))
    x = tg.tensor(np.array([0.2, 0.7]), requires_grad=True)       # inside: twice differentiable
    assert tg.autograd.gradgradcheck(
        lambda x: F.binary_cross_entropy(x, tg.tensor([0.0, 1.0]).double()), (x,))


def test_loss_inputs_torch_refuses_are_refused():
    # a probability outside [0, 1] (or NaN) and a class weight of the wrong length: PyTorch's
    # errors, where the loss was NaN or a number
    torch = _torch()
    for lib in (torch, tg):
        for x in ([1.5, 0.5], [float("nan"), 0.5], [-0.1, 0.5]):
            with pytest.raises(RuntimeError, match="all elements of input should be between"):
                lib.nn.functional.binary_cross_entropy(lib.tensor(x), lib.tensor([1.0, 0.0]))
        for f in (lib.nn.functional.cross_entropy, lib.nn.functional.nll_loss):
            with pytest.raises(RuntimeError, match="weight tensor should be defined either for "
                                                   "all 3 classes"):
                f(lib.zeros(2, 3), lib.tensor([0, 1]), weight=lib.ones(4))


def test_losses_repr_like_torch():
    torch = _torch()
    for name in ("MSELoss", "CrossEntropyLoss", "BCEWithLogitsLoss", "NLLLoss"):
        assert repr(getattr(nn, name)()) == repr(getattr(torch.nn, name)())
    assert "weight" in dict(nn.CrossEntropyLoss(weight=tg.ones(3)).named_buffers())


# initialisation -----------------------------------------------------------------------------

def test_linear_default_init_follows_pytorch_bounds_and_seed():
    tg.manual_seed(0)
    a = nn.Linear(50, 40)
    tg.manual_seed(0)
    b = nn.Linear(50, 40)
    assert a.weight.equal(b.weight) and a.bias.equal(b.bias)    # the same seed: the same draws
    bound = 1 / math.sqrt(50)
    w = a.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01       # U(-b, b) has std b/sqrt(3)
    assert np.abs(a.bias.detach().numpy()).max() <= bound
    assert isinstance(a.weight, nn.Parameter) and a.weight.requires_grad
    assert a.weight.is_leaf and a.weight.grad_fn is None


def test_init_functions():
    t = tg.empty(300, 200, requires_grad=True)
    nn.init.xavier_uniform_(t, gain=2.0)
    a = 2.0 * math.sqrt(6 / 500)
    assert t.abs().max().item() <= a and t.requires_grad and t.is_leaf
    nn.init.kaiming_uniform_(t, nonlinearity="relu")
    assert t.abs().max().item() <= math.sqrt(6 / 200)
    nn.init.normal_(t, mean=1.0, std=0.5)
    assert abs(t.mean().item() - 1.0) < 0.01 and abs(t.std().item() - 0.5) < 0.01
    nn.init.uniform_(t, -2, -1)
    assert -2 <= t.min().item() and t.max().item() <= -1
    assert (nn.init.zeros_(t) == 0).all().item() and (nn.init.ones_(t) == 1).all().item()
    assert (nn.init.constant_(t, 0.25) == 0.25).all().item()
    g = tg.Generator().manual_seed(5)
    x1 = nn.init.normal_(tg.empty(4), generator=g).clone()
    g.manual_seed(5)
    assert nn.init.normal_(tg.empty(4), generator=g).equal(x1)    # reseeded: the same draws
    assert nn.init.calculate_gain("tanh") == 5 / 3
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(tg.empty(3))


# the Module API -----------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)
        self.register_buffer("scale", tg.ones(4))
        self.register_buffer("scratch", tg.zeros(2), persistent=False)
        self.extra = nn.Parameter(tg.zeros(4))

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale + self.extra


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.act = nn.GELU()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 2)])
        self.shared = self.layers[0]        # the same module twice: visited once

    def forward(self, x):
        x = self.act(self.block(x))
        for layer in self.layers:
            x = layer(x)
        return x


def torch_net():
    torch = _torch()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 4)
            self.norm = torch.nn.BatchNorm1d(4)
            self.register_buffer("scale", torch.ones(4))
            self.register_buffer("scratch", torch.zeros(2), persistent=False)
            self.extra = torch.nn.Parameter(torch.zeros(4))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.act = torch.nn.GELU()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)])
            self.shared = self.layers[0]
    return Net()


def test_names_and_order_match_torch():
    net, tnet = Net(), torch_net()
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in tnet.named_parameters()]
    assert [n for n, _ in net.named_buffers()] == [n for n, _ in tnet.named_buffers()]
    assert [n for n, _ in net.named_modules()] == [n for n, _ in tnet.named_modules()]
    assert [n for n, _ in net.named_children()] == [n for n, _ in tnet.named_children()]
    assert list(net.state_dict()) == list(tnet.state_dict())
    assert len(list(net.parameters())) == len(list(tnet.parameters()))
    assert [n for n, _ in net.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in tnet.named_parameters(remove_duplicate=False)]
    assert [n for n, _ in net.block.named_parameters(prefix="b", recurse=False)] == \
        ["b.extra"]
    assert len(list(net.modules())) == len(list(tnet.modules()))
    assert net.get_submodule("layers.1") is net.layers[1]


def test_state_dict_round_trip_and_detached():
    a, b = Net(), Net()
    sd = a.state_dict()
    assert not any(v.requires_grad for v in sd.values())
    assert "block.scratch" not in sd and sd["block.norm.num_batches_tracked"].dtype is tg.int64
    w = b.block.fc.weight
    version = w._version
    res = b.load_state_dict(sd)
    assert repr(res) == "<All keys matched successfully>" and res.missing_keys == []
    assert b.block.fc.weight is w and w.equal(a.block.fc.weight)   # copied into the same object
    assert w._version == version + 1
    assert all(p.requires_grad for p in b.parameters())
    assert a.state_dict(keep_vars=True)["block.extra"] is a.block.extra


def test_load_state_dict_errors_match_torch():
    torch = _torch()
    net, tnet = Net(), torch_net()
    good = net.state_dict()
    t_good = tnet.state_dict()

    def both(mutate):
        sd, tsd = dict(good), dict(t_good)
        mutate(sd, tg)
        mutate(tsd, torch)
        with pytest.raises(RuntimeError) as ours:
            net.load_state_dict(sd)
        with pytest.raises(RuntimeError) as theirs:
            tnet.load_state_dict(tsd)
        assert str(ours.value).replace("tracegrad.", "torch.") == str(theirs.value)

    def missing(sd, lib):
        del sd["block.fc.bias"], sd["layers.1.weight"]

    def unexpected(sd, lib):
        sd["block.foo"] = lib.zeros(1)
        sd["nothere.weight"] = lib.zeros(1)

    def size(sd, lib):
        sd["block.fc.weight"] = lib.zeros(4, 2)

    def all_three(sd, lib):
        missing(sd, lib), unexpected(sd, lib), size(sd, lib)

    for mutate in (missing, unexpected, size, all_three):
        both(mutate)
    sd = dict(good)
    del sd["block.fc.bias"]
    sd["extra_key"] = tg.zeros(1)
    res = net.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["block.fc.bias"] and res.unexpected_keys == ["extra_key"]
    assert "missing_keys=['block.fc.bias']" in repr(res)


def test_load_state_dict_converts_dtype_and_assign():
    lin = nn.Linear(2, 2)
    lin.load_state_dict({"weight": tg.ones(2, 2, dtype=tg.float64), "bias": tg.zeros(2)})
    assert lin.weight.dtype is tg.float32 and lin.weight.sum().item() == 4
    new_w = tg.full((2, 2), 3.0)
    lin.load_state_dict({"weight": new_w, "bias": tg.zeros(2)}, assign=True)
    assert isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad
    assert lin.weight.sum().item() == 12


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []

    def pre(mod, args):
        calls.append("pre")
        return (args[0] * 0,)

    def post(mod, args, out):
        calls.append("post")
        assert args[0].abs().sum().item() == 0
        return out + 1

    h1 = lin.register_forward_pre_hook(pre)
    h2 = lin.register_forward_hook(post)
    lin.register_forward_hook(lambda m, a, o: calls.append("first"), prepend=True)
    out = lin(tg.ones(1, 2))
    close(out, (lin.bias + 1).detach().reshape(1, 2))
    assert calls == ["pre", "first", "post"]
    h1.remove(), h2.remove()
    calls.clear()
    out = lin(tg.ones(1, 2))
    assert calls == ["first"]
    close(out, F.linear(tg.ones(1, 2), lin.weight, lin.bias))
    seen = {}
    lin.register_forward_pre_hook(lambda m, a, kw: seen.update(kw), with_kwargs=True)
    lin.register_forward_hook(lambda m, a, kw, o: seen.update(out=o), with_kwargs=True)
    lin(input=tg.ones(1, 2))
    assert "input" in seen and "out" in seen


def test_forward_hook_always_call():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    seen = []
    m = Boom()
    m.register_forward_hook(lambda mod, a, o: seen.append(o), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(1)
    assert seen == [None]


def test_repr_matches_torch():
    torch = _torch()

    def build(m):
        return m.Sequential(m.Linear(4, 8), m.BatchNorm1d(8), m.ReLU(), m.Dropout(0.25),
                            m.Sequential(m.Linear(8, 8, bias=False), m.GELU(approximate="tanh")),
                            m.LayerNorm(8), m.Linear(8, 3), m.LogSoftmax(dim=1), m.Flatten(),
                            m.Identity(), m.Tanh(), m.Sigmoid(), m.Softmax(dim=-1),
                            m.Embedding(10, 3, padding_idx=0), m.ReLU(inplace=True))
    assert repr(build(nn)) == repr(build(torch.nn))
    assert repr(Net()).replace("tracegrad", "torch") == repr(torch_net())
    mlist = [nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()]),
             torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU()])]
    assert repr(mlist[0]) == repr(mlist[1])
    assert repr(nn.ModuleList()) == repr(torch.nn.ModuleList())


def test_parameter():
    torch = _torch()
    data = tg.tensor([1.0, 2.0])
    p = nn.Parameter(data)
    assert isinstance(p, nn.Parameter) and isinstance(p, tg.Tensor)
    assert p.requires_grad and p.is_leaf
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0])))
    assert repr(nn.Parameter(tg.ones(2, dtype=tg.float64))).replace("tracegrad", "torch") == \
        repr(torch.nn.Parameter(torch.ones(2, dtype=torch.float64)))
    with tg.no_grad():
        p.mul_(2)
    assert data.tolist() == [2.0, 4.0]          # shares storage with its data
    assert not nn.Parameter(tg.ones(1), requires_grad=False).requires_grad
    assert type(p * 2) is tg.Tensor and type(p.detach()) is tg.Tensor
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad and q.equal(p)
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, nn.Parameter) and r.equal(p)
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(tg.tensor([1]))


def test_registration_rules_and_errors():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(tg.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign 'tracegrad.FloatTensor' as parameter "
                                        "'weight'"):
        m.weight = tg.ones(2, 2)
    with pytest.raises(KeyError, match="attribute 'in_features' already exists"):
        m.register_buffer("in_features", tg.ones(1))
    with pytest.raises(KeyError, match="parameter name can.*contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="cannot assign 'tracegrad.FloatTensor' object to "
                                        "parameter 'c'"):
        m.register_parameter("c", tg.ones(1))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        m.nope
    m.bias = None
    assert m.bias is None and "bias" not in m.state_dict()
    m.bias = nn.Parameter(tg.zeros(2))
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    m.sub = nn.ReLU()
    assert list(dict(m.named_children())) == ["sub"]
    del m.sub
    assert list(m.children()) == []
    m.register_buffer("buf", tg.ones(1))
    m.buf = tg.zeros(1)       # assigning a tensor to a buffer name keeps it a buffer
    assert dict(m.named_buffers())["buf"].item() == 0
    assert "buf" in dir(m) and "weight" in dir(m)


def test_train_eval_zero_grad_requires_grad_apply():
    net = Net()
    assert net.training and net.block.norm.training
    assert net.eval() is net and not net.block.norm.training and not net.layers[1].training
    net.train()
    assert net.block.norm.training
    with pytest.raises(ValueError, match="boolean"):
        net.train("no")
    net(tg.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    names = []
    net.apply(lambda m: names.append(type(m).__name__))
    assert names[-1] == "Net" and names[0] == "Linear"


def test_to_dtype_and_device_keep_parameter_objects():
    net = Net()
    params = list(net.parameters())
    net(tg.randn(4, 3)).sum().backward()
    assert net.double() is net
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert all(p.dtype is tg.float64 and p.grad.dtype is tg.float64 for p in params)
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in params)
    assert net.block.norm.running_mean.dtype is tg.float64
    assert net.block.norm.num_batches_tracked.dtype is tg.int64    # not floating: unchanged
    net.to(tg.float32)
    assert all(p.dtype is tg.float32 for p in params)
    net.to("cpu")
    net.float()
    assert net(tg.randn(2, 3)).dtype is tg.float32
    with pytest.raises(TypeError, match="floating point"):
        net.to(tg.int64)


def test_sequential_and_module_list_containers():
    torch = _torch()
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    seq.append(c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c]
    assert list(sub.state_dict()) == ["2.weight", "2.bias"]     # slices keep their keys
    with pytest.raises(IndexError, match="index 3 is out of range"):
        seq[3]
    del seq[0]
    assert list(seq.state_dict()) == ["1.weight", "1.bias"] and seq[0] is b
    from collections import OrderedDict
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    tnamed = torch.nn.Sequential(OrderedDict([("fc", torch.nn.Linear(2, 2)),
                                              ("act", torch.nn.Tanh())]))
    assert repr(named) == repr(tnamed) and list(named.state_dict()) == ["fc.weight", "fc.bias"]
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.ReLU())
    ml += [nn.Tanh()]
    assert len(ml) == 3 and isinstance(ml[-1], nn.Tanh)
    assert list(dict(ml.named_children())) == ["0", "1", "2"]
    md = nn.ModuleDict({"a": nn.Linear(1, 2)})
    assert "a" in md and list(md.state_dict()) == ["a.weight", "a.bias"]


def test_replacing_a_child_or_parameter_keeps_its_place_as_torch():
    # seq[1] = Tanh() must not move the child to the end: Sequential runs children in order
    torch = _torch()
    for lib in (tg, torch):
        lib.manual_seed(0)
        seq = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
        seq[1] = lib.nn.Tanh()
        seq.fc = lib.nn.Identity()
        seq.fc = lib.nn.ReLU()          # replaced again: still last
        assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "Linear", "ReLU"]
        assert list(seq._modules) == ["0", "1", "2", "fc"]
        lin = lib.nn.Linear(2, 2)
        lin.weight = lib.nn.Parameter(lib.zeros(2, 2))
        assert list(lin.state_dict()) == ["weight", "bias"]
        assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    x = np.ones((1, 3), np.float32)
    tseq = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    seq.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tseq.state_dict().items()})
    seq[1] = nn.Tanh()
    np.testing.assert_allclose(seq(tg.tensor(x)).detach().numpy(),
                               tseq(torch.tensor(x)).detach().numpy(), rtol=1e-6)


def test_data_parallel_wraps_like_torch_on_cpu():
    # without a GPU, PyTorch's DataParallel calls its module: the same outputs, gradients
    # and state-dict keys ("module." prefixed), and a compiled step through it follows eager
    torch = _torch()
    tmodel = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh()))
    model = nn.DataParallel(nn.Sequential(nn.Linear(3, 4), nn.Tanh()))
    assert list(model.state_dict()) == list(tmodel.state_dict()) == [
        "module.0.weight", "module.0.bias"]
    model.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tmodel.state_dict().items()})
    assert model.device_ids == tmodel.device_ids == []
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    tmodel(torch.tensor(x)).pow(2).sum().backward()
    model(tg.tensor(x)).pow(2).sum().backward()
    np.testing.assert_allclose(model.module[0].weight.grad.numpy(),
                               tmodel.module[0].weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    step = tg.compile(lambda x: model(x).sum())
    np.testing.assert_allclose(step(tg.tensor(x)).item(), model(tg.tensor(x)).sum().item(),
                               rtol=1e-6)


def test_module_without_forward():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_seed_mlp_trains_with_functional_loss():
    # the seeds' MLP with binary_cross_entropy_with_logits: the loss falls under plain SGD
    tg.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 12), nn.ReLU(), nn.Linear(12, 4))
    data = tg.randn(30, 8)
    label = (data @ tg.randn(8, 4) > 0).float()
    first = None
    for _ in range(50):
        loss = F.binary_cross_entropy_with_logits(net(data), label)
        first = first if first is not None else loss.item()
        net.zero_grad()
        loss.backward()
        with tg.no_grad():
            for p in net.parameters():
                p -= 0.5 * p.grad
    assert loss.item() < 0.5 * first


def test_no_raw_numpy_warnings_in_forward():
    # every layer runs warning-free on ordinary input
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Net()(tg.randn(4, 3)).sum().backward()


# known differences ----------------------------------------------------------------------------

_NAMED = [       # (label, call on (lib, F, x, t)): a composite showing PyTorch's node
    ("mse_loss", lambda lib, F, x, t: F.mse_loss(x, t)),
    ("mse_loss none", lambda lib, F, x, t: F.mse_loss(x, t, reduction="none")),
    ("nll_loss", lambda lib, F, x, t: F.nll_loss(x, lib.tensor([0, 1]))),
    ("cross_entropy", lambda lib, F, x, t: F.cross_entropy(x, lib.tensor([0, 1]))),
    ("binary_cross_entropy", lambda lib, F, x, t: F.binary_cross_entropy(lib.sigmoid(x), t)),
    ("binary_cross_entropy_with_logits",
     lambda lib, F, x, t: F.binary_cross_entropy_with_logits(x, t)),
    ("smooth_l1_loss", lambda lib, F, x, t: F.smooth_l1_loss(x, t)),
    ("huber_loss", lambda lib, F, x, t: F.huber_loss(x, t)),
    ("log_softmax", lambda lib, F, x, t: F.log_softmax(x, 1)),
    ("softmax", lambda lib, F, x, t: F.softmax(x, 1)),
    ("gelu", lambda lib, F, x, t: F.gelu(x)),
    ("silu", lambda lib, F, x, t: F.silu(x)),
    ("softplus", lambda lib, F, x, t: F.softplus(x)),
    ("logsigmoid", lambda lib, F, x, t: F.logsigmoid(x)),
    ("leaky_relu", lambda lib, F, x, t: F.leaky_relu(x)),
    ("elu", lambda lib, F, x, t: F.elu(x)),
    ("hardswish", lambda lib, F, x, t: F.hardswish(x)),
    ("layer_norm", lambda lib, F, x, t: F.layer_norm(x, (3,))),
    ("mean", lambda lib, F, x, t: x.mean()),
    ("mean dim", lambda lib, F, x, t: x.mean(1)),
    ("var", lambda lib, F, x, t: x.var()),
    ("std", lambda lib, F, x, t: x.std()),
    ("logsumexp", lambda lib, F, x, t: lib.logsumexp(x, 1)),
]


@pytest.mark.parametrize("label,call", _NAMED, ids=[n for n, _ in _NAMED])
def test_composites_show_torchs_grad_fn_names(label, call):
    torch = _torch()
    names = []
    for lib in (tg, torch):
        x = lib.full((2, 3), 0.25, requires_grad=True)
        t = lib.full((2, 3), 0.5)
        out = call(lib, lib.nn.functional, x, t)
        names.append(type(out.grad_fn).__name__)
    assert names[0] == names[1]


def test_a_named_node_is_the_profilers_backward_row():
    x = tg.zeros(2, 3, requires_grad=True)
    with tg.autograd.profiler.profile() as prof:
        F.binary_cross_entropy_with_logits(x, tg.zeros(2, 3)).backward()
    assert "BinaryCrossEntropyWithLogitsBackward0" in prof.key_averages().table()
    assert F.nll_loss(x, tg.tensor([0, 1])).grad_fn.name() == "NllLossBackward0"


@pytest.mark.xfail(reason="tracegrad's generator is NumPy's PCG64, not PyTorch's mt19937/"
                          "Philox: the same seed gives the same distribution, not the same "
                          "numbers", strict=True)
def test_same_seed_same_initial_weights_as_torch():
    torch = _torch()
    torch.manual_seed(0)
    tg.manual_seed(0)
    close(nn.Linear(3, 2).weight, torch.nn.Linear(3, 2).weight)
