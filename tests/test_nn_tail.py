"""The tail of ``torch.nn`` against PyTorch: the remaining activations (relu6, hardtanh, selu,
celu, softsign, softmin, threshold, the shrinks, logsigmoid, rrelu and the in-place forms),
pairwise_distance, pdist, rms_norm, bilinear, the margin/embedding/NLL/triplet losses, their
modules and the ``nn.init`` additions.

Every case runs the same NumPy input through both libraries in float64 and float32: values,
gradients of a weighted sum with respect to every floating input (and, for the activations,
second-order gradients), inputs exactly at the kinks included. Tolerances are the project's:
float64 rtol 1e-10, atol 1e-12; float32 rtol 1e-5, atol 1e-6.
"""
import math
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.autograd import gradcheck, gradgradcheck
from tracegrad.nn import functional as F

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

DTYPES = [tg.float64, tg.float32]
TOL = {tg.float64: dict(rtol=1e-10, atol=1e-12), tg.float32: dict(rtol=1e-5, atol=1e-6)}
TORCH_DTYPE = {tg.float64: torch.float64, tg.float32: torch.float32}
KINKS = [-1.0, 0.0, 1.0, 6.0, 0.5, -0.5, -3.0, 3.0, 0.1]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _act_input(seed=0):
    """A (4, 6) input: 15 normal draws (scale 3) and every kink of the activations here."""
    return np.concatenate([_rng(seed).standard_normal(15) * 3, KINKS]).reshape(4, 6)


class Const(np.ndarray):
    """A floating array given to both libraries without requires_grad: PyTorch's native
    kernels are not differentiable in it (soft_margin_loss's target, multi_margin_loss's
    weight)."""


def _const(a):
    return np.asarray(a, dtype=np.float64).view(Const)


def _tensors(lib, arrays, dtype):
    """Floating arrays as ``dtype`` tensors (requiring grad unless ``Const``); integer
    arrays as int64."""
    out = []
    for a in arrays:
        if np.issubdtype(np.asarray(a).dtype, np.floating):
            t = TORCH_DTYPE[dtype] if lib is torch else dtype
            out.append(lib.tensor(np.asarray(a), dtype=t,
                                  requires_grad=not isinstance(a, Const)))
        else:
            out.append(lib.tensor(a))
    return out


def _grads(lib, y, xs, create_graph=False):
    w = _rng(3).standard_normal(tuple(y.shape))
    w = lib.tensor(w, dtype=y.dtype)
    return lib.autograd.grad((y * w).sum(), xs, create_graph=create_graph, allow_unused=True)


def _np(t, like):
    return np.zeros(like.shape) if t is None else t.detach().numpy()


def compare(fn, arrays, dtype, second=False, tol=None):
    """``fn(F, *tensors)`` in both libraries: values, gradients and (``second``) the
    gradients of ``sum(grad * v)``."""
    tol = tol or TOL[dtype]
    tt, gt = _tensors(torch, arrays, dtype), _tensors(tg, arrays, dtype)
    yt, yg = fn(torch.nn.functional, *tt), fn(F, *gt)
    assert yg.dtype is dtype and tuple(yg.shape) == tuple(yt.shape)
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), **tol)
    xt = [t for t in tt if t.requires_grad]
    xg = [t for t in gt if t.requires_grad]
    g1t, g1g = _grads(torch, yt, xt, second), _grads(tg, yg, xg, second)
    for a, b, x in zip(g1g, g1t, xg):
        np.testing.assert_allclose(_np(a, x), _np(b, x), **tol)
    if second:
        v = [_rng(5 + i).standard_normal(x.shape) for i, x in enumerate(xg)]
        st = sum((g * torch.tensor(vi, dtype=g.dtype)).sum() for g, vi in zip(g1t, v))
        sg = sum((g * tg.tensor(vi, dtype=g.dtype)).sum() for g, vi in zip(g1g, v))
        g2t = torch.autograd.grad(st, xt, allow_unused=True)
        # a piecewise-linear function's gradient is constant: tracegrad's then needs no
        # graph, where PyTorch's has one whose derivative is 0
        g2g = tg.autograd.grad(sg, xg, allow_unused=True) if sg.requires_grad \
            else [None] * len(xg)
        for a, b, x in zip(g2g, g2t, xg):
            np.testing.assert_allclose(_np(a, x), _np(b, x), **tol)


# activations -------------------------------------------------------------------------------

ACTIVATIONS = {
    "relu6": lambda F, x: F.relu6(x),
    "hardtanh": lambda F, x: F.hardtanh(x),
    "hardtanh_half": lambda F, x: F.hardtanh(x, -0.5, 0.5),
    "selu": lambda F, x: F.selu(x),
    "celu": lambda F, x: F.celu(x),
    "celu_alpha": lambda F, x: F.celu(x, alpha=0.5),
    "softsign": lambda F, x: F.softsign(x),
    "softmin": lambda F, x: F.softmin(x, dim=1),
    "softmin_dim0": lambda F, x: F.softmin(x, 0),
    "threshold": lambda F, x: F.threshold(x, 0.1, 20.0),
    "threshold_one": lambda F, x: F.threshold(x, 1.0, -2.0),
    "hardshrink": lambda F, x: F.hardshrink(x),
    "hardshrink_one": lambda F, x: F.hardshrink(x, 1.0),
    "softshrink": lambda F, x: F.softshrink(x),
    "softshrink_one": lambda F, x: F.softshrink(x, lambd=1.0),
    "tanhshrink": lambda F, x: F.tanhshrink(x),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "rrelu_eval": lambda F, x: F.rrelu(x),
    "rrelu_eval_bounds": lambda F, x: F.rrelu(x, 0.1, 0.3, training=False),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_matches_torch(name, dtype):
    """Values, first and second order gradients, the kinks (exact bounds, 0) included."""
    x = _act_input()
    if name == "logsigmoid":
        compare(ACTIVATIONS[name], [x], dtype)
        x = x[x != 0]       # see test_logsigmoid_second_derivative_at_zero
    compare(ACTIVATIONS[name], [x], dtype, second=True)


def test_logsigmoid_second_derivative_at_zero():
    compare(ACTIVATIONS["logsigmoid"], [np.array([0.0, 1.0])], tg.float64, second=True)


def test_elu_second_derivative_at_zero():
    compare(lambda F, x: F.elu(x, 0.5), [np.array([0.0, 1.0])], tg.float64, second=True)


INPLACE = {
    "relu_": (lambda F, x: F.relu_(x), lambda F, x: F.relu(x)),
    "elu_": (lambda F, x: F.elu_(x, 0.5), lambda F, x: F.elu(x, 0.5)),
    "leaky_relu_": (lambda F, x: F.leaky_relu_(x, 0.2), lambda F, x: F.leaky_relu(x, 0.2)),
    "hardtanh_": (lambda F, x: F.hardtanh_(x, -0.5, 1.0), lambda F, x: F.hardtanh(x, -0.5, 1.)),
    "relu6_inplace": (lambda F, x: F.relu6(x, inplace=True), lambda F, x: F.relu6(x)),
    "selu_": (lambda F, x: F.selu_(x), lambda F, x: F.selu(x)),
    "celu_": (lambda F, x: F.celu_(x, 2.0), lambda F, x: F.celu(x, 2.0)),
    "threshold_": (lambda F, x: F.threshold_(x, 1.0, 7.0), lambda F, x: F.threshold(x, 1., 7.)),
    "rrelu_": (lambda F, x: F.rrelu_(x), lambda F, x: F.rrelu(x)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_forms(name, dtype):
    """The in-place form writes the out-of-place value into its argument (a non-leaf, so
    the gradient flows back through it) and its gradient is PyTorch's."""
    inplace, plain = INPLACE[name]
    compare(lambda F, x: inplace(F, x * 1.0), [_act_input()], dtype)
    x = tg.tensor(_act_input(), dtype=dtype)
    out = inplace(F, x)
    assert out is x
    np.testing.assert_array_equal(x.numpy(), plain(F, tg.tensor(_act_input(), dtype=dtype))
                                  .numpy())


def test_inplace_on_leaf_requiring_grad_raises():
    x = tg.tensor(_act_input(), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.selu_(x)


def test_activation_gradcheck_and_gradgradcheck():
    x = tg.tensor(_act_input() + 0.0123, requires_grad=True)   # away from every kink
    for name, fn in ACTIVATIONS.items():
        f = lambda t, fn=fn: fn(F, t)    # noqa: E731
        assert gradcheck(f, [x]), name
        assert gradgradcheck(f, [x]), name


def test_nan_propagates_like_torch():
    x = np.array([[np.nan, -2.0, 0.3, 2.0, 0.5, -1.0]])
    for fn in ACTIVATIONS.values():
        compare(fn, [x], tg.float64)


def test_integer_inputs_keep_their_dtype():
    for fn in (lambda F, x: F.relu6(x), lambda F, x: F.hardtanh(x, -2.0, 3.0),
               lambda F, x: F.threshold(x, 1, 20)):
        yt, yg = fn(torch.nn.functional, torch.arange(-4, 9)), fn(F, tg.arange(-4, 9))
        assert yg.dtype is tg.int64 and yt.dtype is torch.int64
        np.testing.assert_array_equal(yg.numpy(), yt.numpy())


def test_softmin_dtype():
    x = _act_input().astype(np.float32)
    yt = torch.nn.functional.softmin(torch.tensor(x), 1, dtype=torch.float64)
    yg = F.softmin(tg.tensor(x), 1, dtype=tg.float64)
    assert yg.dtype is tg.float64
    np.testing.assert_allclose(yg.numpy(), yt.numpy(), **TOL[tg.float64])


def test_activation_errors():
    x = tg.tensor(_act_input())
    with pytest.raises(ValueError, match="hardtanh: min_val cannot be greater than max_val"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(RuntimeError, match=r"softshrink: lambda must be in range \[0, "
                                           r"1.79769e\+308\] for input dtype Double, but "
                                           r"found -1"):
        F.softshrink(x, -1.0)
    with pytest.raises(RuntimeError, match="rrelu: Lower bound should be less than or equal"):
        F.rrelu(x, 0.5, 0.1)
    with pytest.raises(RuntimeError, match="celu: ZeroDivisionError: alpha cannot be 0"):
        F.celu(x, 0.0)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D"):
        nn.Softmax2d()(x)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        F.softmin(x)


def test_rrelu_training_draws_slopes_from_default_generator():
    x = tg.tensor(_act_input(), requires_grad=True)
    tg.manual_seed(0)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    g, = tg.autograd.grad(y.sum(), [x])
    xn, yn, gn = x.detach().numpy(), y.detach().numpy(), g.numpy()
    pos = xn > 0
    np.testing.assert_array_equal(yn[pos], xn[pos])
    np.testing.assert_array_equal(gn[pos], 1.0)
    assert ((gn[~pos] >= 0.1) & (gn[~pos] <= 0.3)).all()         # the slope at 0 too
    np.testing.assert_allclose(yn[~pos], xn[~pos] * gn[~pos], rtol=1e-15)
    tg.manual_seed(0)
    np.testing.assert_array_equal(F.rrelu(x, 0.1, 0.3, training=True).detach().numpy(), yn)
    m = nn.RReLU(0.1, 0.3)
    assert m.training and not np.array_equal(m(x).detach().numpy(), m(x).detach().numpy())
    m.eval()
    compare(lambda F, t: F.rrelu(t, 0.1, 0.3), [_act_input()], tg.float64)


# distances, rms_norm, bilinear -------------------------------------------------------------

def _n(*shape, seed=0, scale=1.0):
    return _rng(seed).standard_normal(shape) * scale


def _repeat_rows():
    x = _n(5, 4, seed=1)
    x[3] = x[1]                 # a zero distance
    return x


FUNCTIONS = {
    "pairwise_distance": (lambda F, a, b: F.pairwise_distance(a, b), [_n(4, 6), _n(4, 6, seed=1)]),
    "pairwise_distance_p1": (lambda F, a, b: F.pairwise_distance(a, b, p=1.0),
                             [_n(4, 6), _n(4, 6, seed=1)]),
    "pairwise_distance_p3_keepdim": (lambda F, a, b: F.pairwise_distance(a, b, 3.0, 1e-3, True),
                                     [_n(4, 6), _n(1, 6, seed=1)]),
    "pairwise_distance_inf": (lambda F, a, b: F.pairwise_distance(a, b, p=math.inf),
                              [_n(4, 6), _n(4, 6, seed=1)]),
    "pairwise_distance_zero": (lambda F, a, b: F.pairwise_distance(a, b, eps=0.0),
                               [_repeat_rows(), _repeat_rows()[[0, 3, 2, 1, 4]]]),
    "pairwise_distance_1d": (lambda F, a, b: F.pairwise_distance(a, b), [_n(6), _n(6, seed=1)]),
    "pdist": (lambda F, x: F.pdist(x), [_n(5, 4)]),
    "pdist_p1": (lambda F, x: F.pdist(x, 1), [_n(5, 4)]),
    "pdist_p3": (lambda F, x: F.pdist(x, p=3), [_n(5, 4)]),
    "pdist_inf": (lambda F, x: F.pdist(x, math.inf), [_n(5, 4)]),
    "pdist_zero_distance": (lambda F, x: F.pdist(x), [_repeat_rows()]),
    "pdist_inf_ties": (lambda F, x: F.pdist(x, math.inf),     # every tie gets the gradient
                       [np.array([[0.0, 0.0], [1.0, 1.0], [1.0, -1.0], [0.0, 0.0]])]),
    "pdist_inf_zero_distance": (lambda F, x: F.pdist(x, math.inf), [_repeat_rows()]),
    "pairwise_distance_inf_ties": (lambda F, a, b: F.pairwise_distance(a, b, math.inf, 0.0),
                                   [np.array([[1.0, 1.0], [2.0, 0.0]]), np.zeros((2, 2))]),
    "pdist_one_row": (lambda F, x: F.pdist(x), [_n(1, 4)]),
    "rms_norm": (lambda F, x, w: F.rms_norm(x, [6], w), [_n(3, 4, 6), _n(6, seed=2)]),
    "rms_norm_no_weight": (lambda F, x: F.rms_norm(x, (4, 6)), [_n(3, 4, 6)]),
    "rms_norm_eps": (lambda F, x: F.rms_norm(x, [6], eps=0.1), [_n(3, 4, 6)]),
    "rms_norm_zero_row": (lambda F, x: F.rms_norm(x, [6]), [np.vstack([np.zeros(6), _n(6)])]),
    "bilinear": (lambda F, a, b, w, c: F.bilinear(a, b, w, c),
                 [_n(5, 3), _n(5, 4, seed=1), _n(2, 3, 4, seed=2), _n(2, seed=3)]),
    "bilinear_no_bias_batch": (lambda F, a, b, w: F.bilinear(a, b, w),
                               [_n(2, 5, 3), _n(2, 5, 4, seed=1), _n(2, 3, 4, seed=2)]),
    "bilinear_1d": (lambda F, a, b, w: F.bilinear(a, b, w),
                    [_n(3), _n(4, seed=1), _n(2, 3, 4, seed=2)]),
    "cosine_similarity": (lambda F, a, b: F.cosine_similarity(a, b, dim=-1),
                          [_n(4, 6), _n(4, 6, seed=1)]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_function_matches_torch(name, dtype):
    fn, arrays = FUNCTIONS[name]
    compare(fn, arrays, dtype)


@pytest.mark.parametrize("name", ["rms_norm", "rms_norm_no_weight", "bilinear",
                                  "bilinear_no_bias_batch", "pairwise_distance"])
def test_function_second_order_matches_torch(name):
    fn, arrays = FUNCTIONS[name]
    compare(fn, arrays, tg.float64, second=True)


@pytest.mark.parametrize("name", ["pairwise_distance", "pairwise_distance_p3_keepdim", "pdist",
                                  "pdist_p3", "rms_norm", "bilinear"])
def test_function_gradcheck_and_gradgradcheck(name):
    fn, arrays = FUNCTIONS[name]
    ts = [tg.tensor(a, requires_grad=True) for a in arrays]
    f = lambda *a: fn(F, *a)    # noqa: E731
    assert gradcheck(f, ts)
    assert gradgradcheck(f, ts)


def test_function_errors():
    x = tg.tensor(_n(3, 4))
    with pytest.raises(RuntimeError, match=r"rms_norm: Given normalized_shape=\[3\], expected "
                                           r"input with shape \[\*3\], but got input of "
                                           r"size\[3, 4\]"):
        F.rms_norm(x, [3])
    with pytest.raises(RuntimeError, match=r"rms_norm: Expected weight to be of same shape"):
        F.rms_norm(x, [4], tg.ones(3))
    with pytest.raises(RuntimeError, match="pdist: pdist only supports 2D tensors, got: 1D"):
        F.pdist(x[0])
    with pytest.raises(RuntimeError, match="pdist: pdist only supports non-negative p values"):
        F.pdist(x, -1)
    w = tg.tensor(_n(2, 4, 4))
    for args, msg in (((x, x[0], w), "input dimensions do not match: got 2 and 1"),
                      ((x, tg.zeros(2, 4), w), "input batch dimensions do not match at dim 0: "
                                               "got 3 and 2"),
                      ((x, x, tg.zeros(2, 3, 4)), "input1 size does not match weight size: "
                                                  "got 4 but expected 3"),
                      ((x, x, tg.zeros(2, 4, 3)), "input2 size does not match weight size: "
                                                  "got 4 but expected 3"),
                      ((x, x, w, tg.zeros(3)), "bias size does not match weight size: got 3 "
                                               "but expected 2")):
        with pytest.raises(RuntimeError, match=r"bilinear: bilinear\(\): " + msg):
            F.bilinear(*args)


# losses -------------------------------------------------------------------------------------

def _sign(*shape, seed=4):
    return np.where(_rng(seed).random(shape) < 0.5, -1.0, 1.0)


def _multilabel_target():
    return np.array([[3, 0, -1, 1, 2], [1, 4, 2, -1, -1], [-1, 2, 0, 0, 0], [0, 1, 2, 3, 4]])


def _integers(*shape, seed=0):
    """Integer-valued floats: the hinges meet their 0 exactly."""
    return _rng(seed).integers(-2, 3, shape).astype(np.float64)


LOSSES = {
    "margin_ranking": (lambda F, a, b, t, **k: F.margin_ranking_loss(a, b, t, 0.5, **k),
                       [_n(8), _n(8, seed=1), _sign(8)]),
    "margin_ranking_kink": (lambda F, a, b, t, **k: F.margin_ranking_loss(a, b, t, **k),
                            [_integers(8), _integers(8, seed=1), _sign(8)]),
    "hinge_embedding": (lambda F, x, t, **k: F.hinge_embedding_loss(x, t, **k),
                        [np.concatenate([_n(10), [1.0, 1.0]]), np.concatenate([_sign(10),
                                                                             [-1.0, 1.0]])]),
    "hinge_embedding_margin": (lambda F, x, t, **k: F.hinge_embedding_loss(x, t, 0.3, **k),
                               [_n(3, 4), _sign(3, 4)]),
    "cosine_embedding": (lambda F, a, b, t, **k: F.cosine_embedding_loss(a, b, t, 0.2, **k),
                         [_n(6, 5), _n(6, 5, seed=1), _sign(6)]),
    "cosine_embedding_1d": (lambda F, a, b, t, **k: F.cosine_embedding_loss(a, b, t, **k),
                            [_n(5), _n(5, seed=1), np.array(-1.0)]),
    "soft_margin": (lambda F, x, t, **k: F.soft_margin_loss(x, t, **k),
                    [_n(3, 4), _const(_sign(3, 4))]),
    "multilabel_soft_margin": (lambda F, x, t, w, **k: F.multilabel_soft_margin_loss(
        x, t, w, **k), [_n(3, 5), (_sign(3, 5) + 1) / 2, _rng(2).random(5)]),
    "multilabel_soft_margin_nw": (lambda F, x, t, **k: F.multilabel_soft_margin_loss(x, t, **k),
                                  [_n(3, 5), _rng(2).random((3, 5))]),
    "multilabel_margin": (lambda F, x, t, **k: F.multilabel_margin_loss(x, t, **k),
                          [_n(4, 5), _multilabel_target()]),
    "multilabel_margin_kink": (lambda F, x, t, **k: F.multilabel_margin_loss(x, t, **k),
                               [_integers(4, 5), _multilabel_target()]),
    "multilabel_margin_1d": (lambda F, x, t, **k: F.multilabel_margin_loss(x, t, **k),
                             [_n(5), np.array([2, 4, -1, 0, 0])]),
    "multi_margin": (lambda F, x, t, **k: F.multi_margin_loss(x, t, **k),
                     [_n(6, 4), np.array([0, 3, 1, 1, 2, 0])]),
    "multi_margin_p2_weight": (lambda F, x, t, w, **k: F.multi_margin_loss(
        x, t, 2, 0.7, w, **k), [_n(6, 4), np.array([0, 3, 1, 1, 2, 0]),
                                                 _const(_rng(1).random(4))]),
    "multi_margin_kink": (lambda F, x, t, **k: F.multi_margin_loss(x, t, p=2, **k),
                          [_integers(6, 4), np.array([0, 3, 1, 1, 2, 0])]),
    "multi_margin_1d": (lambda F, x, t, **k: F.multi_margin_loss(x, t, **k),
                        [_n(4), np.array(2)]),
    "gaussian_nll": (lambda F, x, t, v, **k: F.gaussian_nll_loss(x, t, v, **k),
                     [_n(4, 3), _n(4, 3, seed=1), _rng(2).random((4, 3)) + 0.1]),
    "gaussian_nll_full_homo": (lambda F, x, t, v, **k: F.gaussian_nll_loss(x, t, v, True, **k),
                               [_n(4, 3), _n(4, 3, seed=1), _rng(2).random(4) + 0.1]),
    "gaussian_nll_clamped": (lambda F, x, t, v, **k: F.gaussian_nll_loss(x, t, v, eps=1e-3, **k),
                             [_n(4, 3), _n(4, 3, seed=1),
                              np.array([[1e-5, 0.0, 1e-3], [0.5, 2.0, 1e-4]] * 2)]),
    "gaussian_nll_float_var": (lambda F, x, t, **k: F.gaussian_nll_loss(x, t, 0.5, **k),
                               [_n(4, 3), _n(4, 3, seed=1)]),
    "poisson_nll": (lambda F, x, t, **k: F.poisson_nll_loss(x, t, **k),
                    [_n(4, 3), _rng(1).random((4, 3)) * 3]),
    "poisson_nll_full_linear": (lambda F, x, t, **k: F.poisson_nll_loss(
        x, t, log_input=False, full=True, **k), [_rng(0).random((4, 3)) + 0.1,
                                                  _rng(1).random((4, 3)) * 3 + 0.01]),
    "triplet_margin": (lambda F, a, p, n, **k: F.triplet_margin_loss(a, p, n, **k),
                       [_n(5, 4), _n(5, 4, seed=1), _n(5, 4, seed=2)]),
    "triplet_margin_p1_swap": (lambda F, a, p, n, **k: F.triplet_margin_loss(
        a, p, n, margin=2.0, p=1, swap=True, **k), [_n(5, 4), _n(5, 4, seed=1),
                                                   _n(5, 4, seed=2)]),
}
DISTANCE_LOSSES = {
    "triplet_distance": (lambda F, a, p, n, **k: F.triplet_margin_with_distance_loss(
        a, p, n, **k), [_n(5, 4), _n(5, 4, seed=1), _n(5, 4, seed=2)]),
    "triplet_distance_cosine_swap": (lambda F, a, p, n, **k: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda x, y: 1 - F.cosine_similarity(x, y), margin=0.5,
        swap=True, **k), [_n(5, 4), _n(5, 4, seed=1), _n(5, 4, seed=2)]),
}
ALL_LOSSES = {**LOSSES, **DISTANCE_LOSSES}
REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(ALL_LOSSES))
def test_loss_matches_torch(name, dtype, reduction):
    """Values and gradients w.r.t. every floating input (targets and weights included)."""
    fn, arrays = ALL_LOSSES[name]
    compare(lambda F, *a: fn(F, *a, reduction=reduction), arrays, dtype)


# (gaussian_nll_loss takes no size_average/reduce, as in PyTorch)
@pytest.mark.parametrize("name", [k for k in LOSSES if not k.startswith("gaussian")])
def test_loss_legacy_size_average_and_reduce(name):
    fn, arrays = LOSSES[name]
    for legacy in (dict(size_average=False), dict(reduce=False), dict(size_average=True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compare(lambda F, *a: fn(F, *a, **legacy), arrays, tg.float64)


@pytest.mark.parametrize("name", ["margin_ranking", "hinge_embedding_margin", "cosine_embedding",
                                  "soft_margin", "multilabel_soft_margin", "multilabel_margin",
                                  "multi_margin_p2_weight", "gaussian_nll", "poisson_nll",
                                  "poisson_nll_full_linear", "triplet_margin",
                                  "triplet_distance_cosine_swap"])
def test_loss_gradcheck_and_gradgradcheck(name):
    fn, arrays = ALL_LOSSES[name]
    ts = _tensors(tg, arrays, tg.float64)
    grads = [t for t in ts if t.requires_grad]

    def f(*xs):
        it = iter(xs)
        return fn(F, *[next(it) if t.requires_grad else t for t in ts], reduction="sum")
    assert gradcheck(f, grads)
    assert gradgradcheck(f, grads)


def test_loss_errors():
    x = tg.tensor(_n(3, 4))
    with pytest.raises(RuntimeError, match="margin_ranking_loss : All input tensors should "
                                           "have same dimension"):
        F.margin_ranking_loss(x, x[0], x)
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected"):
        F.cosine_embedding_loss(x, x, tg.ones(3, 1))
    with pytest.raises(RuntimeError, match=r"0D target tensor expects 1D input tensors, but "
                                           r"found inputs with sizes \[3, 4\] and \[3, 4\]"):
        F.cosine_embedding_loss(x, x, tg.ones(()))
    with pytest.raises(RuntimeError, match=r"Expected target size \[3\], but got \[2\]"):
        F.multi_margin_loss(x, tg.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="multi_margin_loss: target out of range"):
        F.multi_margin_loss(x, tg.tensor([0, 1, 7]))
    with pytest.raises(ValueError, match="multi_margin_loss: only p == 1 and p == 2"):
        F.multi_margin_loss(x, tg.tensor([0, 1, 2]), p=3)
    with pytest.raises(RuntimeError, match=r"inconsistent target size: \[2\] for input of "
                                           r"size: \[3, 4\]"):
        F.multilabel_margin_loss(x, tg.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="argument #2 'target' is out of range"):
        F.multilabel_margin_loss(x, tg.tensor([[0, 1, 7, -1]] * 3))
    with pytest.raises(ValueError, match="gaussian_nll_loss: var is of incorrect size"):
        F.gaussian_nll_loss(x, x, tg.ones(2))
    with pytest.raises(ValueError, match="gaussian_nll_loss: var has negative entry"):
        F.gaussian_nll_loss(x, x, -tg.ones(3, 4))
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.poisson_nll_loss(x, x, reduction="bad")
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.hinge_embedding_loss(x, x, reduction="bad")
    with pytest.raises(RuntimeError, match="anchor 2D, positive 2D, and negative 1D inputs"):
        F.triplet_margin_loss(x, x, x[0])
    with pytest.raises(ValueError, match="triplet_margin_loss: margin must be greater than 0"):
        F.triplet_margin_loss(x, x, x, margin=0)
    with pytest.raises(ValueError, match="margin must be greater than 0, got -1"):
        F.triplet_margin_with_distance_loss(x, x, x, margin=-1)


# modules ------------------------------------------------------------------------------------

def _module_pair(make):
    """The same module in both libraries, tracegrad's loaded from PyTorch's state_dict."""
    mt, mg = make(torch.nn), make(nn)
    state = {k: tg.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()}
    mg.load_state_dict(state)
    assert repr(mg) == repr(mt)
    return mt, mg


MODULES = {
    "ReLU6": (lambda nn: nn.ReLU6(), 1), "Hardtanh": (lambda nn: nn.Hardtanh(-2.0, 3.0), 1),
    "SELU": (lambda nn: nn.SELU(), 1), "CELU": (lambda nn: nn.CELU(0.5), 1),
    "Softsign": (lambda nn: nn.Softsign(), 1), "Softmin": (lambda nn: nn.Softmin(1), 1),
    "Threshold": (lambda nn: nn.Threshold(0.1, 20.0), 1),
    "Hardshrink": (lambda nn: nn.Hardshrink(), 1), "Softshrink": (lambda nn: nn.Softshrink(1.), 1),
    "Tanhshrink": (lambda nn: nn.Tanhshrink(), 1), "LogSigmoid": (lambda nn: nn.LogSigmoid(), 1),
    "RReLU_eval": (lambda nn: nn.RReLU(0.1, 0.2).eval(), 1),
    "RMSNorm": (lambda nn: nn.RMSNorm(6), 1),
    "RMSNorm_2d_eps": (lambda nn: nn.RMSNorm([4, 6], eps=1e-3), 1),
    "RMSNorm_no_affine": (lambda nn: nn.RMSNorm(6, elementwise_affine=False), 1),
    "PairwiseDistance": (lambda nn: nn.PairwiseDistance(p=3.0, keepdim=True), 2),
    "CosineSimilarity": (lambda nn: nn.CosineSimilarity(dim=2), 2),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(MODULES))
def test_module_matches_torch(name, dtype):
    make, nargs = MODULES[name]
    mt, mg = _module_pair(make)
    mt.to(TORCH_DTYPE[dtype])
    mg.to(dtype)
    arrays = [np.concatenate([_n(63, seed=i), KINKS]).reshape(3, 4, 6) for i in range(nargs)]
    params_t, params_g = list(mt.parameters()), list(mg.parameters())
    tt = _tensors(torch, arrays, dtype)
    gt = _tensors(tg, arrays, dtype)
    yt, yg = mt(*tt), mg(*gt)
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), **TOL[dtype])
    for a, b in zip(_grads(tg, yg, gt + params_g), _grads(torch, yt, tt + params_t)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_module(bias, dtype):
    mt, mg = _module_pair(lambda nn: nn.Bilinear(3, 4, 2, bias=bias))
    mt.to(TORCH_DTYPE[dtype])
    mg.to(dtype)
    arrays = [_n(5, 3), _n(5, 4, seed=1)]
    tt, gt = _tensors(torch, arrays, dtype), _tensors(tg, arrays, dtype)
    yt, yg = mt(*tt), mg(*gt)
    np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), **TOL[dtype])
    for a, b in zip(_grads(tg, yg, gt + list(mg.parameters())),
                    _grads(torch, yt, tt + list(mt.parameters()))):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL[dtype])


def test_bilinear_and_rmsnorm_initialisation():
    m = nn.Bilinear(9, 4, 3)
    assert m.weight.shape == (3, 9, 4) and m.bias.shape == (3,)
    assert float(m.weight.abs().max()) <= 1 / 3 and float(m.bias.abs().max()) <= 1 / 3
    r = nn.RMSNorm((2, 3))
    np.testing.assert_array_equal(r.weight.detach().numpy(), np.ones((2, 3)))
    assert nn.RMSNorm(3, elementwise_affine=False).weight is None


LOSS_MODULES = {
    "margin_ranking": lambda nn, r: nn.MarginRankingLoss(0.5, reduction=r),
    "hinge_embedding": lambda nn, r: nn.HingeEmbeddingLoss(reduction=r),
    "cosine_embedding": lambda nn, r: nn.CosineEmbeddingLoss(0.2, reduction=r),
    "soft_margin": lambda nn, r: nn.SoftMarginLoss(reduction=r),
    "multilabel_soft_margin": lambda nn, r: nn.MultiLabelSoftMarginLoss(reduction=r),
    "multilabel_margin": lambda nn, r: nn.MultiLabelMarginLoss(reduction=r),
    "multi_margin": lambda nn, r: nn.MultiMarginLoss(reduction=r),
    "gaussian_nll": lambda nn, r: nn.GaussianNLLLoss(full=True, reduction=r),
    "poisson_nll": lambda nn, r: nn.PoissonNLLLoss(reduction=r),
    "triplet_margin": lambda nn, r: nn.TripletMarginLoss(swap=True, reduction=r),
    "triplet_distance": lambda nn, r: nn.TripletMarginWithDistanceLoss(reduction=r),
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", list(LOSS_MODULES))
def test_loss_module_matches_torch(name, reduction):
    mt, mg = _module_pair(lambda nn: LOSS_MODULES[name](nn, reduction))
    arrays = ALL_LOSSES[name][1]
    if name == "multilabel_soft_margin":
        arrays = arrays[:2]
    for dtype in DTYPES:
        tt, gt = _tensors(torch, arrays, dtype), _tensors(tg, arrays, dtype)
        yt, yg = mt(*tt), mg(*gt)
        np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), **TOL[dtype])
        xt = [t for t in tt if t.requires_grad]
        xg = [t for t in gt if t.requires_grad]
        for a, b, x in zip(_grads(tg, yg, xg), _grads(torch, yt, xt), xg):
            np.testing.assert_allclose(_np(a, x), _np(b, x), **TOL[dtype])


def test_loss_module_weights_and_legacy_flags():
    w = _rng(1).random(4)
    mt = torch.nn.MultiMarginLoss(p=2, margin=0.5, weight=torch.tensor(w))
    mg = nn.MultiMarginLoss(p=2, margin=0.5, weight=tg.tensor(w))
    assert "weight" in dict(mg.named_buffers())
    x, t = _n(6, 4), np.array([0, 3, 1, 1, 2, 0])
    np.testing.assert_allclose(mg(tg.tensor(x), tg.tensor(t)).item(),
                               mt(torch.tensor(x), torch.tensor(t)).item(), rtol=1e-12)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.SoftMarginLoss(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater"):
        nn.TripletMarginLoss(margin=0.0)
    assert isinstance(nn.TripletMarginWithDistanceLoss().distance_function,
                      nn.PairwiseDistance)


def test_pytorch_module_paths():
    from tracegrad.nn.modules import activation, distance, linear, loss, normalization
    assert activation.RReLU is nn.RReLU and activation.Softmax2d is nn.Softmax2d
    assert distance.PairwiseDistance is nn.PairwiseDistance
    assert linear.Bilinear is nn.Bilinear and normalization.RMSNorm is nn.RMSNorm
    assert loss.TripletMarginWithDistanceLoss is nn.TripletMarginWithDistanceLoss
    assert nn.modules.CosineSimilarity is nn.CosineSimilarity
    for name in ("ReLU6", "Hardtanh", "SELU", "CELU", "Softsign", "Softmin", "Threshold",
                 "Hardshrink", "Softshrink", "Tanhshrink", "LogSigmoid", "Softmax2d", "RReLU",
                 "RMSNorm", "PairwiseDistance", "CosineSimilarity", "Bilinear",
                 "MarginRankingLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss",
                 "SoftMarginLoss", "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss",
                 "MultiMarginLoss", "GaussianNLLLoss", "PoissonNLLLoss", "TripletMarginLoss",
                 "TripletMarginWithDistanceLoss"):
        assert name in nn.__all__ and hasattr(torch.nn, name)


# compile ------------------------------------------------------------------------------------

COMPILE_CASES = {**{k: (v, [_act_input()]) for k, v in ACTIVATIONS.items()},
                 **FUNCTIONS,
                 **{k: (lambda F, *a, fn=v[0]: fn(F, *a, reduction="sum"), v[1])
                    for k, v in ALL_LOSSES.items()}}


@pytest.mark.parametrize("backend", ["numpy", "c"])
@pytest.mark.parametrize("name", list(COMPILE_CASES))
def test_compiled_matches_eager(name, backend):
    fn, arrays = COMPILE_CASES[name]
    eager = lambda *a: fn(F, *a)     # noqa: E731
    compiled = tg.compile(eager, backend=backend)
    results = []
    for f in (eager, compiled):
        ts = _tensors(tg, arrays, tg.float64)
        xs = [t for t in ts if t.requires_grad]
        y = f(*ts)
        results.append([y.detach().numpy()] + [_np(g, x) for g, x in
                                               zip(_grads(tg, y, xs), xs)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, **TOL[tg.float64])


def test_compiled_modules_match_eager():
    x = tg.tensor(_n(3, 4, 6))
    for module in (nn.RMSNorm(6), nn.Hardtanh(), nn.RReLU().eval(), nn.Softmax2d(),
                   nn.Threshold(0.1, 2.0)):
        np.testing.assert_allclose(tg.compile(module)(x).detach().numpy(),
                                   module(x).detach().numpy(),
                                   **TOL[tg.float64])
    r = tg.compile(nn.RReLU(0.1, 0.3))          # training: a fresh slope per element and call
    y, y2 = r(x).numpy(), r(x).numpy()
    neg = x.numpy() < 0
    assert not np.array_equal(y, y2) and np.array_equal(y[~neg], x.numpy()[~neg])
    slope = y[neg] / x.numpy()[neg]
    assert ((slope >= 0.1 - 1e-12) & (slope <= 0.3 + 1e-12)).all()
    b = nn.Bilinear(6, 6, 2).double()
    np.testing.assert_allclose(tg.compile(b)(x, x).detach().numpy(), b(x, x).detach().numpy(),
                               **TOL[tg.float64])


def test_backward_node_names_match_torch():
    """``grad_fn`` names PyTorch's node for each op (one node, not the composite's chain)."""
    cases = [(ACTIVATIONS[k], [_act_input()]) for k in ACTIVATIONS]
    # (the existing cosine_similarity's node is SumBackward0, PyTorch's SumBackward1)
    cases += [v for k, v in FUNCTIONS.items() if not k.startswith(("bilinear", "cosine"))]
    cases += [v for k, v in ALL_LOSSES.items()]
    for fn, arrays in cases:
        yt = fn(torch.nn.functional, *_tensors(torch, arrays, tg.float64))
        yg = fn(F, *_tensors(tg, arrays, tg.float64))
        assert yg.grad_fn.name() == yt.grad_fn.name()


# nn.init ------------------------------------------------------------------------------------

def test_init_eye_and_dirac_match_torch():
    from tracegrad.nn import init
    w = tg.empty(3, 5, requires_grad=True)
    assert init.eye_(w) is w and w.requires_grad
    np.testing.assert_array_equal(w.detach().numpy(), torch.nn.init.eye_(torch.empty(3, 5)))
    for shape, groups in (((4, 2, 3), 1), ((6, 4, 3, 3), 2), ((4, 4, 3, 3, 3), 2),
                          ((2, 5, 4, 2), 1)):
        a = init.dirac_(tg.empty(*shape), groups)
        b = torch.nn.init.dirac_(torch.empty(*shape), groups)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(tg.empty(3))
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
        init.dirac_(tg.empty(3, 3))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        init.dirac_(tg.empty(3, 3, 3), groups=2)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 2, 3), (4, 4)])
def test_init_orthogonal(shape):
    from tracegrad.nn import init
    w = init.orthogonal_(tg.empty(*shape, dtype=tg.float64), gain=2.0)
    m = w.numpy().reshape(shape[0], -1)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4 * np.eye(min(m.shape)), atol=1e-12)
    tg.manual_seed(3)
    a = init.orthogonal_(tg.empty(*shape)).numpy()
    tg.manual_seed(3)
    np.testing.assert_array_equal(init.orthogonal_(tg.empty(*shape)).numpy(), a)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions"):
        init.orthogonal_(tg.empty(3))


def test_init_sparse():
    from tracegrad.nn import init
    w = init.sparse_(tg.empty(10, 6, dtype=tg.float64), 0.25, std=2.0)
    zeros = (w.numpy() == 0).sum(0)
    np.testing.assert_array_equal(zeros, np.full(6, 3))           # ceil(0.25 * 10) per column
    assert 0.5 < w.numpy()[w.numpy() != 0].std() < 4
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(tg.empty(2, 2, 2), 0.1)


@pytest.mark.parametrize("old", ["uniform", "normal", "constant", "eye", "dirac",
                                 "xavier_uniform", "xavier_normal", "kaiming_uniform",
                                 "kaiming_normal", "orthogonal", "sparse"])
def test_init_deprecated_aliases_warn_and_call(old):
    from tracegrad.nn import init
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(old, ())
    shape = (4, 2, 3) if old == "dirac" else (4, 3)
    w = tg.empty(*shape)
    with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of "
                                           f"`nn.init.{old}_`"):
        out = getattr(init, old)(w, *args)
    assert out is w and getattr(init, old).__name__ == old == getattr(torch.nn.init, old).__name__
    if old in ("constant", "eye", "dirac"):
        np.testing.assert_array_equal(w.numpy(), getattr(torch.nn.init, old + "_")(
            torch.empty(*shape), *args).numpy())
