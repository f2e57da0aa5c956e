"""Quiet like PyTorch: NumPy's floating-point warnings (divide by zero, overflow, invalid
value) never come out of tracegrad's ops, eager or compiled, forward or backward, whatever
the warning filters or NumPy's error settings; the user's own NumPy code keeps its settings
and its warnings; anomaly mode still reports NaNs."""
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _noisy(lib, x, y):
    """log(0), 1/0, exp(1000), 0/0, an overflowing float32 sum, sqrt(-1), inf - inf."""
    big = x + 3e38
    return [lib.log(x), 1 / x, lib.exp(y * 1000), x / x, (big + big).sum(), lib.sqrt(x - 1),
            (1 / x) - (1 / x), lib.pow(y * 1e20, 3.0), big.mean()]


def _inputs(lib, requires_grad=False):
    return (lib.zeros(3, requires_grad=requires_grad),
            lib.ones(3, requires_grad=requires_grad))


@pytest.mark.parametrize("action", ["always", "error", "default"])
def test_eager_ops_are_silent_under_any_filter(action):
    x, y = _inputs(tg, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        outs = _noisy(tg, x, y)
        sum(o.sum() for o in outs).backward()       # inf and nan gradients, silently
        z = tg.zeros(3)
        z.div_(z)                                   # in place, without autograd
    assert [str(w.message) for w in caught] == []
    assert np.isnan(x.grad.numpy()).all() and np.isnan(z.numpy()).all()


def test_values_are_pytorchs():
    torch = pytest.importorskip("torch")
    ours = _noisy(tg, *_inputs(tg))
    theirs = _noisy(torch, *_inputs(torch))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_numpy_raise_mode_does_not_reach_tracegrad():
    old = np.seterr(all="raise")
    try:
        outs = _noisy(tg, *_inputs(tg))
        with pytest.raises(FloatingPointError):     # the user's own NumPy code still raises
            np.log(np.zeros(1))
    finally:
        np.seterr(**old)
    assert np.isinf(outs[0].numpy()).all()


def test_the_users_numpy_keeps_its_settings_and_warnings():
    before = np.geterr()
    tg.log(tg.zeros(2))
    assert np.geterr() == before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tg.log(tg.zeros(2))
        np.log(np.zeros(1))         # the user's call warns as NumPy always does
    assert [str(w.message) for w in caught] == ["divide by zero encountered in log"]
    assert caught[0].filename == __file__


def test_compiled_ops_are_silent():
    def f(x, y):
        return sum(o.sum() for o in _noisy(tg, x, y))
    cf = tg.compile(f, backend="numpy")
    x, y = _inputs(tg, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):          # the trace, then the cached variant
            out = cf(x, y)
            out.backward()
    assert [str(w.message) for w in caught] == []
    assert np.isnan(out.item())


def test_anomaly_mode_still_reports_nans():
    x = tg.zeros(1, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # anomaly mode's own notices
        with pytest.raises(RuntimeError, match="returned nan values"):
            with tg.autograd.detect_anomaly():
                (x / x).sum().backward()
