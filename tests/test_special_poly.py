"""torch.special's orthogonal polynomials, airy_ai and spherical_bessel_j0 against PyTorch
at the edges the op table does not draw: negative, fractional, NaN, infinite and large
degrees; x at the ends of the interval, outside it, NaN and infinite; integer and mixed
dtypes, Number arguments, broadcasting, ``out=``; and PyTorch's lack of derivatives.

Tolerances: a polynomial of degree n is n recurrence steps (or one trigonometric form
whose angle is n times acos(x)), each a few roundings of terms up to the largest value of
the sequence so far (times the recurrence's coefficient, up to 2n for Hermite's), so two
correct evaluations differ by about eps * n relative to that size, and an element that
cancels keeps that absolute error. PyTorch's build may also fuse a multiply-add."""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")

POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
DTYPES = [np.float64, np.float32]
# x at the ends of the interval (and of the shifted one, [0, 1]), just inside them (where
# PyTorch's trigonometric forms fall back), inside, outside, NaN and infinite
XS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.25, 0.75, 0.3, -0.7, 0.999, -0.999, 1 - 2 ** -53,
      -1 + 2 ** -53, 2 ** -60, 1 - 2 ** -24, -1 + 2 ** -24, 1.5, -1.5, 3.0, -3.0, 10.0, -7.0,
      np.inf, -np.inf, np.nan]
# negative, fractional (truncated toward 0), each side of every trigonometric threshold
# (4, 6, 8), large
NS = [-5.0, -1.0, -0.5, 0.0, 0.7, 1.0, 1.9, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 12.0,
      20.0, 33.0, 64.0, 100.0]


def _sequence_size(name, x, top, dtype):
    """For each x, the largest |P_m(x)| over m = 0..top as PyTorch computes them: the size
    of the terms the recurrence rounds."""
    m = torch.arange(top + 1, dtype=torch.float64).to(_torch_dtype(dtype))
    vals = getattr(torch.special, name)(torch.tensor(x)[:, None], m[None, :]).numpy()
    return np.maximum.accumulate(np.nan_to_num(np.abs(vals), nan=0.0, posinf=np.inf), axis=1)


def _trig_conditioning(name, x):
    """How much the Chebyshev polynomials' trigonometric forms amplify a last-bit difference
    of acos, sin or cos inside (-1, 1): acos' = 1 / sin(acos(y)), and U, V, W divide by a
    sine or cosine of it, so 1 / sqrt(1 - y^2) (1 elsewhere). Near y = +-1 in float32 it is
    thousands: both libraries compute the same form and disagree there."""
    if "chebyshev" not in name:
        return 1.0
    y = x.astype(np.float64)
    y = 2 * y - 1 if name.startswith("shifted") else y
    with np.errstate(all="ignore"):
        return np.where(np.abs(y) < 1, 1 / np.sqrt(1 - y * y), 1.0)


def _torch_dtype(dtype):
    return torch.float64 if dtype == np.float64 else torch.float32


def _both(name, x, n):
    """PyTorch's and tracegrad's results on the same arrays (or numbers)."""
    def conv(lib, v):
        return lib.tensor(v) if isinstance(v, np.ndarray) else v
    want = getattr(torch.special, name)(conv(torch, x), conv(torch, n))
    got = getattr(tg.special, name)(conv(tg, x), conv(tg, n))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    return got.numpy(), want.numpy()


# At x = NaN and n >= 2, PyTorch's kernels other than T's and Hermite's return an
# uninitialised variable (their loop stops before its first step; NaN, inf or a denormal,
# by what the stack held): NaN here
_UNINITIALISED_AT_NAN = {n for n in POLYNOMIALS if n != "chebyshev_polynomial_t"
                         and not n.startswith("hermite")}


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_edges_match_torch(name, dtype):
    x, n = (a.ravel().astype(dtype) for a in np.meshgrid(np.array(XS), np.array(NS)))
    got, want = _both(name, x, n)
    k = np.trunc(n).astype(np.int64)
    eps = np.finfo(dtype).eps
    degree = np.maximum(k, 1)
    size = _sequence_size(name, x, int(k.max()), dtype)[np.arange(x.size), np.maximum(k, 0)]
    coefficient = degree if name.startswith("hermite") else 1
    rtol = 16 * eps * degree
    atol = rtol * coefficient * np.maximum(size, 1.0) * _trig_conditioning(name, x)
    undefined = np.isnan(x) & (k >= 2) & (name in _UNINITIALISED_AT_NAN)
    assert np.isnan(got[undefined]).all()
    g, w = got[~undefined], want[~undefined]
    with np.errstate(invalid="ignore"):     # inf - inf where both are inf
        same = (g == w) | (np.isnan(g) & np.isnan(w)) | (
            np.abs(g - w) <= atol[~undefined] + rtol[~undefined] * np.abs(w))
    bad = np.flatnonzero(~same)
    assert not bad.size, [(x[~undefined][i], n[~undefined][i], g[i], w[i]) for i in bad[:5]]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_degrees_that_are_not_a_nonnegative_integer_give_zero_or_truncate(name):
    x = np.array([0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 2.0])
    n = np.array([-1.0, -7.0, np.nan, np.inf, -np.inf, 1e30, -0.5])
    got, want = _both(name, x, n)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[:6], 0.0)
    assert got[6] == 1.0        # -0.5 truncates to degree 0
    got, want = _both(name, np.array([0.3, 0.6]), 2.7)    # a float Number degree: 2
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, _both(name, np.array([0.3, 0.6]), 2)[0], rtol=0)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_large_degrees_outside_the_interval_overflow_as_in_torch(name):
    """|x| > 1 climbs to inf, and then the recurrence's inf - inf is NaN (PyTorch's loop
    stops there; the values agree where both are finite)."""
    x = np.array([3.0, -3.0, 1.5, 0.4, 3.0])
    n = np.array([700.0, 701.0, 2000.0, 300.0, 0.0])
    got, want = _both(name, x, n)
    assert ((np.isnan(got) == np.isnan(want)) & (np.isinf(got) == np.isinf(want))).all(), (
        got, want)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=16 * 2000 * 2.2e-16,
                               atol=1e-10)


@pytest.mark.parametrize("dtype,limit", [(np.float32, 128), (np.float64, 512)],
                         ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["hermite_polynomial_h", "hermite_polynomial_he"])
def test_hermite_degrees_past_the_limit_are_nan(name, dtype, limit):
    got, want = _both(name, np.array([0.5, 0.5, 0.0], dtype=dtype),
                      np.array([limit - 10, limit + 1, limit + 1], dtype=dtype))
    assert np.isnan(got[1:]).all() and np.isnan(want[1:]).all()
    assert np.isfinite(got[0]) == np.isfinite(want[0])


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_ends_of_the_interval_are_exact(name):
    """PyTorch's shortcuts at x = +-1 (shifted: x = 0 and 1; Laguerre: x = 0) give small
    integers exactly."""
    x = np.array([1.0, -1.0, 0.0, 1.0, -1.0, 0.0, 1.0, -1.0, 0.0])
    n = np.array([5.0, 5.0, 5.0, 10.0, 10.0, 10.0, 0.0, 0.0, 0.0])
    got, want = _both(name, x, n)
    ends = (x == 0) if name == "laguerre_polynomial_l" else (
        (x == 0) | (x == 1) if name.startswith("shifted") else np.abs(x) == 1)
    if not name.startswith("hermite"):
        np.testing.assert_array_equal(got[ends], want[ends])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_result_dtypes_follow_torch():
    f = "chebyshev_polynomial_t"
    cases = [
        (np.array([2, 3]), np.array([3, 2])),                          # int, int: float32
        (np.array([2, 3]), 3),                                         # int tensor, int
        (np.array([True, False]), 2),
        (np.array([0.5, 0.2], np.float32), np.array([3.0, 2.0])),      # f32, f64: f64
        (np.array([0.5, 0.2], np.float32), np.array(3.0)),             # f32, 0-d f64: f32
        (np.array(0.5, np.float32), np.array([3.0, 2.0])),             # 0-d f32, f64: f64
        (np.array([0.5, 0.2]), np.array([3.0, 2.0], np.float32)),
        (np.array([1, 2]), np.array([3.0, 2.0], np.float32)),
        (np.array([1, 2], np.int32), np.array([3, 2])),
        (0.5, np.array([3, 2])),                                       # Number x
        (2, np.array([3.0, 2.0], np.float32)),
        (np.array([0.5, 0.2], np.float32), 3.7),                       # Number n
        (np.array([0.5, 0.2], np.float32), True),
        (np.array([[0.5], [0.2]]), np.array([1, 2, 3])),               # broadcasting
        (np.array(0.5), np.array([[1, 2, 3]])),
    ]
    for x, n in cases:
        got, want = _both(f, x, n)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{x!r}, {n!r}")


def test_numbers_for_both_and_half_precision_are_refused():
    with pytest.raises(TypeError, match="chebyshev_polynomial_t"):
        tg.special.chebyshev_polynomial_t(0.5, 3)
    with pytest.raises(NotImplementedError, match="legendre_polynomial_p"):
        tg.special.legendre_polynomial_p(tg.tensor([0.5], dtype=tg.float16), 2)
    with pytest.raises(NotImplementedError):
        torch.special.legendre_polynomial_p(torch.tensor([0.5], dtype=torch.float16), 2)
    with pytest.raises(TypeError, match="airy_ai"):
        tg.special.airy_ai(0.5)


@pytest.mark.parametrize("name", POLYNOMIALS + ["airy_ai", "spherical_bessel_j0"])
def test_no_derivative_as_in_torch(name):
    """PyTorch's results do not require grad, so backward through them finds nothing."""
    results = []
    for lib in (torch, tg):
        x = lib.tensor(np.array([0.3, 0.6]), requires_grad=True)
        n = lib.tensor(np.array([3.0, 9.0]), requires_grad=True)
        fn = getattr(lib.special, name)
        out = fn(x) if name in ("airy_ai", "spherical_bessel_j0") else fn(x, n)
        assert not out.requires_grad and out.grad_fn is None
        with pytest.raises(RuntimeError, match="does not require grad"):
            out.sum().backward()
        results.append(out.detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)


def test_out_argument():
    out = tg.empty(2, dtype=tg.float64)
    r = tg.special.hermite_polynomial_h(tg.tensor([0.5, 0.2], dtype=tg.float32), 3, out=out)
    assert r is out and out.dtype == tg.float64
    want = torch.special.hermite_polynomial_h(torch.tensor([0.5, 0.2]), 3,
                                              out=torch.empty(2, dtype=torch.float64))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="can't be cast"):
        tg.special.hermite_polynomial_h(tg.tensor([0.5]), 3, out=tg.empty(1, dtype=tg.int64))
    r = tg.special.airy_ai(tg.tensor([0.5]), out=tg.empty(1))
    np.testing.assert_allclose(r.numpy(), torch.special.airy_ai(torch.tensor([0.5])).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_spherical_bessel_j0_is_torchs_formula(dtype):
    x = np.concatenate([np.linspace(-40, 40, 801), [0.0, -0.0, 1e-30, 0.4999, 0.5, -0.5,
                                                    1e30, np.inf, -np.inf, np.nan]])
    x = x.astype(dtype)
    got = tg.special.spherical_bessel_j0(tg.tensor(x)).numpy()
    want = torch.special.spherical_bessel_j0(torch.tensor(x)).numpy()
    assert got.dtype == want.dtype
    # the same operations; sin's and the division's roundings may differ by an ulp each
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=4 * eps, atol=4 * eps, equal_nan=True)
    assert (got[-3:-1] == 0).all() and np.isnan(got[-1])      # 0 at +-inf


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_airy_ai_against_torch(dtype):
    """Inside |x| < 2.09 PyTorch sums Ai's series (accurate to rounding, as SciPy); outside
    it uses Cephes's asymptotic forms, accurate to about 3e-6 absolutely (1e-4 relative
    near x = -2.35), so there the bound is PyTorch's own accuracy."""
    x = np.linspace(-2.05, 2.05, 411).astype(dtype)
    got = tg.special.airy_ai(tg.tensor(x)).numpy()
    want = torch.special.airy_ai(torch.tensor(x)).numpy()
    assert got.dtype == want.dtype
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=64 * eps, atol=64 * eps)
    x = np.concatenate([np.linspace(-50, 110, 1601), [np.inf, -np.inf, np.nan, 104.0]])
    x = x.astype(dtype)
    got = tg.special.airy_ai(tg.tensor(x)).numpy()
    want = torch.special.airy_ai(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, equal_nan=True)
    assert np.isnan(got[-4:-1]).all() and got[-1] == 0


@pytest.mark.parametrize("name", ["airy_ai", "spherical_bessel_j0"])
def test_unary_int_inputs_give_the_default_float(name):
    for lib in (torch, tg):
        out = getattr(lib.special, name)(lib.tensor([1, 2]))
        assert str(out.dtype).endswith("float32")
    out = getattr(tg.special, name)(tg.tensor([True]))
    assert out.dtype == tg.float32


def test_compiled_matches_eager_at_the_edges():
    x, n = (a.ravel() for a in np.meshgrid(np.array(XS), np.array(NS)))

    def fn(x, n):
        return [getattr(tg.special, name)(x, n) for name in POLYNOMIALS]
    compiled = tg.compile(fn)
    for got, want in zip(compiled(tg.tensor(x), tg.tensor(n)), fn(tg.tensor(x), tg.tensor(n))):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
