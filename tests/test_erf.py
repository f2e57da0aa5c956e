"""erf on the NumPy path: SciPy's where installed, else the vectorised rational
approximation, which is tested here whether or not SciPy is installed."""
import math
import sys

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.ops import special

from tolerances import close

TINY = [5e-324, 2.2250738585072014e-308, 1e-300, 2.0 ** -29, 2.0 ** -28, 1e-10]
# around each point where the approximation changes form
EDGES = [x for e in (0.84375, 1.25, 1 / 0.35, 6.0) for x in (np.nextafter(e, 0), e,
                                                              np.nextafter(e, 10))]
POINTS = [0.0, 0.5, 1.0, 3.0, 6.0, 27.0, 1e300] + TINY + EDGES


def _grid():
    rng = np.random.default_rng(0)
    pts = np.array(POINTS)
    return np.concatenate([pts, -pts, np.linspace(-7, 7, 100_001), rng.standard_normal(50_000) * 3,
                           np.logspace(-320, 1, 5_000), -np.logspace(-320, 1, 5_000)])


def _max_ulp(got, x):
    ref = np.array([math.erf(v) for v in x])
    ulp = np.spacing(np.abs(ref))
    ulp[ulp == 0] = 5e-324
    return float(np.max(np.abs(got - ref) / ulp))


@pytest.fixture
def no_scipy(monkeypatch):
    """The rest of tracegrad sees no SciPy: erf takes the fallback."""
    monkeypatch.setattr(special, "_scipy", False)


def test_the_fallback_is_within_4_ulp_of_math_erf():
    x = _grid()
    assert _max_ulp(special.erf_rational(x), x) <= 4


def test_scipys_erf_is_close_to_math_erf_too():
    f = pytest.importorskip("scipy.special").erf
    x = _grid()
    assert _max_ulp(f(x), x) <= 8          # SciPy's own accuracy (3 ulp measured), not ours


def test_the_fallbacks_special_values():
    y = special.erf_rational(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0]))
    assert y[0] == 1.0 and y[1] == -1.0 and np.isnan(y[2])
    assert y[3] == 0.0 and not np.signbit(y[3])
    assert y[4] == 0.0 and np.signbit(y[4])            # erf(-0.0) is -0.0
    assert special.erf_rational(np.array(-0.0)).shape == ()
    assert np.isnan(special.erf_rational(np.array(np.nan)))


@pytest.mark.parametrize("scipy", [True, False])
def test_erf_through_tracegrad(scipy, monkeypatch):
    if scipy:
        pytest.importorskip("scipy.special")
    else:
        monkeypatch.setattr(special, "_scipy", False)
    x = np.array([-np.inf, -3.0, -1.0, -0.5, -0.0, 0.0, 1e-300, 0.5, 1.0, 3.0, 6.0, np.inf, np.nan])
    got = tg.erf(tg.tensor(x, dtype=tg.float64)).numpy()
    ref = np.array([math.erf(v) for v in x])
    np.testing.assert_array_max_ulp(got[~np.isnan(ref)], ref[~np.isnan(ref)], maxulp=4)
    assert np.isnan(got[-1]) and np.signbit(got[4])
    # float32 in, float32 out; ints and bools compute in the default float dtype
    f32 = tg.erf(tg.tensor(x, dtype=tg.float32))
    assert f32.dtype is tg.float32
    np.testing.assert_array_max_ulp(f32.numpy()[:-1], ref[:-1].astype(np.float32), maxulp=1)
    ints = tg.erf(tg.tensor([0, 1, -2]))
    assert ints.dtype is tg.get_default_dtype()
    assert np.allclose(ints.numpy(), [0.0, math.erf(1), math.erf(-2)])
    assert tg.erf(tg.tensor([True, False])).dtype is tg.get_default_dtype()


def test_the_fallback_makes_no_python_call_per_element(no_scipy, monkeypatch):
    def refuse(*_):
        raise AssertionError("math.erf called")
    monkeypatch.setattr(math, "erf", refuse)
    x = np.linspace(-8, 8, 100_000)
    y = tg.erf(tg.tensor(x, dtype=tg.float64)).numpy()
    assert y.shape == x.shape and y[0] == -1.0 and y[-1] == 1.0

    def python_calls(n):
        calls = []

        def profile(frame, event, arg):
            if event == "call":
                calls.append(frame.f_code)
        a = np.linspace(-8, 8, n)
        sys.setprofile(profile)
        try:
            special.erf(np, a)
        finally:
            sys.setprofile(None)
        return len(calls)
    # whole-array calls on chunks of special._CHUNK elements: some dozens of Python calls
    # (ours and NumPy's wrappers) a chunk, where one call per element would be 100000
    assert python_calls(100_000) < 1000


@pytest.mark.parametrize("scipy", [True, False])
def test_gelu_matches_torch(scipy, monkeypatch):
    torch = pytest.importorskip("torch")
    if scipy:
        pytest.importorskip("scipy.special")
    else:
        monkeypatch.setattr(special, "_scipy", False)
    from tracegrad.nn import functional as F
    x = np.random.default_rng(1).standard_normal(10_000) * 4
    for dtype, tdtype in ((tg.float64, torch.float64), (tg.float32, torch.float32)):
        got = F.gelu(tg.tensor(x, dtype=dtype), approximate="none").numpy()
        ref = torch.nn.functional.gelu(torch.tensor(x, dtype=tdtype), approximate="none").numpy()
        # x * (1 + erf(x / sqrt 2)) / 2: an erf (the fallback is within 4 ulps, above) and
        # three roundings; for negative x, 1 + erf cancels, so an element near zero keeps
        # the absolute error of the product's size, |x| <= 16
        np.testing.assert_allclose(got, ref, **close(np.dtype(dtype.name), n_ops=4, scale=16))


def test_erf_compiled_matches_eager(no_scipy):
    f = tg.compile(lambda t: tg.erf(t) * 2)
    x = tg.tensor(np.linspace(-4, 4, 101))
    # bit for bit: the NumPy tier's generated code calls the same _erf(np, x) on the same
    # array as eager does, and doubling is exact
    np.testing.assert_array_equal(f(x).numpy(), (tg.erf(x) * 2).numpy())
