"""``tracegrad.masked`` and ``tracegrad.signal.windows`` against PyTorch at their edges.

The OpInfo sweep checks the samples PyTorch draws; these pin what those miss: slices
masked out entirely (each reduction's identity, or NaN where it has none), masks that
broadcast, keepdim and dtype=, std/var's correction, norm's orders, the gradient at
masked-out positions, windows of length 0 and 1 and periodic ones, and PyTorch's errors.

Values are float64 and each side runs the same few ops in the same order, so they agree
to a few ulps (rtol 1e-12); float32 windows are PyTorch's linspace against NumPy's, one
rounding each before a cos/exp/i0 (rtol 1e-6, atol 1e-7 absolute at values near 0).
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tracegrad as tg  # noqa: E402

INF, NAN = math.inf, math.nan


def as_numpy(value):
    if isinstance(value, tg.Tensor):
        return value.detach().numpy()
    return value.detach().numpy()


def dtype_name(value):
    return str(value.dtype).split(".")[-1]


def assert_matches(got, want, rtol=1e-12, atol=0.0):
    """Same shape, dtype, NaN and infinity positions; values within rtol (+ atol)."""
    assert dtype_name(got) == dtype_name(want)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(as_numpy(got), as_numpy(want), rtol=rtol, atol=atol,
                               equal_nan=True)


def pair(array, requires_grad=False, dtype=np.float64):
    """The same values as a tracegrad and a torch tensor."""
    array = np.asarray(array, dtype=dtype)
    return (tg.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def raises_like(tg_call, torch_call):
    """Both raise the same exception type with the same message (dtype names aside)."""
    with pytest.raises(Exception) as want:
        torch_call()
    with pytest.raises(want.type) as got:
        tg_call()
    assert str(got.value).replace("tracegrad.", "torch.") == str(want.value)


X = np.array([[1.5, -2.0, 3.25, 0.5],
              [4.0, 0.25, -1.0, 2.0],
              [-3.0, 1.0, 0.75, -0.5]])
# row 1 masked out entirely; column 3 kept only in row 2
MASK = np.array([[True, False, True, False],
                 [False, False, False, False],
                 [True, True, False, True]])

REDUCTIONS = {   # name -> the call, the same on both libraries' masked module
    "sum": lambda m, x, mask: m.sum(x, 1, mask=mask),
    "prod": lambda m, x, mask: m.prod(x, 1, mask=mask),
    "amax": lambda m, x, mask: m.amax(x, 1, mask=mask),
    "amin": lambda m, x, mask: m.amin(x, 1, mask=mask),
    "argmax": lambda m, x, mask: m.argmax(x, 1, mask=mask),
    "argmin": lambda m, x, mask: m.argmin(x, 1, mask=mask),
    "mean": lambda m, x, mask: m.mean(x, 1, mask=mask),
    "median": lambda m, x, mask: m.median(x, 1, mask=mask),
    "logsumexp": lambda m, x, mask: m.logsumexp(x, 1, mask=mask),
    "norm": lambda m, x, mask: m.norm(x, 2.0, 1, mask=mask),
    "norm_ninf": lambda m, x, mask: m.norm(x, -INF, 1, mask=mask),
    "var": lambda m, x, mask: m.var(x, 1, mask=mask),
    "std": lambda m, x, mask: m.std(x, 1, mask=mask),
    "softmax": lambda m, x, mask: m.softmax(x, 1, mask=mask),
    "log_softmax": lambda m, x, mask: m.log_softmax(x, 1, mask=mask),
    "softmin": lambda m, x, mask: m.softmin(x, 1, mask=mask),
    "cumsum": lambda m, x, mask: m.cumsum(x, 1, mask=mask),
    "cumprod": lambda m, x, mask: m.cumprod(x, 1, mask=mask),
    "normalize": lambda m, x, mask: m.normalize(x, 2.0, 1, mask=mask),
}
FULLY_MASKED_ROW = {   # what row 1 (all masked out) must give: identity or NaN
    "sum": [0.0], "prod": [1.0], "amax": [-INF], "amin": [INF], "argmax": [0.0],
    "argmin": [0.0], "mean": [NAN], "median": [NAN], "logsumexp": [-INF], "norm": [0.0],
    "norm_ninf": [INF], "var": [NAN], "std": [NAN], "softmax": [NAN] * 4,
    "log_softmax": [NAN] * 4, "softmin": [NAN] * 4, "cumsum": [0.0] * 4,
    "cumprod": [1.0] * 4, "normalize": [0.0] * 4,
}


def _both(name, x_np, mask_np, requires_grad=False):
    (x_tg, x_t), (m_tg, m_t) = pair(x_np, requires_grad), pair(mask_np, dtype=bool)
    return (x_tg, REDUCTIONS[name](tg.masked, x_tg, m_tg),
            x_t, REDUCTIONS[name](torch.masked, x_t, m_t))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_fully_masked_slice_gives_the_identity_or_nan(name):
    _, got, _, want = _both(name, X, MASK)
    assert_matches(got, want)
    np.testing.assert_array_equal(as_numpy(got)[1].reshape(-1), FULLY_MASKED_ROW[name])


@pytest.mark.parametrize("name", sorted(set(REDUCTIONS) - {"argmax", "argmin"}))
def test_gradient_is_pytorchs_and_zero_where_masked_out(name):
    x_tg, got, x_t, want = _both(name, X, MASK, requires_grad=True)
    cotangent = np.random.default_rng(0).standard_normal(tuple(want.shape))
    (g_tg,) = tg.autograd.grad(got, [x_tg], tg.tensor(cotangent))
    (g_t,) = torch.autograd.grad(want, [x_t], torch.tensor(cotangent))
    assert_matches(g_tg, g_t)
    # var/std of a slice kept nowhere: PyTorch's gradient is NaN there (0 * the NaN
    # deviation from a NaN mean, through where's zero), so only the other rows are 0
    rows = MASK.any(1) if name in ("var", "std") else np.ones(3, bool)
    assert not np.any(as_numpy(g_tg)[rows][~MASK[rows]])


@pytest.mark.parametrize("mask_shape", [(4,), (1, 4), (3, 1), (1, 1)])
@pytest.mark.parametrize("name", ["sum", "amax", "mean", "var", "softmax", "median"])
def test_mask_broadcasts_to_the_input(name, mask_shape):
    mask = np.random.default_rng(1).random(mask_shape) > 0.3
    _, got, _, want = _both(name, X, mask)
    assert_matches(got, want)


def test_mask_with_more_dims_than_the_input_is_an_error():
    (x_tg, x_t), (m_tg, m_t) = pair(X), pair(MASK[None], dtype=bool)
    raises_like(lambda: tg.masked.sum(x_tg, mask=m_tg),
                lambda: torch.masked.sum(x_t, mask=m_t))


def test_mask_of_another_dtype_is_made_boolean():
    (x_tg, x_t), (m_tg, m_t) = pair(X), pair(MASK.astype(np.int64), dtype=np.int64)
    assert_matches(tg.masked.amax(x_tg, 0, mask=m_tg), torch.masked.amax(x_t, 0, mask=m_t))


DIMS = [None, 0, -1, (0, 1), [1, 0], ()]


@pytest.mark.parametrize("name, dim", [
    (name, dim) for name in ["sum", "prod", "amax", "amin", "mean", "logsumexp", "norm",
                             "var", "std", "argmax"]
    for dim in DIMS if name != "argmax" or dim is None or isinstance(dim, int)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_dim_and_keepdim(name, dim, keepdim):
    (x_tg, x_t), (m_tg, m_t) = pair(X), pair(MASK | MASK[::-1], dtype=bool)

    def call(m, x, mask):
        args = (2.0, dim) if name == "norm" else (dim,)
        return getattr(m, name)(x, *args, keepdim=keepdim, mask=mask)
    assert_matches(call(tg.masked, x_tg, m_tg), call(torch.masked, x_t, m_t))


def test_mask_none_is_the_plain_reduction():
    (x_tg, x_t) = pair(X)
    for name in ["sum", "amax", "mean", "var", "logsumexp"]:
        assert_matches(getattr(tg.masked, name)(x_tg, 1), getattr(torch.masked, name)(x_t, 1))


def test_dtype_argument_and_integer_promotion():
    (x_tg, x_t), (m_tg, m_t) = pair(X, dtype=np.float32), pair(MASK, dtype=bool)
    for name in ["sum", "prod", "mean", "amax", "logsumexp", "var"]:
        got = getattr(tg.masked, name)(x_tg, 1, dtype=tg.float64, mask=m_tg)
        want = getattr(torch.masked, name)(x_t, 1, dtype=torch.float64, mask=m_t)
        assert_matches(got, want, rtol=1e-6)
    i_tg, i_t = pair(np.arange(12).reshape(3, 4), dtype=np.int32)
    assert_matches(tg.masked.sum(i_tg, 1, mask=m_tg), torch.masked.sum(i_t, 1, mask=m_t))
    assert_matches(tg.masked.prod(i_tg + 1, 0), torch.masked.prod(i_t + 1, 0))
    assert_matches(tg.masked.mean(i_tg, 1, dtype=tg.float64),
                   torch.masked.mean(i_t, 1, dtype=torch.float64))
    assert_matches(tg.masked.amax(i_tg, 1, mask=m_tg), torch.masked.amax(i_t, 1, mask=m_t))
    assert_matches(tg.masked.softmax(x_tg, 0, dtype=tg.float64, mask=m_tg),
                   torch.masked.softmax(x_t, 0, dtype=torch.float64, mask=m_t), rtol=1e-6)


def test_integer_mean_and_median_errors():
    i_tg, i_t = pair(np.arange(12).reshape(3, 4), dtype=np.int64)
    (m_tg, m_t) = pair(MASK, dtype=bool)
    raises_like(lambda: tg.masked.mean(i_tg, 1), lambda: torch.masked.mean(i_t, 1))
    raises_like(lambda: tg.masked.median(i_tg, 1, mask=m_tg),
                lambda: torch.masked.median(i_t, 1, mask=m_t))
    keep = pair(~MASK[1:2].repeat(3, 0), dtype=bool)      # every row keeps something
    assert_matches(tg.masked.median(i_tg, 1, mask=keep[0]),
                   torch.masked.median(i_t, 1, mask=keep[1]))


@pytest.mark.parametrize("kwargs", [{}, {"unbiased": False}, {"unbiased": True},
                                    {"correction": 0}, {"correction": 2},
                                    {"correction": 5}, {"correction": 0.5}])
@pytest.mark.parametrize("name", ["var", "std"])
def test_std_var_correction(name, kwargs):
    (x_tg, x_t), (m_tg, m_t) = pair(X), pair(MASK | MASK[::-1], dtype=bool)
    assert_matches(getattr(tg.masked, name)(x_tg, 1, mask=m_tg, **kwargs),
                   getattr(torch.masked, name)(x_t, 1, mask=m_t, **kwargs))


def test_std_var_take_unbiased_or_correction_not_both():
    (x_tg, x_t) = pair(X)
    raises_like(lambda: tg.masked.var(x_tg, 1, True, correction=1),
                lambda: torch.masked.var(x_t, 1, True, correction=1))


@pytest.mark.parametrize("ord", [2.0, 1, 3, INF, -INF, 0])
def test_norm_and_normalize_orders(ord):
    (x_tg, x_t), (m_tg, m_t) = pair(X), pair(MASK, dtype=bool)
    assert_matches(tg.masked.norm(x_tg, ord, 1, mask=m_tg),
                   torch.masked.norm(x_t, ord, 1, mask=m_t))
    assert_matches(tg.masked.normalize(x_tg, ord, 0, mask=m_tg, eps=0.5),
                   torch.masked.normalize(x_t, ord, 0, mask=m_t, eps=0.5))


def test_logaddexp_with_two_masks():
    (x_tg, x_t), (y_tg, y_t) = pair(X, True), pair(X[::-1] * 2, True)
    (m_tg, m_t), (n_tg, n_t) = pair(MASK, dtype=bool), pair(MASK[0], dtype=bool)
    got = tg.masked.logaddexp(x_tg, y_tg, input_mask=m_tg, other_mask=n_tg)
    want = torch.masked.logaddexp(x_t, y_t, input_mask=m_t, other_mask=n_t)
    assert_matches(got, want)
    assert np.isneginf(as_numpy(got)[1, 1])                 # both masked out there
    grads_tg = tg.autograd.grad(got, [x_tg, y_tg], tg.ones_like(got))
    grads_t = torch.autograd.grad(want, [x_t, y_t], torch.ones_like(want))
    for g_tg, g_t in zip(grads_tg, grads_t):
        assert_matches(g_tg, g_t)


@pytest.mark.parametrize("dim", [(0, 0), (1, -1), 2, -3])
def test_invalid_dims(dim):
    (x_tg, x_t) = pair(X)
    raises_like(lambda: tg.masked.sum(x_tg, dim), lambda: torch.masked.sum(x_t, dim))


def test_compiled_matches_eager(backend):
    (x_tg, _), (m_tg, _) = pair(X), pair(MASK, dtype=bool)

    def f(x):
        return (tg.masked.mean(x, 1, mask=m_tg), tg.masked.softmax(x, 0, mask=m_tg),
                tg.masked.var(x, 1, mask=m_tg | m_tg.flip(0)), tg.masked.amax(x, mask=m_tg))
    for got, want in zip(tg.compile(f, fullgraph=True)(x_tg), f(x_tg)):
        np.testing.assert_allclose(as_numpy(got), as_numpy(want), rtol=1e-12, equal_nan=True)


# ---- windows ------------------------------------------------------------------------

WINDOW_PARAMS = {   # each window with its own parameters at defaults and at another value
    "bartlett": [{}], "blackman": [{}], "cosine": [{}], "hamming": [{}], "hann": [{}],
    "nuttall": [{}],
    "exponential": [{}, {"tau": 0.5}],
    "gaussian": [{}, {"std": 0.7}],
    "kaiser": [{}, {"beta": 0.0}, {"beta": 3.5}],
    "general_cosine": [{"a": [0.46, 0.23, 0.31]}, {"a": (0.5,)}],
    "general_hamming": [{}, {"alpha": 0.6}],
}
WINDOW_CASES = [(name, kw) for name, kws in WINDOW_PARAMS.items() for kw in kws]


@pytest.mark.parametrize("name, kwargs", WINDOW_CASES)
@pytest.mark.parametrize("M", [0, 1, 2, 5, 6])
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_window_values(name, kwargs, M, sym, dtype):
    got = getattr(tg.signal.windows, name)(M, sym=sym, dtype=getattr(tg, dtype), **kwargs)
    want = getattr(torch.signal.windows, name)(M, sym=sym, dtype=getattr(torch, dtype),
                                               **kwargs)
    assert_matches(got, want, *((1e-6, 1e-7) if dtype == "float32" else (1e-12, 1e-15)))


def test_exponential_center_for_periodic_windows():
    got = tg.signal.windows.exponential(7, center=1.5, tau=2.0, sym=False, dtype=tg.float64)
    want = torch.signal.windows.exponential(7, center=1.5, tau=2.0, sym=False,
                                            dtype=torch.float64)
    assert_matches(got, want)


@pytest.mark.parametrize("name, kwargs", WINDOW_CASES)
def test_window_default_dtype_and_requires_grad(name, kwargs):
    window = getattr(tg.signal.windows, name)
    assert window(4, **kwargs).dtype == tg.get_default_dtype()
    for M in (0, 1, 4):
        assert window(M, requires_grad=True, **kwargs).requires_grad
    previous = tg.get_default_dtype()
    tg.set_default_dtype(tg.float64)
    try:
        assert window(3, **kwargs).dtype == tg.float64
    finally:
        tg.set_default_dtype(previous)


def _window_errors():
    yield "hann", (-1,), {}
    yield "kaiser", (3,), {"dtype": "int64"}
    yield "bartlett", (3,), {"dtype": "float16"}
    yield "cosine", (3,), {"layout": None}
    yield "exponential", (3,), {"tau": 0}
    yield "exponential", (3,), {"center": 1.0}
    yield "gaussian", (3,), {"std": -1}
    yield "kaiser", (3,), {"beta": -1}
    yield "general_cosine", (3,), {"a": None}
    yield "general_cosine", (3,), {"a": []}
    yield "blackman", (-2,), {"dtype": "int64"}


@pytest.mark.parametrize("name, args, kwargs", list(_window_errors()))
def test_window_errors(name, args, kwargs):
    def call(lib):
        kw = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
        return getattr(lib.signal.windows, name)(*args, **kw)
    raises_like(lambda: call(tg), lambda: call(torch))


def test_window_compiles(backend):
    def f():
        return (tg.signal.windows.kaiser(7, beta=4.0), tg.signal.windows.hann(6, sym=False),
                tg.signal.windows.gaussian(5, std=0.8))
    for got, want in zip(tg.compile(f, fullgraph=True)(), f()):
        np.testing.assert_allclose(as_numpy(got), as_numpy(want), rtol=1e-6)
