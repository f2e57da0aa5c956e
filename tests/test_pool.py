"""Pooling, interpolation, pixel shuffle and the per-sample norms, against PyTorch.

The op table (``op_table_pool.py``) covers each primitive by NumPy references, gradcheck,
gradgradcheck and compiled-vs-eager; here: forward and gradients against PyTorch over
the argument space (odd sizes, stride > kernel, ceil_mode, padding with dilation, index
values, count_include_pad, divisor_override, non-divisible adaptive sizes, align_corners
with size and scale_factor), integer inputs, NaN and inf, the layers (extra_repr,
state_dict keys, running stats), error messages, and compiled functions.
"""
import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as tnn
import tracegrad.nn.functional as TF

from tolerances import close

torch = pytest.importorskip("torch")
F = torch.nn.functional

# Pooling and interpolation: each output is a max (exact) or a weighted sum of at most a few
# dozen inputs (an adaptive window of up to 28, a trilinear stencil of 8), each input's
# gradient a sum of as many weighted output gradients; PyTorch adds them in another order.
# Inputs are within [-0.5, 0.5] and the output weights standard normal.
def POOL(dtype):
    return close(dtype, n_ops=32, scale=4)


# The norms: a mean and a variance over at most 60 elements, a reciprocal square root, and
# the backward's two more sums over the same elements, on standard normal data (times up to
# 3, plus up to 2, in the running-stats test).
NORM = close("float64", n_ops=4 * 64, scale=64)


def _both(fn, shape, seed=0, dtype=np.float64):
    """``fn`` on the same random input in torch and tracegrad, with a weighted-sum backward:
    (torch outputs, tracegrad outputs, torch grad, tracegrad grad)."""
    rng = np.random.default_rng(seed)
    a = rng.permutation(np.prod(shape)).reshape(shape).astype(dtype) / np.prod(shape) - 0.5
    t, g = torch.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
    to, go = fn(F, t), fn(TF, g)
    to = to if isinstance(to, tuple) else (to,)
    go = go if isinstance(go, tuple) else (go,)
    w = rng.standard_normal(tuple(to[0].shape))
    (to[0] * torch.tensor(w, dtype=to[0].dtype)).sum().backward()
    (go[0] * tg.tensor(w, dtype=go[0].dtype)).sum().backward()
    return to, go, t.grad, g.grad


def _check(fn, shape, dtype=np.float64, tol=None):
    tol = POOL(dtype) if tol is None else tol
    to, go, tgrad, ggrad = _both(fn, shape, dtype=dtype)
    assert len(to) == len(go)
    for t, g in zip(to, go):
        assert str(t.dtype).split(".")[-1] == g.dtype.name
        np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), **tol)
    np.testing.assert_allclose(ggrad.numpy(), tgrad.numpy(), **tol)
    return to, go


MAX_CASES = [
    ("2d k3", lambda F, x: F.max_pool2d(x, 3, return_indices=True), (2, 3, 7, 9)),
    ("2d stride>kernel", lambda F, x: F.max_pool2d(x, 2, 3, return_indices=True), (1, 2, 11, 8)),
    ("2d ceil", lambda F, x: F.max_pool2d(x, 3, 2, ceil_mode=True, return_indices=True),
     (2, 2, 8, 7)),
    ("2d pad+dilation", lambda F, x: F.max_pool2d(x, 3, 2, 1, dilation=2, return_indices=True),
     (1, 3, 9, 10)),
    ("2d pad+dilation ceil", lambda F, x: F.max_pool2d(x, (2, 3), (3, 1), (1, 1), (3, 1), True,
                                                       True), (2, 1, 10, 6)),
    ("2d unbatched", lambda F, x: F.max_pool2d(x, 2, 1, 1, return_indices=True), (3, 5, 4)),
    ("1d", lambda F, x: F.max_pool1d(x, 4, 3, 2, 1, True, True), (2, 3, 13)),
    ("1d unbatched dilation", lambda F, x: F.max_pool1d(x, 2, 2, 1, 3, return_indices=True),
     (3, 11)),
    ("3d", lambda F, x: F.max_pool3d(x, (2, 3, 2), (2, 1, 3), (1, 1, 0), ceil_mode=True,
                                     return_indices=True), (2, 2, 5, 4, 7)),
    ("3d dilation", lambda F, x: F.max_pool3d(x, 2, 1, 1, 2, return_indices=True), (1, 4, 4, 5)),
    ("adaptive 2d", lambda F, x: F.adaptive_max_pool2d(x, (3, 5), True), (2, 3, 7, 11)),
    ("adaptive 2d None", lambda F, x: F.adaptive_max_pool2d(x, (None, 4), True), (2, 5, 9)),
    ("adaptive 1d", lambda F, x: F.adaptive_max_pool1d(x, 4, True), (2, 3, 10)),
    ("adaptive 3d", lambda F, x: F.adaptive_max_pool3d(x, (2, 3, 4), True), (1, 2, 5, 7, 6)),
]


@pytest.mark.parametrize("fn,shape", [pytest.param(f, s, id=i) for i, f, s in MAX_CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_pool_values_indices_and_grads_match_torch(fn, shape, dtype):
    to, go = _check(fn, shape, dtype)
    np.testing.assert_array_equal(go[1].numpy(), to[1].numpy())      # the same indices
    assert go[1].dtype is tg.int64


AVG_CASES = [
    ("2d k3", lambda F, x: F.avg_pool2d(x, 3), (2, 3, 7, 9)),
    ("2d stride>kernel", lambda F, x: F.avg_pool2d(x, 2, 3), (1, 2, 11, 8)),
    ("2d ceil pad incl", lambda F, x: F.avg_pool2d(x, 3, 2, 1, True, True), (2, 2, 8, 7)),
    ("2d ceil pad excl", lambda F, x: F.avg_pool2d(x, 3, 2, 1, True, False), (2, 2, 8, 7)),
    ("2d divisor", lambda F, x: F.avg_pool2d(x, (2, 3), (1, 2), (1, 1), divisor_override=5),
     (2, 2, 6, 7)),
    ("2d divisor ceil", lambda F, x: F.avg_pool2d(x, 3, 2, 1, True, False, 2), (1, 2, 6, 6)),
    ("2d unbatched", lambda F, x: F.avg_pool2d(x, 2, 1, 1), (3, 5, 4)),
    ("1d incl", lambda F, x: F.avg_pool1d(x, 4, 3, 2, True, True), (2, 3, 13)),
    ("1d excl", lambda F, x: F.avg_pool1d(x, 4, 3, 2, True, False), (2, 3, 13)),
    ("3d", lambda F, x: F.avg_pool3d(x, (2, 3, 2), (2, 1, 3), (1, 1, 0), True, False),
     (2, 2, 5, 4, 7)),
    ("3d divisor", lambda F, x: F.avg_pool3d(x, 2, divisor_override=3), (1, 4, 4, 5)),
    ("adaptive 2d", lambda F, x: F.adaptive_avg_pool2d(x, (3, 5)), (2, 3, 7, 11)),
    ("adaptive 2d up", lambda F, x: F.adaptive_avg_pool2d(x, (5, 9)), (2, 3, 4, 7)),
    ("adaptive 2d global", lambda F, x: F.adaptive_avg_pool2d(x, 1), (2, 3, 4, 7)),
    ("adaptive 2d None", lambda F, x: F.adaptive_avg_pool2d(x, (None, 4)), (2, 5, 9)),
    ("adaptive 1d", lambda F, x: F.adaptive_avg_pool1d(x, 4), (2, 3, 10)),
    ("adaptive 3d", lambda F, x: F.adaptive_avg_pool3d(x, (2, 3, 4)), (1, 2, 5, 7, 6)),
]


@pytest.mark.parametrize("fn,shape", [pytest.param(f, s, id=i) for i, f, s in AVG_CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_avg_pool_matches_torch(fn, shape, dtype):
    _check(fn, shape, dtype)


INTERP_CASES = [
    ("nearest 1d scale", dict(scale_factor=2.5), (2, 3, 5)),
    ("nearest 1d size down", dict(size=3), (2, 3, 7)),
    ("nearest 2d scale 1.7", dict(scale_factor=1.7), (2, 2, 5, 6)),
    ("nearest 2d size", dict(size=(7, 4)), (2, 2, 5, 6)),
    ("nearest 2d scale 2", dict(scale_factor=2), (1, 2, 3, 4)),
    ("nearest 2d recompute", dict(scale_factor=1.3, recompute_scale_factor=True), (1, 2, 7, 5)),
    ("nearest 3d", dict(scale_factor=(2, 1.5, 0.5)), (1, 2, 3, 4, 6)),
    ("nearest-exact 2d", dict(scale_factor=1.7, mode="nearest-exact"), (2, 2, 5, 6)),
    ("area 2d", dict(size=(3, 4), mode="area"), (2, 2, 7, 9)),
]
for _ac in (True, False):
    INTERP_CASES += [
        (f"linear scale ac={_ac}", dict(scale_factor=2.5, mode="linear", align_corners=_ac),
         (2, 3, 5)),
        (f"linear size down ac={_ac}", dict(size=3, mode="linear", align_corners=_ac), (2, 3, 8)),
        (f"bilinear scale ac={_ac}", dict(scale_factor=1.7, mode="bilinear", align_corners=_ac),
         (2, 2, 5, 6)),
        (f"bilinear size ac={_ac}", dict(size=(9, 4), mode="bilinear", align_corners=_ac),
         (2, 2, 5, 6)),
        (f"bilinear size 1 ac={_ac}", dict(size=(1, 3), mode="bilinear", align_corners=_ac),
         (1, 2, 5, 6)),
        (f"bilinear scale (3,0.6) ac={_ac}", dict(scale_factor=(3, 0.6), mode="bilinear",
                                                  align_corners=_ac), (1, 2, 3, 10)),
        (f"trilinear ac={_ac}", dict(size=(3, 5, 2), mode="trilinear", align_corners=_ac),
         (1, 2, 2, 3, 4)),
    ]


@pytest.mark.parametrize("kw,shape", [pytest.param(k, s, id=i) for i, k, s in INTERP_CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_interpolate_matches_torch(kw, shape, dtype):
    _check(lambda F, x: F.interpolate(x, **kw), shape, dtype)


@pytest.mark.parametrize("name,fn,shape", [
    ("pixel_shuffle", lambda F, x: F.pixel_shuffle(x, 3), (2, 18, 2, 3)),
    ("pixel_shuffle unbatched", lambda F, x: F.pixel_shuffle(x, 2), (8, 2, 3)),
    ("pixel_unshuffle", lambda F, x: F.pixel_unshuffle(x, 2), (2, 3, 4, 6)),
    ("group_norm", lambda F, x: F.group_norm(x, 2, eps=1e-3), (2, 4, 3, 5)),
    ("group_norm 1d", lambda F, x: F.group_norm(x, 3), (3, 6, 4)),
    ("instance_norm", lambda F, x: F.instance_norm(x), (2, 4, 3, 5)),
    ("local_response_norm odd", lambda F, x: F.local_response_norm(x, 3, 0.1, 0.7, 2.0),
     (2, 5, 3, 4)),
    ("local_response_norm even 3d", lambda F, x: F.local_response_norm(x, 4), (2, 6, 5)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_compositions_match_torch(name, fn, shape):
    _check(fn, shape, tol=NORM)


def test_affine_norms_with_weights():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 5))
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    res = []
    for lib, F_ in ((torch, F), (tg, TF)):
        xs = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        out = F_.group_norm(xs[0], 3, xs[1], xs[2]) + F_.instance_norm(xs[0], weight=xs[1],
                                                                         bias=xs[2])
        out.pow(2).sum().backward()
        res.append([out.detach().numpy()] + [a.grad.numpy() for a in xs])
    for a, b_ in zip(*res):
        np.testing.assert_allclose(a, b_, **NORM)


# dtypes, NaN and inf ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype,fn", [
    ("int32", lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True)),
    ("int64", lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True)),
    ("int64", lambda F, x: F.max_pool3d(x[None], (1, 2, 2), ceil_mode=True)),
    ("int64", lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)),
    ("int64", lambda F, x: F.avg_pool2d(x, 2, count_include_pad=False)),
])
def test_integer_max_and_avg_pool_match_torch(dtype, fn):
    """Integer pools (where PyTorch has them): exact values, avg truncating as PyTorch's."""
    a = (np.arange(-40, 40).reshape(1, 2, 5, 8) * 7 % 23 - 11).astype(dtype)
    t, g = fn(F, torch.tensor(a)), fn(TF, tg.tensor(a))
    for tt, gg in zip(t if isinstance(t, tuple) else (t,), g if isinstance(g, tuple) else (g,)):
        assert gg.dtype.name == str(tt.dtype).split(".")[-1]
        np.testing.assert_array_equal(gg.numpy(), tt.numpy())     # integers: exact


def test_max_pool_nan_and_minus_inf_like_torch():
    a = np.arange(32.0).reshape(1, 2, 4, 4)
    a[0, 0, 1, 2] = np.nan
    a[0, 1] = -np.inf
    a[0, 1, 3, 3] = np.inf
    for fn in (lambda F, x: F.max_pool2d(x, 2, 1, 1, return_indices=True),
               lambda F, x: F.adaptive_max_pool2d(x, 3, True)):
        t, g = fn(F, torch.tensor(a)), fn(TF, tg.tensor(a))
        # a max selects one of its inputs, with no rounding: exact, NaN where NaN
        np.testing.assert_array_equal(g[0].numpy(), t[0].numpy())
        np.testing.assert_array_equal(g[1].numpy(), t[1].numpy())


def test_inf_does_not_spread_through_avg_pool_or_upsampling():
    a = np.ones((1, 1, 4, 6))
    a[0, 0, 0, 0] = np.inf
    for fn in (lambda F, x: F.avg_pool2d(x, 2, 2, 1),
               lambda F, x: F.adaptive_avg_pool2d(x, (3, 4)),
               lambda F, x: F.interpolate(x, scale_factor=2),
               lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear")):
        t, g = fn(F, torch.tensor(a)), fn(TF, tg.tensor(a))
        # exact: averages of ones over small windows, and the bilinear weights at scale 2 are
        # quarters, so every finite result is 1.0 with no rounding; inf stays inf
        np.testing.assert_array_equal(g.numpy(), t.numpy())


# second derivatives and grad_fn names ------------------------------------------------------------

@pytest.mark.parametrize("fn,name", [
    (lambda F, x: F.max_pool2d(x, 3, 2, 1), "MaxPool2DWithIndicesBackward0"),
    (lambda F, x: F.max_pool3d(x.unsqueeze(2), (1, 2, 2)), "MaxPool3DWithIndicesBackward0"),
    (lambda F, x: F.avg_pool2d(x, 3, 2, 1), "AvgPool2DBackward0"),
    (lambda F, x: F.adaptive_avg_pool2d(x, 3), "AdaptiveAvgPool2DBackward0"),
    (lambda F, x: F.adaptive_max_pool2d(x, 3), "AdaptiveMaxPool2DBackward0"),
    (lambda F, x: F.interpolate(x, scale_factor=2), "UpsampleNearest2DBackward0"),
    (lambda F, x: F.interpolate(x, size=7, mode="bilinear"), "UpsampleBilinear2DBackward0"),
])
def test_grad_fn_names_and_double_backward_match_torch(fn, name):
    a = np.random.default_rng(5).permutation(2 * 3 * 6 * 6).reshape(2, 3, 6, 6) / 100.0
    res = []
    for lib, F_ in ((torch, F), (tg, TF)):
        x = lib.tensor(a, requires_grad=True)
        y = fn(F_, x)
        assert y.grad_fn.name() == name
        w = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
        gx, = lib.autograd.grad((y * y * w).sum(), x, create_graph=True)
        gg, = lib.autograd.grad((gx * gx).sum(), x)
        res.append((gx.detach().numpy(), gg.numpy()))
    # two backward passes through a pooling or interpolation window, then squares
    for a_, b_ in zip(*res):
        np.testing.assert_allclose(b_, a_, **close("float64", n_ops=4 * 32, scale=16))


# layers ---------------------------------------------------------------------------------

LAYERS = [
    ("MaxPool1d", (3,), (2, 3, 10)),
    ("MaxPool2d", (3, 2, 1, 1, False, True), (2, 3, 7, 8)),
    ("MaxPool3d", ((2, 2, 3),), (1, 2, 4, 5, 6)),
    ("AvgPool1d", (3, 2, 1), (2, 3, 10)),
    ("AvgPool2d", (3, 2, 1, True, False), (2, 3, 7, 8)),
    ("AvgPool3d", (2, None, 0, False, True, 3), (1, 2, 4, 5, 6)),
    ("AdaptiveAvgPool1d", (3,), (2, 3, 10)),
    ("AdaptiveAvgPool2d", ((3, None),), (2, 3, 7, 8)),
    ("AdaptiveMaxPool1d", (4,), (2, 3, 10)),
    ("AdaptiveMaxPool2d", (3,), (2, 3, 7, 8)),
    ("Upsample", (None, 2), (2, 3, 4, 5)),
    ("Upsample", ((3, 7), None, "bilinear", True), (2, 3, 4, 5)),
    ("Upsample", (None, 1.5, "linear"), (2, 3, 4)),
    ("UpsamplingNearest2d", (None, 3), (2, 3, 4, 5)),
    ("UpsamplingBilinear2d", (5,), (2, 3, 4, 3)),
    ("PixelShuffle", (2,), (2, 8, 3, 4)),
    ("PixelUnshuffle", (2,), (2, 2, 4, 6)),
    ("GroupNorm", (2, 4), (2, 4, 3, 5)),
    ("GroupNorm", (2, 4, 1e-3, False), (2, 4, 3, 5)),
    ("InstanceNorm1d", (3,), (2, 3, 10)),
    ("InstanceNorm2d", (3, 1e-5, 0.1, True), (2, 3, 4, 5)),
    ("LocalResponseNorm", (3,), (2, 5, 3, 4)),
]


@pytest.mark.parametrize("cls,args,shape", LAYERS,
                         ids=[f"{c}{a}" for c, a, _ in LAYERS])
def test_layer_matches_torch(cls, args, shape):
    rng = np.random.default_rng(11)
    tm, gm = getattr(torch.nn, cls)(*args).double(), getattr(tnn, cls)(*args).double()
    assert repr(gm) == repr(tm)
    assert list(gm.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():        # random affine weights, copied
        if v.is_floating_point():
            v.copy_(torch.tensor(rng.standard_normal(tuple(v.shape))))
    gm.load_state_dict({k: tg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    a = rng.standard_normal(shape)
    tx, gx = torch.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
    to, go = tm(tx), gm(gx)
    to, go = (to[0], go[0]) if isinstance(to, tuple) else (to, go)
    np.testing.assert_allclose(go.detach().numpy(), to.detach().numpy(), **NORM)
    to.pow(2).sum().backward()
    go.pow(2).sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), **NORM)
    for (n, p), (_, q) in zip(tm.named_parameters(), gm.named_parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), **NORM, err_msg=n)


@pytest.mark.parametrize("cls,args,shape", [
    ("BatchNorm3d", (3,), (2, 3, 2, 3, 4)),
    ("BatchNorm3d", (3, 1e-5, None), (2, 3, 2, 3, 4)),
    ("InstanceNorm1d", (3, 1e-5, 0.2, True, True), (2, 3, 7)),
    ("InstanceNorm2d", (3, 1e-5, 0.1, False, True), (4, 3, 4, 5)),
    ("InstanceNorm2d", (3, 1e-5, 0.1, False, True), (3, 4, 5)),    # unbatched
    ("InstanceNorm3d", (2, 1e-5, 0.1, True, True), (2, 2, 3, 2, 4)),
])
def test_running_stats_train_then_eval_match_torch(cls, args, shape):
    rng = np.random.default_rng(2)
    tm, gm = getattr(torch.nn, cls)(*args).double(), getattr(tnn, cls)(*args).double()
    assert repr(gm) == repr(tm)
    assert list(gm.state_dict()) == list(tm.state_dict())
    for step in range(3):
        a = rng.standard_normal(shape) * (step + 1) + step
        tx, gx = torch.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
        to, go = tm(tx), gm(gx)
        np.testing.assert_allclose(go.detach().numpy(), to.detach().numpy(), **NORM)
        (to * to).sum().backward()
        (go * go).sum().backward()
        np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), **NORM)
    # running stats: three momentum updates of a mean and a variance (num_batches_tracked is
    # an integer, compared exactly)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(gm.state_dict()[k].detach().numpy(), v.numpy(), **NORM,
                                   err_msg=k)
    tm.eval()
    gm.eval()
    a = rng.standard_normal(shape)
    np.testing.assert_allclose(gm(tg.tensor(a)).detach().numpy(),
                               tm(torch.tensor(a)).detach().numpy(), **NORM)


def test_max_pool_layer_returns_indices():
    x = tg.tensor(np.random.default_rng(0).standard_normal((1, 2, 6, 6)))
    out, idx = tnn.MaxPool2d(2, return_indices=True)(x)
    assert out.shape == (1, 2, 3, 3) and idx.dtype is tg.int64


# errors ------------------------------------------------------------------------------------

ERRORS = [
    ("max_pool2d 1d input", lambda F, lib: F.max_pool2d(lib.ones(4), 2)),
    ("max_pool1d 1d input", lambda F, lib: F.max_pool1d(lib.ones(4), 2)),
    ("max_pool3d 3d input", lambda F, lib: F.max_pool3d(lib.ones(2, 4, 4), 2)),
    ("avg_pool1d 1d input", lambda F, lib: F.avg_pool1d(lib.ones(4), 2)),
    ("avg_pool3d 3d input", lambda F, lib: F.avg_pool3d(lib.ones(2, 4, 4), 2)),
    ("adaptive_avg_pool2d 1d", lambda F, lib: F.adaptive_avg_pool2d(lib.ones(4), 2)),
    ("adaptive_max_pool2d 1d", lambda F, lib: F.adaptive_max_pool2d(lib.ones(4), 2)),
    ("adaptive_avg_pool1d 1d", lambda F, lib: F.adaptive_avg_pool1d(lib.ones(4), 2)),
    ("adaptive_avg_pool3d 3d", lambda F, lib: F.adaptive_avg_pool3d(lib.ones(2, 4, 4), 2)),
    ("pad too big", lambda F, lib: F.max_pool2d(lib.ones(1, 1, 4, 4), 3, padding=2)),
    ("pad > k/2 dilated 1d", lambda F, lib: F.max_pool1d(lib.ones(1, 1, 6), 3, 1, 2, 2)),
    ("pad > k/2 dilated 2d", lambda F, lib: F.max_pool2d(lib.ones(1, 1, 6, 6), (3, 5),
                                                         padding=(2, 1), dilation=2)),
    ("pad > k/2 dilated 3d", lambda F, lib: F.max_pool3d(lib.ones(1, 1, 6, 6, 6), 3,
                                                         padding=2, dilation=2)),
    ("avg pad too big", lambda F, lib: F.avg_pool2d(lib.ones(1, 1, 4, 4), 3, padding=2)),
    ("output too small", lambda F, lib: F.max_pool2d(lib.ones(1, 1, 2, 2), 3)),
    ("stride zero", lambda F, lib: F.max_pool2d(lib.ones(1, 1, 4, 4), 2, stride=0)),
    ("divisor zero", lambda F, lib: F.avg_pool2d(lib.ones(1, 1, 4, 4), 2, divisor_override=0)),
    ("interpolate 1d", lambda F, lib: F.interpolate(lib.ones(4), scale_factor=2)),
    ("bilinear 3d", lambda F, lib: F.interpolate(lib.ones(1, 1, 4), scale_factor=2,
                                                 mode="bilinear")),
    ("linear 4d", lambda F, lib: F.interpolate(lib.ones(1, 1, 4, 4), scale_factor=2,
                                               mode="linear")),
    ("nearest align_corners", lambda F, lib: F.interpolate(lib.ones(1, 1, 4, 4), scale_factor=2,
                                                           align_corners=True)),
    ("no size", lambda F, lib: F.interpolate(lib.ones(1, 1, 4, 4))),
    ("size and scale", lambda F, lib: F.interpolate(lib.ones(1, 1, 4, 4), 3, 2)),
    ("unknown mode", lambda F, lib: F.interpolate(lib.ones(1, 1, 4, 4), 3, mode="foo")),
    ("pixel_shuffle channels", lambda F, lib: F.pixel_shuffle(lib.ones(1, 3, 2, 2), 2)),
    ("pixel_shuffle 2d", lambda F, lib: F.pixel_shuffle(lib.ones(2, 2), 2)),
    ("pixel_unshuffle height", lambda F, lib: F.pixel_unshuffle(lib.ones(1, 1, 3, 4), 2)),
    ("pixel_unshuffle width", lambda F, lib: F.pixel_unshuffle(lib.ones(1, 1, 4, 3), 2)),
    ("group_norm groups", lambda F, lib: F.group_norm(lib.ones(2, 3, 4), 2)),
    ("lrn 2d", lambda F, lib: F.local_response_norm(lib.ones(2, 2), 2)),
    ("instance_norm no spatial", lambda F, lib: F.instance_norm(lib.ones(2, 3))),
    ("GroupNorm channels", lambda F, lib: lib.nn.GroupNorm(3, 4)),
    ("BatchNorm3d rank", lambda F, lib: lib.nn.BatchNorm3d(3)(lib.ones(2, 3, 4))),
    ("InstanceNorm2d rank", lambda F, lib: lib.nn.InstanceNorm2d(3)(lib.ones(2, 3))),
    ("InstanceNorm affine size", lambda F, lib: lib.nn.InstanceNorm2d(3, affine=True)(
        lib.ones(2, 4, 5, 5))),
]


@pytest.mark.parametrize("fn", [pytest.param(f, id=i) for i, f in ERRORS])
def test_errors_match_torch(fn):
    with pytest.raises(Exception) as t_exc:
        fn(F, torch)
    with pytest.raises(type(t_exc.value)) as g_exc:
        fn(TF, tg)
    assert " ".join(str(t_exc.value).split()) in " ".join(str(g_exc.value).split())


def test_upsample_is_deprecated():
    with pytest.warns(UserWarning, match="nn.functional.upsample. is deprecated"):
        out = TF.upsample(tg.ones(1, 1, 2, 2), scale_factor=2)
    assert out.shape == (1, 1, 4, 4)
    with pytest.warns(UserWarning, match="upsample_bilinear"):
        TF.upsample_bilinear(tg.ones(1, 1, 2, 2), scale_factor=2)


# compiled --------------------------------------------------------------------------------------

def test_compiled_pooling_matches_eager():
    def f(x):
        h = TF.max_pool2d(x, 3, 2, 1, ceil_mode=True)
        h = TF.avg_pool2d(h, 2, 1, 1, count_include_pad=False)
        h = TF.interpolate(h, scale_factor=2, mode="bilinear")
        return TF.adaptive_avg_pool2d(h, (2, 3)).tanh().sum()

    compiled = tg.compile(f)
    a = np.random.default_rng(4).standard_normal((2, 3, 9, 8))
    results = []
    for fn in (f, compiled, compiled):
        x = tg.tensor(a, requires_grad=True)
        y = fn(x)
        y.backward()
        results.append((y.item(), x.grad.numpy()))
    # compiled code may group the windows' sums and the final sum of 36 tanh differently
    for y, g in results[1:]:
        np.testing.assert_allclose(y, results[0][0], **close("float64", n_ops=64, scale=36))
        np.testing.assert_allclose(g, results[0][1], **close("float64", n_ops=64, scale=4))
    assert compiled.stats["compiles"] == 1


def test_max_pool_with_indices_functions_return_values_and_indices():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 6))
    for nd, shape in ((1, (1, 2, 7)), (2, (1, 2, 5, 6)), (3, (1, 1, 4, 4, 4))):
        a = np.random.default_rng(nd).standard_normal(shape)
        got = getattr(tg.nn.functional, f"max_pool{nd}d_with_indices")(tg.tensor(a), 2)
        want = getattr(torch.nn.functional, f"max_pool{nd}d_with_indices")(torch.tensor(a), 2)
        assert isinstance(got, tuple) and len(got) == 2
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    del x
