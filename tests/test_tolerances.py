"""The tolerance helpers: what they return for each dtype spelling, and how they scale."""
import numpy as np
import pytest

import tracegrad as tg

from tolerances import amplified, assert_close_normwise, close, eps, ulps


@pytest.mark.parametrize("spelling", ["float32", np.float32, np.dtype("float32"), tg.float32])
def test_eps_reads_every_spelling_of_a_dtype(spelling):
    assert eps(spelling) == float(np.finfo(np.float32).eps)


def test_eps_reads_torch_dtypes():
    torch = pytest.importorskip("torch")
    assert eps(torch.float64) == float(np.finfo(np.float64).eps)


def test_ulps_scale_with_depth_and_factor():
    assert ulps("float64") == 4 * np.finfo(np.float64).eps
    assert ulps("float64", 10) == 10 * ulps("float64")
    assert ulps("float32", 10, factor=1) == 10 * np.finfo(np.float32).eps


def test_close_gives_an_atol_on_the_terms_scale():
    tol = close("float64", n_ops=8, scale=100)
    assert tol["rtol"] == ulps("float64", 8) and tol["atol"] == 100 * tol["rtol"]


def test_amplified_doubles_per_step():
    assert amplified("float64", 0) == ulps("float64")
    assert amplified("float64", 10) == ulps("float64") * 2 ** 10
    assert amplified("float32", 3, growth=3.0, n_ops=2) == ulps("float32", 2) * 27


def test_normwise_comparison_measures_small_elements_by_the_largest():
    desired = np.array([1.0, 1e-6])
    assert_close_normwise(desired + [0.0, 1e-9], desired, rtol=1e-8)
    with pytest.raises(AssertionError):
        assert_close_normwise(desired + [0.0, 1e-7], desired, rtol=1e-8)
