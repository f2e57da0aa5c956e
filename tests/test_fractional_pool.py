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
    from tracegrad.nn.functional._fractional import _starts
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


# The OpInfo sweep's failures (fractional_max_pool2d samples 7, 8, 10, ...; 3d sample 1, ...):
# the OpInfo's op is ``wrapper_set_seed(F.fractional_max_poolNd, ...)``, so PyTorch draws
# ``_random_samples`` itself with ``torch.manual_seed(42); torch.rand(N, C, nd)``, while
# tracegrad draws its own from its generator: the windows differ wherever they depend on the
# samples (alpha = (L - k) / (o - 1) not an integer). Given the samples PyTorch draws,
# tracegrad's windows are PyTorch's on every sample; and an empty batch (3d's last case)
# reshaped with -1 raised.

def _torch_draw(x, nd):
    """The ``_random_samples`` F.fractional_max_poolNd draws under wrapper_set_seed."""
    from torch.testing._utils import freeze_rng_state
    with freeze_rng_state():
        torch.manual_seed(42)
        n = 1 if x.dim() == nd + 1 else x.size(0)
        return torch.rand(n, x.size(-nd - 1), nd, dtype=x.dtype)


def _as_seeded_torch(nd, x, args, kwargs, dtype):
    """values, indices and the input's gradient for a fixed cotangent, from PyTorch's op as
    the OpInfo calls it (drawing its samples) and from tracegrad given those samples."""
    from torch.testing._utils import wrapper_set_seed
    tf, gf = getattr(TF, f"fractional_max_pool{nd}d"), getattr(GF, f"fractional_max_pool{nd}d")
    kwargs = dict(kwargs, return_indices=True)
    tx = torch.tensor(x, dtype=dtype, requires_grad=True)
    tv, ti = wrapper_set_seed(tf, tx, *args, **kwargs)
    gkw = dict(kwargs)
    if gkw.get("_random_samples") is None:
        gkw["_random_samples"] = tg.tensor(_torch_draw(tx, nd).numpy())
    else:
        gkw["_random_samples"] = tg.tensor(gkw["_random_samples"].numpy())
    gx = tg.tensor(x, dtype=getattr(tg, str(dtype).split(".")[-1]), requires_grad=True)
    gv, gi = gf(gx, *args, **gkw)
    np.testing.assert_array_equal(gi.numpy(), ti.numpy())
    np.testing.assert_array_equal(gv.detach().numpy(), tv.detach().numpy())
    w = np.random.default_rng(0).standard_normal(tuple(tv.shape))
    if tv.numel():
        (tv * torch.tensor(w, dtype=dtype)).sum().backward()
        (gv * tg.tensor(w, dtype=gv.dtype)).sum().backward()
        np.testing.assert_array_equal(gx.grad.numpy(), tx.grad.numpy())
    return gv, gi


SWEEP_CASES = [     # the sweep's first failing sample of each entry, and the empty batch
    (2, (1, 3, 9, 9), ((4, 4),), {"output_size": (2, 3)}),         # 2d sample 7
    (2, (1, 3, 9, 9), ((4, 4),), {"output_ratio": (0.5, 0.5)}),    # 2d sample 8
    (2, (3, 9, 9), (3,), {"output_ratio": (0.5, 0.5)}),            # unbatched
    (3, (2, 3, 5, 5, 5), ((2, 2, 2),), {"output_size": (2, 3, 2)}),  # 3d sample 1
    (3, (1, 2, 6, 5, 4), (2,), {"output_ratio": (0.5, 0.5, 0.5)}),   # 3d sample 10
    (3, (0, 1, 4, 5, 4), ((2, 2, 1),), {"output_size": (2, 3, 2)}),  # 3d: empty batch
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", SWEEP_CASES)
def test_opinfo_sweep_cases_given_the_samples_torch_draws(case, dtype):
    nd, shape, args, kwargs = case
    x = np.random.default_rng(len(shape)).uniform(-9, 9, shape)
    gv, gi = _as_seeded_torch(nd, x, args, kwargs, dtype)
    if shape[0] == 0:
        assert tuple(gv.shape) == tuple(gi.shape) == (0, 1, 2, 3, 2)


def test_windows_depend_on_the_samples_in_the_sweeps_cases():
    """Why the sweep saw differences: with alpha = 5/2 the middle window's start moves with
    the sample (PyTorch's seed-42 draw against another), so only equal samples compare."""
    from tracegrad.nn.functional._fractional import _starts
    assert _starts(np, np.float32([0.0]), 9, 4, 3).tolist() == [[0, 2, 5]]
    assert _starts(np, np.float32([0.3]), 9, 4, 3).tolist() == [[0, 3, 5]]
    tg.manual_seed(3)       # tracegrad's own draw: its generator's, reproducible by its seed
    x = tg.tensor(np.random.default_rng(1).standard_normal((1, 3, 9, 9)))
    a = GF.fractional_max_pool2d(x, 4, output_size=(2, 3), return_indices=True)[1]
    tg.manual_seed(3)
    b = GF.fractional_max_pool2d(x, 4, output_size=(2, 3), return_indices=True)[1]
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_empty_batch_gradient():
    for nd, shape in ((2, (0, 2, 6, 6)), (3, (0, 1, 4, 5, 4))):
        gf = getattr(GF, f"fractional_max_pool{nd}d")
        x = tg.zeros(*shape, requires_grad=True)
        y = gf(x, 2, output_size=2, _random_samples=tg.rand(0, shape[1], nd))
        assert tuple(y.shape) == shape[:2] + (2,) * nd
        y.sum().backward()
        assert tuple(x.grad.shape) == shape


@pytest.mark.parametrize("nd", [2, 3])
def test_every_opinfo_sample_given_the_samples_torch_draws(nd):
    pytest.importorskip("expecttest")
    from torch.testing._internal.common_methods_invocations import op_db
    opinfo = next(o for o in op_db if o.name == f"nn.functional.fractional_max_pool{nd}d")
    checked = 0
    for dtype in (torch.float32, torch.float64):
        torch.manual_seed(0)
        for s in opinfo.sample_inputs(device="cpu", dtype=dtype):
            try:
                opinfo.op(s.input, *s.args, **s.kwargs)
            except RuntimeError:
                continue        # a sample PyTorch rejects
            kwargs = {k: v for k, v in s.kwargs.items() if k != "return_indices"}
            _as_seeded_torch(nd, s.input.numpy(), s.args, kwargs, dtype)
            checked += 1
    assert checked > 60
