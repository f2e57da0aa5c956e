"""``F.fractional_max_pool2d/3d`` and ``nn.FractionalMaxPool2d/3d`` against PyTorch: with the
same ``_random_samples`` the same windows (values and indices bit for bit: a max picks one
of its inputs), the same gradients, PyTorch's errors; and ``F.boolean_dispatch``,
``F.assert_int_or_pair``."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF, GF = torch.nn.functional, tg.nn.functional


def _cases():
    rng = np.random.default_rng(0)
    cases = []
    while len(cases) < 40:
        nd = 2 + len(cases) % 2
        spatial = tuple(int(v) for v in rng.integers(4, 11, nd))
        kernel = tuple(int(v) for v in rng.integers(1, 4, nd))
        # PyTorch's bounds: o + k - 1 <= L in 2-D, < L in 3-D
        room = [L - k + (1 if nd == 2 else 0) for L, k in zip(spatial, kernel)]
        if min(room) < 1:
            continue
        out = tuple(int(rng.integers(1, r + 1)) for r in room)
        cases.append((nd, (int(rng.integers(1, 3)), int(rng.integers(1, 3))) + spatial,
                      kernel, out, int(rng.integers(1 << 30))))
    return cases


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", _cases())
def test_same_samples_same_windows_as_torch(case, dtype):
    nd, shape, kernel, out, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    u = rng.random(shape[:2] + (nd,)).astype(dtype)
    tf = TF.fractional_max_pool2d if nd == 2 else TF.fractional_max_pool3d
    gf = GF.fractional_max_pool2d if nd == 2 else GF.fractional_max_pool3d
    tv, ti = tf(torch.tensor(x), kernel, output_size=out, return_indices=True,
                _random_samples=torch.tensor(u))
    gv, gi = gf(tg.tensor(x), kernel, output_size=out, return_indices=True,
                _random_samples=tg.tensor(u))
    assert gi.dtype == tg.int64
    np.testing.assert_array_equal(gi.numpy(), ti.numpy())
    np.testing.assert_array_equal(gv.numpy(), tv.numpy())


def test_intervals_computed_in_the_inputs_float32():
    """A float32 sample for which float64 arithmetic would start the windows elsewhere."""
    from tracegrad.nn.functional_fractional import _starts
    u = np.float32(0.4666665494441986)
    assert not np.array_equal(_starts(np, np.array(u), 17, 2, 9),
                              _starts(np, np.array(u, np.float64), 17, 2, 9))
    x = np.random.default_rng(1).standard_normal((1, 1, 3, 17)).astype(np.float32)
    s = np.array([[[u, 0.5]]], np.float32)
    t = TF.fractional_max_pool2d(torch.tensor(x), (1, 2), output_size=(3, 9),
                                 return_indices=True, _random_samples=torch.tensor(s))[1]
    g = GF.fractional_max_pool2d(tg.tensor(x), (1, 2), output_size=(3, 9),
                                 return_indices=True, _random_samples=tg.tensor(s))[1]
    np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_nan_and_unbatched_and_ratio():
    x = np.random.default_rng(2).standard_normal((3, 8, 9))
    x[0, 2, 3] = np.nan
    u = np.random.default_rng(3).random((1, 3, 2))
    args = dict(output_ratio=(0.5, 0.6), return_indices=True)
    tv, ti = TF.fractional_max_pool2d(torch.tensor(x), 2, _random_samples=torch.tensor(u), **args)
    gv, gi = GF.fractional_max_pool2d(tg.tensor(x), 2, _random_samples=tg.tensor(u), **args)
    assert tuple(gv.shape) == tuple(tv.shape) == (3, 4, 5)
    np.testing.assert_array_equal(gi.numpy(), ti.numpy())
    np.testing.assert_array_equal(gv.numpy(), tv.numpy())       # NaN where PyTorch has it


@pytest.mark.parametrize("nd", [2, 3])
def test_gradients_scatter_to_the_argmax_as_torch(nd):
    rng = np.random.default_rng(4)
    shape = (2, 2) + (6,) * nd
    x = rng.permutation(np.prod(shape)).reshape(shape) / 7.0    # no ties: finite differences
    u = rng.random((2, 2, nd))
    out = (4,) * nd if nd == 2 else (3,) * nd
    tf = TF.fractional_max_pool2d if nd == 2 else TF.fractional_max_pool3d
    gf = GF.fractional_max_pool2d if nd == 2 else GF.fractional_max_pool3d
    gx = tg.tensor(x, requires_grad=True)
    fn = lambda t: gf(t, 3, output_size=out, _random_samples=tg.tensor(u))  # noqa: E731
    assert gradcheck(fn, (gx,))
    assert gradgradcheck(fn, (gx,))
    tx = torch.tensor(x, requires_grad=True)
    w = rng.standard_normal((2, 2) + out)
    y = fn(gx)
    assert type(y.grad_fn).__name__ == f"FractionalMaxPool{nd}DBackward0"
    (y * tg.tensor(w)).sum().backward()
    (tf(tx, 3, output_size=out, _random_samples=torch.tensor(u)) * torch.tensor(w)).sum() \
        .backward()
    # overlapping windows that share a max add their gradients: sums of at most k^nd terms
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=1e-14)


def test_modules_as_torch():
    u = np.random.default_rng(5).random((2, 3, 2)).astype(np.float32)
    x = np.random.default_rng(6).standard_normal((2, 3, 9, 9)).astype(np.float32)
    ours = tg.nn.FractionalMaxPool2d(3, output_size=5, return_indices=True,
                                     _random_samples=tg.tensor(u))
    theirs = torch.nn.FractionalMaxPool2d(3, output_size=5, return_indices=True,
                                          _random_samples=torch.tensor(u))
    for a, b in zip(ours(tg.tensor(x)), theirs(torch.tensor(x))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert "_random_samples" in dict(ours.named_buffers())
    assert repr(ours) == repr(theirs) == "FractionalMaxPool2d()"
    u3 = np.random.default_rng(7).random((1, 2, 3))
    x3 = np.random.default_rng(8).standard_normal((1, 2, 6, 7, 8))
    a = tg.nn.FractionalMaxPool3d((2, 3, 2), output_ratio=0.5, _random_samples=tg.tensor(u3))
    b = torch.nn.FractionalMaxPool3d((2, 3, 2), output_ratio=0.5,
                                     _random_samples=torch.tensor(u3))
    np.testing.assert_array_equal(a(tg.tensor(x3)).numpy(), b(torch.tensor(x3)).numpy())
    tg.manual_seed(0)       # without samples: fresh ones each call, the right shapes
    y = tg.nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0.5))(tg.tensor(x))
    assert tuple(y.shape) == (2, 3, 4, 4)


def _error(lib, fn):
    with pytest.raises((RuntimeError, ValueError, TypeError)) as info:
        fn(lib)
    return type(info.value), str(info.value).splitlines()[0]


def _f2(lib, *a, **k):
    return lib.nn.functional.fractional_max_pool2d(lib.zeros(2, 3, 7, 9), *a, **k)


def _f3(lib, *a, **k):
    return lib.nn.functional.fractional_max_pool3d(lib.zeros(2, 3, 5, 6, 7), *a, **k)


@pytest.mark.parametrize("fn", [
    lambda lib: _f2(lib, 3),
    lambda lib: _f2(lib, 3, output_size=(6, 8)),
    lambda lib: _f2(lib, 3, output_size=(5, 8)),
    lambda lib: _f2(lib, (3, 3, 3), output_size=(2, 2)),
    lambda lib: _f2(lib, 3, output_size=(2, 2, 2)),
    lambda lib: _f2(lib, 3, output_size=2, _random_samples=lib.rand(2, 3, 2, dtype=lib.float64)),
    lambda lib: _f2(lib, 3, output_size=2, _random_samples=lib.rand(2, 3)),
    lambda lib: _f2(lib, 3, output_size=2, _random_samples=lib.rand(1, 3, 2)),
    lambda lib: _f2(lib, 3, output_size=2, _random_samples=lib.rand(2, 2, 2)),
    lambda lib: _f2(lib, 3, output_size=2, _random_samples=lib.rand(2, 3, 3)),
    lambda lib: _f2(lib, 3, output_ratio=(0.5, 0.5, 0.5)),
    lambda lib: lib.nn.functional.fractional_max_pool2d(lib.zeros(2, 0, 7, 9), 3, output_size=2),
    lambda lib: _f3(lib, 2, output_size=(4, 5, 6)),
    lambda lib: _f3(lib, 2, output_size=(3, 5, 6)),
    lambda lib: _f3(lib, 2, output_size=(3, 4, 6)),
    lambda lib: _f3(lib, 2, output_size=(2, 2)),
    lambda lib: _f3(lib, (2, 2), output_size=2),
    lambda lib: _f3(lib, 2, output_size=2, _random_samples=lib.rand(2, 3, 2)),
    lambda lib: lib.nn.FractionalMaxPool3d(0, output_size=2),
    lambda lib: lib.nn.FractionalMaxPool2d(2, output_ratio=1.5),
    lambda lib: lib.nn.FractionalMaxPool3d(2),
    lambda lib: lib.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5),
])
def test_errors_as_torch(fn):
    ours, theirs = _error(tg, fn), _error(torch, fn)
    assert ours == theirs


def test_boolean_dispatch_and_assert_int_or_pair():
    for lib in (tg, torch):
        def yes(x, flag=False):
            """doc"""
            return "yes"

        def no(x, flag=False):
            return "no"

        F = lib.nn.functional
        fn = F.boolean_dispatch("flag", 1, False, yes, no, "mod", "name")
        assert (fn(1), fn(1, True), fn(1, flag=True)) == ("no", "yes", "yes")
        assert fn.__doc__ == no.__doc__ == "doc" and fn.__name__ == "name"
        assert fn.__module__ == "mod"
        F.assert_int_or_pair(3, "k", "{} bad")
        F.assert_int_or_pair((1, 2), "k", "{} bad")
        with pytest.raises(AssertionError, match="k bad"):
            F.assert_int_or_pair((1, 2, 3), "k", "{} bad")
