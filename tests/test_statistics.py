"""What the op table cannot say about ops/search_count.py and ops/statistics.py.

Against PyTorch: searchsorted and bucketize at values equal to the boundaries, with
sorters, int32 results and batches; bincount, histc and histogram on random integer data
and at their edges (values on bin edges, outside the range, a constant input, empty
inputs); isin, equal, unique_consecutive and mode (its ties, in short and long rows); the
errors, each naming the op. Gradients the table's random inputs do not reach: cdist at
zero distance and at p=inf ties, its matrix-product form past 25 rows; vander (PyTorch's
own cannot backpropagate, so gradcheck); renorm_. In ``tracegrad.compile``: bincount and
unique_consecutive end the graph (eager's results on every call, and explain() says
why), histc and histogram stay in it.
"""
import math
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")


def _both(fn, *arrays):
    """``fn(lib, *tensors)`` for lib = torch and lib = tracegrad, on the same arrays."""
    return (fn(torch, *[torch.tensor(a) for a in arrays]),
            fn(tg, *[tg.tensor(a) for a in arrays]))


def _same(want, got):
    if isinstance(want, (tuple, list)):
        assert len(want) == len(got)
        for w, g in zip(want, got):
            _same(w, g)
        return
    if isinstance(want, bool):
        assert got is want
        return
    assert str(want.dtype).split(".")[-1] == got.dtype.name
    assert tuple(want.shape) == tuple(got.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def _check(fn, *arrays):
    want, got = _both(fn, *arrays)
    _same(want, got)


def _raises_like_torch(fn, *arrays, name):
    with pytest.raises(Exception) as t_err:
        fn(torch, *[torch.tensor(a) for a in arrays])
    with pytest.raises(Exception) as g_err:
        fn(tg, *[tg.tensor(a) for a in arrays])
    assert type(g_err.value) is type(t_err.value) or isinstance(g_err.value, RuntimeError) \
        and isinstance(t_err.value, RuntimeError), (g_err.value, t_err.value)
    assert name in str(g_err.value)
    torch_words = str(t_err.value).splitlines()[0].replace("torch.", "")
    assert torch_words.split(":")[-1].strip()[:25] in str(g_err.value), (g_err.value, t_err.value)


# searchsorted and bucketize ------------------------------------------------------------------

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("seed", range(5))
def test_searchsorted_at_boundary_values(side, seed):
    rng = np.random.default_rng(seed)
    seq = np.sort(rng.integers(0, 6, 9))            # repeated boundaries
    values = rng.integers(-1, 8, (3, 4))            # equal to them, below and above all
    _check(lambda lib, s, v: lib.searchsorted(s, v, side=side), seq, values)
    _check(lambda lib, s, v: lib.searchsorted(s, v, right=side == "right", out_int32=True),
           seq.astype(np.float32), values.astype(np.float32))
    _check(lambda lib, b, v: lib.bucketize(v, b, right=side == "right"), seq, values)


def test_searchsorted_batched_scalar_and_nan():
    seq = np.sort(RNG.standard_normal((2, 3, 5)), -1)
    values = np.concatenate([seq[..., :2], RNG.standard_normal((2, 3, 2))], -1)
    _check(lambda lib, s, v: lib.searchsorted(s, v), seq, values)
    _check(lambda lib, s, v: lib.searchsorted(s, v, side="right"), seq, values)
    _check(lambda lib, s: lib.searchsorted(s, 3, right=True), np.array([1, 3, 3, 5]))
    _check(lambda lib, b: lib.bucketize(3, b), np.array([1, 3, 5]))
    _check(lambda lib, s, v: lib.searchsorted(s, v), np.array([1.0, 2.0, np.nan]),
           np.array([np.nan, 2.0, 7.0]))
    for seq, values in (((0, 0), (0, 3)), ((2, 0), (2, 3)), ((0,), (2, 3)), ((3,), (0, 3))):
        _check(lambda lib, s, v: lib.searchsorted(s, v), np.zeros(seq), np.ones(values))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_sorter(side):
    seq = RNG.integers(0, 5, 8)
    sorter = np.argsort(seq, kind="stable")
    values = np.arange(-1, 7)
    _check(lambda lib, s, v, o: lib.searchsorted(s, v, side=side, sorter=o), seq, values,
           sorter)
    batch = RNG.integers(0, 5, (2, 6))
    _check(lambda lib, s, v, o: lib.searchsorted(s, v, side=side, sorter=o), batch,
           RNG.integers(-1, 6, (2, 3)), np.argsort(batch, -1, kind="stable"))


@pytest.mark.parametrize("fn,arrays", [
    (lambda lib, s, v: lib.searchsorted(s, v, side="middle"), ([1, 2], [1])),
    (lambda lib, s, v: lib.searchsorted(s, v, side="left", right=True), ([1, 2], [1])),
    (lambda lib, s, v: lib.searchsorted(s, v), ([[1, 2], [3, 4]], [1])),
    (lambda lib, s, v: lib.searchsorted(s, v), (1.0, [1.0])),
    (lambda lib, s, o: lib.searchsorted(s, 1, sorter=o), ([3, 1, 2], [1, 2])),
    (lambda lib, s, o: lib.searchsorted(s, 1, sorter=o), ([3, 1, 2], [1, 2, 5])),
    (lambda lib, b, v: lib.bucketize(v, b), ([[1, 2]], [1])),
], ids=["side", "side vs right", "batch dims", "0-d boundaries", "sorter size",
        "sorter range", "bucketize 2-D"])
def test_searchsorted_errors(fn, arrays):
    name = "bucketize" if "bucketize" in fn.__code__.co_names else "searchsorted"
    _raises_like_torch(fn, *[np.array(a) for a in arrays], name=name)


# bincount -------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_bincount_random(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, rng.integers(1, 12), rng.integers(0, 30))
    _check(lambda lib, x: lib.bincount(x), x)
    _check(lambda lib, x: x.bincount(minlength=15), x)
    for wdtype in (np.float16, np.float32, np.float64, np.int64):
        w = rng.integers(-3, 4, x.shape).astype(wdtype)
        _check(lambda lib, x, w: lib.bincount(x, w), x, w)
    _check(lambda lib, x: lib.bincount(x), x.astype(np.uint8))


@pytest.mark.parametrize("fn,arrays", [
    (lambda lib, x: lib.bincount(x), [0, -1]),
    (lambda lib, x: lib.bincount(x), [[0, 1]]),
    (lambda lib, x: lib.bincount(x), [0.0, 1.0]),
    (lambda lib, x: lib.bincount(x, minlength=-1), [0, 1]),
    (lambda lib, x: lib.bincount(x, lib.tensor([1.0])), [0, 1]),
], ids=["negative", "2-D", "float", "minlength", "weights length"])
def test_bincount_errors(fn, arrays):
    _raises_like_torch(fn, np.array(arrays), name="bincount")


# histc and histogram ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(6))
def test_histc_random_integers(seed, dtype):
    """Integer data: many values sit exactly on bin edges and on the range's ends."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, rng.integers(1, 40)).astype(dtype)
    bins = int(rng.integers(1, 10))
    _check(lambda lib, x: lib.histc(x, bins), x)
    _check(lambda lib, x: x.histc(bins, -2, 3), x)
    _check(lambda lib, x: lib.histc(x, bins, min=-1.5, max=2), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(6))
def test_histogram_random_integers(seed, dtype):
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, (rng.integers(1, 6), 4)).astype(dtype)
    w = rng.random(x.shape).astype(dtype)
    bins = int(rng.integers(1, 10))
    _check(lambda lib, x: tuple(lib.histogram(x, bins)), x)
    _check(lambda lib, x, w: tuple(x.histogram(bins, range=(-2.0, 3.0), weight=w)), x, w)
    edges = np.unique(rng.integers(-5, 6, 5)).astype(dtype)
    if len(edges) > 1:
        _check(lambda lib, x, e: tuple(lib.histogram(x, e)), x, edges)
    want, got = _both(lambda lib, x, w: lib.histogram(x, bins, weight=w, density=True), x, w)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6)


@pytest.mark.parametrize("values", [[1.0, 1.0, 1.0], [0.0], [], [-1.0, 7.0, 2.5]])
def test_histc_and_histogram_edges(values):
    x = np.array(values)
    _check(lambda lib, x: lib.histc(x, 4), x)            # min = max = 0: the data's range
    _check(lambda lib, x: lib.histc(x, 3, min=2, max=2), x)   # any min = max
    _check(lambda lib, x: lib.histc(x, 3, min=0, max=2), x)   # values outside: skipped
    _check(lambda lib, x: tuple(lib.histogram(x, 4)), x)
    _check(lambda lib, x: tuple(lib.histogram(x, 2, range=(0.0, 1.0))), x)


def test_histc_skips_nan_in_a_given_range():
    _check(lambda lib, x: lib.histc(x, 3, 0, 3), np.array([1.0, 2.0, np.nan]))


@pytest.mark.parametrize("fn,values,name", [
    (lambda lib, x: lib.histc(x, 0), [1.0], "histc"),
    (lambda lib, x: lib.histc(x, 3, 3, 1), [1.0], "histc"),
    (lambda lib, x: lib.histc(x, 3), [1.0, math.inf], "histc"),
    (lambda lib, x: lib.histc(x, 3), [1, 2], "histc"),
    (lambda lib, x: lib.histogram(x, 3), [1, 2], "histogram"),
    (lambda lib, x: lib.histogram(x, 0), [1.0], "histogram"),
    (lambda lib, x: lib.histogram(x, 3, range=(3.0, 1.0)), [1.0], "histogram"),
    (lambda lib, x: lib.histogram(x, 3), [1.0, math.nan], "histogram"),
    (lambda lib, x: lib.histogram(x, 3, weight=lib.tensor([1.0])), [1.0, 2.0], "histogram"),
    (lambda lib, x: lib.histogram(x, lib.tensor([1.0], dtype=x.dtype)), [1.0, 2.0], "histogram"),
    (lambda lib, x: lib.histogram(x, lib.tensor([[1.0, 2.0]], dtype=x.dtype)), [1.0, 2.0],
     "histogram"),
    (lambda lib, x: lib.histogram(x, lib.tensor([1.0, 2.0])), [1.0, 2.0], "histogram"),
], ids=["bins 0", "min > max", "inf", "int histc", "int histogram", "histogram bins 0",
        "range", "nan", "weight shape", "one edge", "2-D edges", "edges dtype"])
def test_histogram_errors(fn, values, name):
    _raises_like_torch(fn, np.array(values), name=name)


# isin, equal, unique_consecutive, mode ------------------------------------------------------

def test_isin_like_torch():
    a, b = RNG.integers(0, 6, (3, 4)), RNG.integers(0, 6, 5)
    _check(lambda lib, a, b: lib.isin(a, b), a, b)
    _check(lambda lib, a, b: lib.isin(a, b, invert=True, assume_unique=False), a, b)
    _check(lambda lib, a, b: lib.isin(a, b), a, b.astype(np.float64) + 0.5)
    _check(lambda lib, a, b: lib.isin(a, b), a.astype(np.float32), b.astype(np.int32))
    _check(lambda lib, a: lib.isin(a, 2), a)
    _check(lambda lib, b: lib.isin(2, b), b)
    _check(lambda lib, a: lib.isin(a, a), np.array([1.0, np.nan]))
    _raises_like_torch(lambda lib, a: lib.isin(a, a), np.array([True]), name="isin")


def test_equal_like_torch():
    x = np.array([1.0, np.nan])
    for a, b in [([1, 2], [1.0, 2.0]), ([1, 2], [[1, 2]]), ([1, 2], [1, 3]), ([], [])]:
        _check(lambda lib, a, b: lib.equal(a, b), np.array(a), np.array(b))
    _check(lambda lib, a: lib.equal(a, a), x)
    with pytest.raises(TypeError):
        tg.equal(tg.tensor([1]), [1])


@pytest.mark.parametrize("seed", range(4))
def test_unique_consecutive_like_torch(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, (4, 3))
    x[1] = x[0]
    for dim in (None, 0, 1, -1):
        _check(lambda lib, x: lib.unique_consecutive(x, return_inverse=True,
                                                     return_counts=True, dim=dim), x)
    _check(lambda lib, x: x.unique_consecutive(), x)
    _check(lambda lib, x: lib.unique_consecutive(x, True, True), np.array(5))
    _check(lambda lib, x: lib.unique_consecutive(x, True, True), np.zeros(0, np.int64))
    for shape, dim in (((0, 3), 0), ((3, 0), 1), ((2, 0, 2), 1)):
        _check(lambda lib, x: lib.unique_consecutive(x, True, True, dim=dim), np.zeros(shape))
    for shape, dim in (((0, 3), 1), ((3, 0), 0)):
        _raises_like_torch(lambda lib, x: lib.unique_consecutive(x, dim=dim), np.zeros(shape),
                           name="unique_consecutive")


@pytest.mark.parametrize("seed", range(8))
def test_mode_ties_like_torch(seed):
    """The smallest of the most frequent values, at the place PyTorch's sort leaves last:
    the last copy in rows up to 16 long, its introsort's order in longer ones."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, (3, 7, 5)).astype(np.float64)
    for dim in (0, 1, -1):
        _check(lambda lib, x: tuple(lib.mode(x, dim)), x)
        _check(lambda lib, x: tuple(x.mode(dim, keepdim=True)), x)
    long_rows = rng.integers(0, int(rng.integers(2, 9)), (4, int(rng.integers(17, 300))))
    _check(lambda lib, x: tuple(lib.mode(x)), long_rows)
    _check(lambda lib, x: tuple(lib.mode(x, 0)), long_rows.T.astype(np.float32))
    _check(lambda lib, x: tuple(lib.mode(x)), np.array(3.0))
    _check(lambda lib, x: tuple(lib.mode(x, 0)), np.zeros((2, 0)))
    _raises_like_torch(lambda lib, x: lib.mode(x), np.zeros(0), name="mode")


def test_mode_gradient_reaches_the_index():
    x = torch.tensor([[1.0, 2, 2, 1, 3]], requires_grad=True)
    y = tg.tensor([[1.0, 2, 2, 1, 3]], requires_grad=True)
    torch.mode(x, 1).values.sum().backward()
    tg.mode(y, 1).values.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), x.grad.numpy())


# statistics: gradients the table's random inputs miss -------------------------------------------

def _grads(fn, *arrays):
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    g_in = [tg.tensor(a, requires_grad=True) for a in arrays]
    t_out, g_out = fn(torch, *t_in), fn(tg, *g_in)
    np.testing.assert_allclose(g_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-9,
                               atol=1e-12)
    w = np.random.default_rng(0).standard_normal(t_out.shape)
    t_g = torch.autograd.grad((t_out * torch.tensor(w)).sum(), t_in)
    g_g = tg.autograd.grad((g_out * tg.tensor(w)).sum(), g_in)
    for a, b in zip(t_g, g_g):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("p", [0, 0.5, 1, 1.5, 2, 3, math.inf])
def test_cdist_gradient_at_zero_distance_and_ties(p):
    a = np.array([[0.0, 1.0], [2.0, 2.0], [1.0, 1.0]])
    b = np.array([[0.0, 1.0], [1.0, 1.0]])
    _grads(lambda lib, a, b: lib.cdist(a, b, p), a, b)
    _grads(lambda lib, a: lib.cdist(a, a, p, "donot_use_mm_for_euclid_dist"), a)


def test_cdist_matrix_product_form():
    a = np.random.default_rng(1).standard_normal((30, 3))
    b = np.random.default_rng(2).standard_normal((4, 3))
    _grads(lambda lib, a, b: lib.cdist(a, b), a, b)          # 30 > 25 rows: by mm
    _grads(lambda lib, a: lib.cdist(a, a, compute_mode="use_mm_for_euclid_dist"),
           np.array([[0.0, 0.0], [3.0, 4.0]]))               # zero distance: gradient 0


@pytest.mark.parametrize("fn,arrays,name", [
    (lambda lib, a, b: lib.cdist(a, b), ([1.0, 2.0], [[1.0, 2.0]]), "cdist"),
    (lambda lib, a, b: lib.cdist(a, b), ([[1.0, 2.0]], [[1.0, 2.0, 3.0]]), "cdist"),
    (lambda lib, a, b: lib.cdist(a, b), ([[1, 2]], [[1, 2]]), "cdist"),
    (lambda lib, a, b: lib.cdist(a, b, -1), ([[1.0]], [[1.0]]), "cdist"),
    (lambda lib, a, b: lib.cdist(a.float(), b), ([[1.0]], [[1.0]]), "cdist"),
], ids=["1-D", "columns", "int", "negative p", "dtypes"])
def test_cdist_errors(fn, arrays, name):
    _raises_like_torch(fn, *[np.array(a) for a in arrays], name=name)
    with pytest.raises(ValueError, match="compute_mode"):
        tg.cdist(tg.ones(1, 1), tg.ones(1, 1), compute_mode="bad")


def test_vander_differentiates():
    """PyTorch 2.13's vander fails in backward; tracegrad's gradient is checked numerically."""
    x = tg.tensor([0.0, 1.5, -0.7, 2.0], dtype=tg.float64, requires_grad=True)
    assert gradcheck(lambda x: tg.vander(x, 5), [x])
    assert gradgradcheck(lambda x: tg.vander(x, 4, increasing=True), [x])


def test_vander_and_combinations_edges():
    _check(lambda lib, x: lib.vander(x), np.array([1, 2, 3], np.int32))
    _check(lambda lib, x: lib.vander(x, N=0), np.array([1.0, 2.0]))
    _check(lambda lib, x: lib.vander(x), np.array([True, False]))
    _check(lambda lib, x: lib.combinations(x, 0), np.array([1, 2, 3]))
    _check(lambda lib, x: lib.combinations(x, 4), np.array([1, 2, 3]))
    _check(lambda lib, x: lib.combinations(x, 1), np.array([1, 2, 3]))
    _raises_like_torch(lambda lib, x: lib.vander(x), np.ones((1, 1)), name="vander")
    _raises_like_torch(lambda lib, x: lib.vander(x, N=-1), np.ones(1), name="vander")
    _raises_like_torch(lambda lib, x: lib.combinations(x), np.ones((1, 2)), name="combinations")
    _raises_like_torch(lambda lib, x: lib.combinations(x, -1), np.ones(2), name="combinations")


def test_cov_warnings_and_errors():
    for correction in (1, 2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            want, got = _both(lambda lib, x: lib.cov(x, correction=correction),
                              np.array([1.0, 2.0][:correction]))
        assert any("degrees of freedom" in str(w.message) for w in caught)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = np.array([1.0, 2.0, 4.0])
    for kw in ({"fweights": [1.0, 2.0, 1.0]}, {"aweights": [1, 2, 1]},
               {"fweights": [-1, 2, 1]}, {"fweights": [1, 2]}, {"aweights": [0.0, 0.0, 0.0]}):
        _raises_like_torch(lambda lib, x: lib.cov(x, **{k: lib.tensor(v) for k, v in kw.items()}),
                           x, name="cov")
    _raises_like_torch(lambda lib, x: lib.cov(x), np.zeros((2, 2, 2)), name="cov")
    _raises_like_torch(lambda lib, x: lib.corrcoef(x), np.zeros((2, 2, 2)), name="corrcoef")
    _raises_like_torch(lambda lib, x: lib.cov(x), np.array([True]), name="cov")


def test_trapezoid_integer_empty_and_errors():
    y = np.array([1, 2, 4])
    _check(lambda lib, y: lib.trapezoid(y), y)
    _check(lambda lib, y: lib.trapezoid(y, dx=2), y)
    _check(lambda lib, y: lib.trapezoid(y, y), y)
    _check(lambda lib, y: lib.cumulative_trapezoid(y), y)
    _check(lambda lib, y: lib.trapezoid(y), np.zeros((2, 0)))
    _check(lambda lib, y: lib.cumulative_trapezoid(y), np.zeros((2, 0)))
    for fn, name in ((lambda lib, y: lib.trapezoid(y, lib.tensor([1.0, 2.0])), "trapezoid"),
                     (lambda lib, y: lib.cumulative_trapezoid(y, lib.tensor([1.0])),
                      "cumulative_trapezoid"),
                     (lambda lib, y: lib.trapezoid(y > 0), "trapezoid")):
        _raises_like_torch(fn, y.astype(float), name=name)
    with pytest.raises(IndexError):
        tg.trapezoid(tg.tensor(1.0))
    for fn in (tg.trapezoid, tg.trapz, tg.cumulative_trapezoid):
        with pytest.raises(TypeError):
            fn(tg.ones(3), 2)           # a spacing is dx=, as in PyTorch
        with pytest.raises(TypeError):
            fn(tg.ones(3), tg.ones(3), dx=2)


def test_renorm_inplace_and_errors():
    x = np.array([[1.0, 2, 3], [0.1, 0.2, 0.3]])
    _grads(lambda lib, x: (x * 1).renorm_(2, 0, 1.0), x)
    t = tg.tensor(x)
    assert t.renorm_(2, 0, 1.0) is t
    np.testing.assert_allclose(t.numpy(), torch.tensor(x).renorm(2, 0, 1).numpy(), rtol=1e-12)
    for fn in (lambda lib, x: lib.renorm(x, 0, 0, 1.0), lambda lib, x: lib.renorm(x, 2, 0, -1.0),
               lambda lib, x: lib.renorm(x[0], 2, 0, 1.0)):
        _raises_like_torch(fn, x, name="renorm")


def test_methods_are_pytorchs():
    for name in ("bincount", "histc", "histogram", "equal", "unique_consecutive", "mode",
                 "cov", "corrcoef", "renorm", "renorm_"):
        assert hasattr(torch.Tensor, name) and hasattr(tg.Tensor, name), name
    for name in ("searchsorted", "bucketize", "bincount", "histc", "histogram", "isin",
                 "equal", "unique_consecutive", "mode", "cov", "corrcoef", "cdist",
                 "trapezoid", "trapz", "cumulative_trapezoid", "vander", "combinations",
                 "renorm"):
        assert callable(getattr(tg, name)), name


# inside tracegrad.compile -----------------------------------------------------------------------

@pytest.mark.parametrize("name,fn", [
    ("bincount", lambda x: tg.bincount((x.abs() * 3).long(), minlength=2) * 2),
    ("bincount", lambda x: tg.bincount((x.abs() * 3).long(), weights=x).sum()),
    ("unique_consecutive", lambda x: tg.unique_consecutive((x * 2).round(),
                                                           return_counts=True)[1] + 1),
], ids=["bincount", "bincount weights", "unique_consecutive"])
def test_compiled_data_dependent_ops_run_eagerly(name, fn):
    c = tg.compile(fn)
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (6, 6, 9):
            x = tg.tensor(rng.standard_normal(n))
            _same(fn(x), c(x))
    assert c.stats["compiles"] == 0
    lines = [ln for ln in c.explain().splitlines() if "depends on the values" in ln]
    assert lines and all(f"{name} at " in ln and "test_statistics.py" in ln for ln in lines)


def test_compiled_histograms_stay_in_the_graph():
    def f(x):
        hist, edges = tg.histogram(x, 4)
        return tg.histc(x * 2, 5) + hist.sum(), edges, tg.searchsorted(edges, x)
    c = tg.compile(f)
    rng = np.random.default_rng(6)
    for _ in range(3):      # new data each call: the range, so the edges, follow it
        x = tg.tensor(rng.standard_normal(8) * rng.uniform(1, 5))
        _same(f(x), c(x))
    assert c.stats["compiles"] == 1
