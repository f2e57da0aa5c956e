"""The OpInfo sweep's former known failures, one focused test each against PyTorch: an
empty index of any dtype in ``gather``, 0-dim inputs to the multi-margin losses, replicate
padding with negative widths, torch.nn modules in samples (the sweep's converter),
``layout=``, and the ``*_ex`` factorisations, ``linspace`` of tensors and ``gradient`` of
coordinate tensors under ``compile``.
"""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opinfo_convert as convert  # noqa: E402 - after the skip: it converts torch values
import tracegrad as tg  # noqa: E402
from tolerances import close  # noqa: E402
from tracegrad.linalg.decomp import cholesky_ex  # noqa: E402
from tracegrad.linalg.solve import inv_ex, solve_ex  # noqa: E402
from tracegrad.ops.pad import pad_nd  # noqa: E402

# results that are the same arithmetic in both libraries: a copy, a gather, a hinge
# (one subtraction and one division by the class count each)
EXACT = dict(rtol=0, atol=0)


def _tg(t, requires_grad=False):
    return tg.tensor(t.detach().numpy(), requires_grad=requires_grad)


def _compiled(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tg.compile(fn)(*args)


# gather -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dim, index_shape, index_dtype", [
    ((5,), 0, (0,), "uint8"),           # PyTorch checks neither dtype nor rank when empty
    ((5,), 0, (2, 0), "uint8"),
    ((3, 4), 1, (0,), "float32"),
    ((), 0, (4, 0), "int64"),
    ((), 0, (2,), "int64"),             # a 0-dim input is one element along dim 0
    ((3,), -1, (), "int64"),
])
def test_gather_empty_or_0dim_index_as_torch(shape, dim, index_shape, index_dtype):
    x = torch.arange(1.0, 1.0 + float(np.prod(shape)), dtype=torch.float64).reshape(shape)
    x.requires_grad_(True)
    index = torch.zeros(index_shape, dtype=getattr(torch, index_dtype))
    want = torch.gather(x, dim, index)
    (want_grad,) = torch.autograd.grad(want.sum(), x)
    xt = _tg(x, requires_grad=True)
    got = tg.gather(xt, dim, tg.tensor(index.numpy()))
    assert tuple(got.shape) == tuple(want.shape) and got.dtype is tg.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **EXACT)
    (got_grad,) = tg.autograd.grad(got.sum(), xt)
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), **EXACT)
    compiled = _compiled(lambda a, i: tg.gather(a, dim, i), _tg(x), tg.tensor(index.numpy()))
    assert tuple(compiled.shape) == tuple(want.shape)


# multi_margin_loss and multilabel_margin_loss -------------------------------------------

MARGIN_CASES = [
    ("multi_margin_loss", 0.3, 0, {}),                        # 0-dim: one sample, one class
    ("multi_margin_loss", 0.3, [0], {"p": 2}),
    ("multi_margin_loss", [0.3, -1.0, 2.0], [1], {}),         # 'none' keeps target's (1,)
    ("multi_margin_loss", [[0.3, -1.0, 2.0]], 2, {"margin": 2.5}),   # ... and its ()
    ("multi_margin_loss", [[0.3, -1.0, 2.0], [1.5, 0.2, 0.1]], [0, 2],
     {"weight": [1.0, 2.0, 0.5]}),
    ("multilabel_margin_loss", 0.3, 0, {}),
    ("multilabel_margin_loss", 0.3, [-1], {}),
    ("multilabel_margin_loss", [0.3, -1.0, 2.0], [1, -1, 0], {}),
    ("multilabel_margin_loss", [[0.3, -1.0, 2.0], [1.5, 0.2, 0.1]], [[2, 0, -1], [1, -1, 0]],
     {}),
]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name, x, target, kwargs", MARGIN_CASES)
def test_margin_losses_as_torch(name, x, target, kwargs, reduction):
    xs = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    t_kwargs = {k: torch.tensor(v, dtype=torch.float64) if isinstance(v, list) else v
                for k, v in kwargs.items()}
    want = getattr(torch.nn.functional, name)(xs, torch.tensor(target), reduction=reduction,
                                              **t_kwargs)
    (want_grad,) = torch.autograd.grad(want.sum(), xs)
    xt = tg.tensor(x, dtype=tg.float64, requires_grad=True)
    g_kwargs = {k: tg.tensor(v, dtype=tg.float64) if isinstance(v, list) else v
                for k, v in kwargs.items()}
    got = getattr(tg.nn.functional, name)(xt, tg.tensor(target), reduction=reduction,
                                          **g_kwargs)
    assert tuple(got.shape) == tuple(want.shape)
    # a sum over at most 3 x 3 hinge terms, then a division
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                               **close("float64", n_ops=10))
    (got_grad,) = tg.autograd.grad(got.sum(), xt)
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(),
                               **close("float64", n_ops=10))


# replicate padding with negative widths ----------------------------------------------------

REPLICATE_NEGATIVE = [
    ((2, 3, 4), (-1, 3)),
    ((2, 3, 4), (-4, 1)),          # crops every element: PyTorch replicates the last one
    ((2, 3, 4), (-5, 3)),
    ((2, 3, 4), (2, -5)),
    ((5, 3, 4, 4), (-4, 5, 0, 0)),
    ((5, 6, 4, 4), (5, -4, -4, 3)),
    ((2, 6, 5, 5), (8, -1, -1, -3)),
    ((1, 3, 4, 5), (0, 0, -2, -2)),    # an empty output
    ((1, 1, 3, 4, 5), (-2, 1, 0, -3, 2, -4)),
]


def _pairs(pad):
    """F.pad's flat widths, last dim first, as pad_nd's (low, high) pairs, first dim first."""
    return tuple((pad[2 * i], pad[2 * i + 1]) for i in reversed(range(len(pad) // 2)))


@pytest.mark.parametrize("shape, pad", REPLICATE_NEGATIVE)
def test_replicate_pad_negative_widths_as_torch(shape, pad):
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal(shape), requires_grad=True)
    want = torch.nn.functional.pad(x, pad, mode="replicate")
    g = rng.standard_normal(tuple(want.shape))
    (want_grad,) = torch.autograd.grad(want, x, torch.tensor(g))
    xt = _tg(x, requires_grad=True)
    got = pad_nd(xt, _pairs(pad), "replicate")
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **EXACT)  # copies
    (got_grad,) = tg.autograd.grad(got, xt, tg.tensor(g))
    # each input element's gradient sums the cotangents of its copies: up to 9 per dim
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(),
                               **close("float64", n_ops=30, scale=3.0))
    compiled = _compiled(lambda a: pad_nd(a, _pairs(pad), "replicate"), _tg(x))
    np.testing.assert_allclose(compiled.numpy(), want.detach().numpy(), **EXACT)


def test_replicate_pad_negative_errors_when_output_is_negative():
    with pytest.raises(RuntimeError):
        torch.nn.functional.pad(torch.ones(1, 3, 4), (-3, -2), mode="replicate")
    with pytest.raises(RuntimeError, match="too small"):
        pad_nd(tg.ones(1, 3, 4), ((-3, -2),), "replicate")


def test_functional_pad_replicate_negative_as_torch():
    x = torch.arange(12.0).reshape(1, 3, 4)
    want = torch.nn.functional.pad(x, (-4, 1), mode="replicate")
    got = tg.nn.functional.pad(_tg(x), (-4, 1), mode="replicate")
    np.testing.assert_allclose(got.numpy(), want.numpy(), **EXACT)


# torch.nn modules in samples (the sweep's converter) --------------------------------------

def test_sweep_converts_torch_modules_to_tracegrad_modules():
    distance = convert.to_tg(torch.nn.PairwiseDistance(p=1.5, eps=1e-3, keepdim=True))
    assert type(distance) is tg.nn.PairwiseDistance
    assert (distance.norm, distance.eps, distance.keepdim) == (1.5, 1e-3, True)
    linear = torch.nn.Linear(3, 2).double()
    converted = convert.to_tg(linear)
    x = torch.randn(4, 3, dtype=torch.float64)
    np.testing.assert_allclose(converted(_tg(x)).detach().numpy(),
                               linear(x).detach().numpy(), **close("float64", n_ops=4))


@pytest.mark.parametrize("kwargs", [{}, {"swap": True, "margin": 0.5}, {"reduction": "none"}])
def test_triplet_margin_with_distance_loss_with_module_as_torch(kwargs):
    rng = np.random.default_rng(1)
    a, p, n = (torch.tensor(rng.standard_normal((5, 10)), requires_grad=True) for _ in "apn")
    distance = torch.nn.PairwiseDistance(p=1.5)
    want = torch.nn.functional.triplet_margin_with_distance_loss(
        a, p, n, distance_function=distance, **kwargs)
    want_grads = torch.autograd.grad(want.sum(), (a, p, n))
    ts = [_tg(v, requires_grad=True) for v in (a, p, n)]
    got = tg.nn.functional.triplet_margin_with_distance_loss(
        *ts, distance_function=convert.to_tg(distance), **kwargs)
    # a 10-term p-norm (pow, sum, root) per distance, then a hinge and a mean of 5
    tol = close("float64", n_ops=30, scale=10.0)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tol)
    for got_grad, want_grad in zip(tg.autograd.grad(got.sum(), ts), want_grads):
        np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), **tol)


# layout= ----------------------------------------------------------------------------------

def test_strided_layout_is_accepted_where_torch_takes_layout():
    assert repr(tg.strided) == repr(torch.strided) and isinstance(tg.strided, tg.layout)
    assert convert.to_tg(torch.strided) is tg.strided
    x = tg.ones(2, 3)
    for make in (lambda lo: tg.zeros(2, layout=lo), lambda lo: tg.ones(2, layout=lo),
                 lambda lo: tg.empty(2, layout=lo), lambda lo: tg.full((2,), 1.0, layout=lo),
                 lambda lo: tg.eye(2, layout=lo), lambda lo: tg.arange(3, layout=lo),
                 lambda lo: tg.linspace(0, 1, 3, layout=lo), lambda lo: tg.rand(2, layout=lo),
                 lambda lo: tg.randn(2, layout=lo), lambda lo: tg.randint(3, (2,), layout=lo),
                 lambda lo: tg.randperm(3, layout=lo), lambda lo: tg.zeros_like(x, layout=lo),
                 lambda lo: tg.ones_like(x, layout=lo), lambda lo: tg.empty_like(x, layout=lo),
                 lambda lo: tg.full_like(x, 2.0, layout=lo), lambda lo: tg.rand_like(x, layout=lo),
                 lambda lo: tg.randn_like(x, layout=lo),
                 lambda lo: tg.randint_like(x, 3, layout=lo),
                 lambda lo: tg.normal(0.3, 1.6, (2, 2, 2), layout=lo)):
        assert tuple(make(None).shape) == tuple(make(tg.strided).shape)
        with pytest.raises(TypeError, match="layout"):
            make("strided")
        with pytest.raises(NotImplementedError, match="strided"):
            make(tg.layout("sparse_coo"))


def test_normal_with_layout_as_torch():
    want = torch.normal(0.3, 1.6, [2, 2, 2], dtype=torch.float32, layout=torch.strided)
    got = tg.normal(0.3, 1.6, [2, 2, 2], dtype=tg.float32, layout=tg.strided)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype is tg.float32


# compile: the *_ex factorisations, linspace of tensors, gradient of coordinates ----------

def _batch_with_failures():
    """Three 3 x 3 matrices: SPD, not positive definite from order 2 (and singular there),
    and SPD again."""
    a = np.stack([np.eye(3) * 2 + 0.5, np.eye(3), np.eye(3) * 3 + 1.0])
    a[1, 1, 1] = 0.0
    return a.astype(np.float32)


def test_cholesky_ex_compiles_and_matches_torch():
    a = _batch_with_failures()
    want = torch.linalg.cholesky_ex(torch.tensor(a))
    for got in (cholesky_ex(tg.tensor(a)), _compiled(lambda m: cholesky_ex(m), tg.tensor(a))):
        np.testing.assert_array_equal(got.info.numpy(), want.info.numpy())
        assert got.info.dtype is tg.int32
        ok = want.info.numpy() == 0
        # three dependent operations per entry of a 3 x 3 factor
        np.testing.assert_allclose(got.L.numpy()[ok], want.L.numpy()[ok],
                                   **close("float32", n_ops=9))
        assert np.isnan(got.L.numpy()[~ok]).all()


@pytest.mark.parametrize("which", ["inv_ex", "solve_ex"])
def test_inv_ex_and_solve_ex_compile_and_match_torch(which):
    a = _batch_with_failures()
    b = np.arange(9, dtype=np.float32).reshape(3, 3)
    if which == "inv_ex":
        want = torch.linalg.inv_ex(torch.tensor(a))
        fn, args = (lambda m: inv_ex(m)), (tg.tensor(a),)
    else:
        want = torch.linalg.solve_ex(torch.tensor(a), torch.tensor(b))
        fn, args = (lambda m, v: solve_ex(m, v)), (tg.tensor(a), tg.tensor(b))
    for got in (fn(*args), _compiled(fn, *args)):
        np.testing.assert_array_equal(got.info.numpy(), want.info.numpy())
        ok = want.info.numpy() == 0
        np.testing.assert_allclose(got[0].numpy()[ok], want[0].numpy()[ok],
                                   **close("float32", n_ops=9, scale=8.0))
        assert np.isnan(got[0].numpy()[~ok]).all()     # what PyTorch leaves there is LAPACK's


@pytest.mark.parametrize("start, end, steps, dtype", [
    (-3.0, 50.0, 50, "float32"), (2.5, -3.5, 1, "float32"), (0.0, 1.0, 0, "float32"),
    (0, 10, 4, "int64"), (1e6, -2.0, 7, "float64")])
def test_linspace_of_tensors_compiles_and_matches_torch(start, end, steps, dtype):
    want = torch.linspace(torch.tensor(start), torch.tensor(end), steps,
                          dtype=getattr(torch, dtype))
    fn = lambda s, e: tg.linspace(s, e, steps, dtype=getattr(tg, dtype))  # noqa: E731
    for got in (fn(tg.tensor(start), tg.tensor(end)),
                _compiled(fn, tg.tensor(start), tg.tensor(end))):
        assert got.dtype is getattr(tg, dtype) and tuple(got.shape) == (steps,)
        # PyTorch's kernel: one fused multiply-add per point, here emulated in float64 (a
        # second rounding, to the dtype, can move a result by at most one ulp; an integer
        # dtype truncates the same float64 value)
        tol = close(dtype, factor=1) if dtype.startswith("float") else EXACT
        np.testing.assert_allclose(got.numpy(), want.numpy(), **tol)


def test_linspace_rejects_tensors_with_dimensions_as_torch():
    with pytest.raises(RuntimeError, match="0-dimensional"):
        torch.linspace(torch.tensor([1.0]), 2, 3)
    with pytest.raises(RuntimeError, match="0-dimensional"):
        tg.linspace(tg.tensor([1.0]), 2, 3)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_of_coordinate_tensors_compiles_and_matches_torch(edge_order):
    rng = np.random.default_rng(2)
    f = torch.tensor(rng.standard_normal((4, 3, 5)), requires_grad=True)
    coords = [torch.tensor(np.cumsum(rng.uniform(0.5, 2.0, n)), requires_grad=True)
              for n in (4, 5)]
    want = torch.gradient(f, spacing=coords, dim=[0, -1], edge_order=edge_order)
    want_grads = torch.autograd.grad(sum(w.sum() for w in want), [f, *coords])
    ft, ct = _tg(f, requires_grad=True), [_tg(c, requires_grad=True) for c in coords]
    got = tg.gradient(ft, spacing=ct, dim=[0, -1], edge_order=edge_order)
    # three-term differences of steps near 1 over coordinates up to ~10 (cancellation)
    tol = close("float64", n_ops=12, scale=10.0)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), **tol)
    got_grads = tg.autograd.grad(sum(g.sum() for g in got), [ft, *ct])
    for g, w in zip(got_grads, want_grads):     # the coordinates get gradients, as torch's
        np.testing.assert_allclose(g.numpy(), w.numpy(), **tol)
    compiled = _compiled(lambda a, x0, x1: tg.gradient(a, spacing=[x0, x1], dim=[0, -1],
                                                        edge_order=edge_order),
                         _tg(f), *[_tg(c) for c in coords])
    for g, w in zip(compiled, want):
        np.testing.assert_allclose(g.numpy(), w.detach().numpy(), **tol)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_pool_of_an_empty_batch_as_torch(nd):
    """A batch of 0 pools to a batch of 0, and backward gives a gradient of 0 elements (a
    reshape with -1 cannot size an empty array; the pools' gather and scatter once used one)."""
    shape = (0, 1) + (4, 5, 4)[:nd]
    want = getattr(torch.nn.functional, f"max_pool{nd}d")(torch.randn(shape), 2)
    x = tg.randn(shape, requires_grad=True)
    got = getattr(tg.nn.functional, f"max_pool{nd}d")(x, 2)
    assert tuple(got.shape) == tuple(want.shape)
    got.sum().backward()
    assert tuple(x.grad.shape) == shape


@pytest.mark.parametrize("name", ["sum", "mean", "nansum", "std", "var"])
def test_an_empty_list_of_dims_reduces_every_dim_as_torch(name):
    """``x.sum(dim=())`` / ``dim=[]`` reduces over every dim in PyTorch (not over none)."""
    x = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    for dim in ((), []):
        want = getattr(torch, name)(x, dim)
        got = getattr(tg, name)(_tg(x), dim)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15)


def test_batch_norm_of_an_empty_batch_in_training_as_torch():
    """An empty batch gives an empty output, leaves the running statistics alone and counts
    the batch (PyTorch raises only for one value a channel)."""
    t_bn, g_bn = torch.nn.BatchNorm2d(3), tg.nn.BatchNorm2d(3)
    t_y, g_y = t_bn(torch.randn(0, 3, 4, 4)), g_bn(tg.randn(0, 3, 4, 4, requires_grad=True))
    assert tuple(g_y.shape) == tuple(t_y.shape)
    g_y.sum().backward()
    np.testing.assert_array_equal(g_bn.weight.grad.numpy(), np.zeros(3))
    np.testing.assert_array_equal(g_bn.running_var.numpy(), t_bn.running_var.numpy())
    assert int(g_bn.num_batches_tracked) == int(t_bn.num_batches_tracked) == 1
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        g_bn(tg.randn(1, 3, 1, 1))


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
def test_an_unbatched_cell_takes_an_unbatched_state_as_torch(cell):
    t_cell = getattr(torch.nn, cell)(5, 4).double()
    g_cell = getattr(tg.nn, cell)(5, 4).double()
    g_cell.load_state_dict({k: _tg(v) for k, v in t_cell.state_dict().items()})
    x, h = torch.randn(5, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    state = (h, h * 2) if cell == "LSTMCell" else h
    g_state = tuple(_tg(s) for s in state) if cell == "LSTMCell" else _tg(state)
    want, got = t_cell(x, state), g_cell(_tg(x), g_state)
    for w, g in zip(want if cell == "LSTMCell" else (want,), got if cell == "LSTMCell" else (got,)):
        assert tuple(g.shape) == (4,)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["elu", "celu", "selu"])
def test_elu_family_at_infinities_as_torch(name):
    """PyTorch's reference inputs: elu(-inf) is -alpha (the linear rest of the left branch
    was -inf - -inf, NaN)."""
    x = torch.tensor([-np.inf, np.inf, np.nan, -1e30, 1e30, 0.0, -0.5])
    want = getattr(torch.nn.functional, name)(x)
    got = getattr(tg.nn.functional, name)(_tg(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_lgamma_of_minus_infinity_is_plus_infinity_as_torch(backend):
    """SciPy's gammaln(-inf) is -inf; PyTorch's lgamma (and C's) is +inf, on every tier."""
    x = torch.tensor([-np.inf, np.inf, 0.0, -1.0, -2.5, 3.0])
    want = torch.lgamma(x).numpy()
    np.testing.assert_array_equal(tg.lgamma(_tg(x)).numpy(), want)
    compiled = tg.compile(lambda t: tg.lgamma(t) * 1.0, backend=backend)
    np.testing.assert_array_equal(compiled(_tg(x)).numpy(), want)
