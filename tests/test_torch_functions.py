"""tracegrad.torch_functions: torch.* names that are other names for what tracegrad has
(in-place function forms, *_copy, nn.functional's top-level names, windows, logspace,
range, dtype rules, RNG state, flags, gradient), against PyTorch."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.torch_functions import _COPIES, _FUNCTIONAL, _INPLACE

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)
UNIT = rng.uniform(0.2, 0.8, (2, 3))        # in every in-place function's domain
NEEDS_ARGS = {"clamp_": (0.3, 0.6), "clamp_max_": (0.5,), "clamp_min_": (0.5,),
              "clip_": (0.3, 0.6), "fill_": (2.0,), "gcd_": None, "lcm_": None,
              "ldexp_": None, "index_put_": None, "xlogy_": (2.0,), "addmv_": None,
              "resize_as_": None, "detach_": (), "nan_to_num_": ()}


@pytest.mark.parametrize("name", [n for n in _INPLACE if NEEDS_ARGS.get(n, ()) is not None
                                  and hasattr(torch, n) and n not in ("acosh_", "arccosh_")])
def test_inplace_function_forms(name):
    args = NEEDS_ARGS.get(name, ())
    a, b = tg.tensor(UNIT.copy()), torch.tensor(UNIT.copy())
    ra, rb = getattr(tg, name)(a, *args), getattr(torch, name)(b, *args)
    assert ra is a
    np.testing.assert_allclose(a.numpy(), rb.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("view,args", [("view", ((3, 2),)), ("expand", ((4, 2, 3),)),
                                       ("permute", ((1, 0),)), ("t", ()),
                                       ("transpose", (0, 1)), ("unsqueeze", (1,)),
                                       ("squeeze", ()), ("select", (1, 2)),
                                       ("slice", (1, 0, 2)), ("diagonal", ()),
                                       ("unbind", (1,)), ("split", (1,)),
                                       ("split_with_sizes", ([1, 1],)), ("unfold", (1, 2, 1)),
                                       ("alias", ()), ("detach", ())])
def test_copy_forms_are_new_tensors(view, args):
    assert view in _COPIES
    a = tg.tensor(UNIT.copy())
    got = getattr(tg, f"{view}_copy")(a, *args)
    want = getattr(torch, f"{view}_copy")(torch.tensor(UNIT.copy()), *args)
    got, want = (list(got), list(want)) if isinstance(want, (tuple, list)) else ([got], [want])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        g.zero_()
    assert (a.numpy() == UNIT).all()        # a copy, not a view


def test_functional_names_at_the_top_level():
    for name in _FUNCTIONAL:
        assert hasattr(tg, name), name
    x = rng.standard_normal((1, 2, 5, 5))
    w = rng.standard_normal((3, 2, 3, 3))
    np.testing.assert_allclose(tg.conv2d(tg.tensor(x), tg.tensor(w), padding=1).numpy(),
                               torch.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy(),
                               rtol=1e-10)
    y = rng.standard_normal((1, 4, 3, 3))
    np.testing.assert_array_equal(tg.pixel_shuffle(tg.tensor(y), 2).numpy(),
                                  torch.pixel_shuffle(torch.tensor(y), 2).numpy())


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
@pytest.mark.parametrize("n", [0, 1, 2, 7])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows(name, n, periodic):
    got = getattr(tg, name)(n, periodic, dtype=tg.float64)
    want = getattr(torch, name)(n, periodic, dtype=torch.float64)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-15)


def test_ranges_dtypes_and_flags():
    np.testing.assert_allclose(tg.logspace(0, 2, 5, base=2).numpy(),
                               torch.logspace(0, 2, 5, base=2).numpy(), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tg.range(1, 4, 0.5).tolist() == torch.range(1, 4, 0.5).tolist()
    assert tg.scalar_tensor(3).dtype is tg.float32 and tg.scalar_tensor(3).ndim == 0
    assert str(tg.result_type(tg.tensor([1]), 1.0)) == "tracegrad.float32"
    assert tg.promote_types(tg.int32, tg.float32) is tg.float32
    for a, b in ((tg.float32, tg.int32), (tg.int32, tg.float32), (tg.int64, tg.bool)):
        ta, tb = (getattr(torch, str(d).split(".")[1]) for d in (a, b))
        assert tg.can_cast(a, b) == torch.can_cast(ta, tb)
    tg.use_deterministic_algorithms(True, warn_only=True)
    assert tg.are_deterministic_algorithms_enabled() and tg.get_deterministic_debug_mode() == 1
    tg.use_deterministic_algorithms(False)
    state = tg.get_rng_state()
    first = tg.rand(3)
    tg.set_rng_state(state)
    assert (tg.rand(3) == first).all()


def test_gradient_and_special_names():
    x = rng.standard_normal((4, 5))
    for kw in ({}, {"spacing": 0.5}, {"dim": 1}):
        got = tg.gradient(tg.tensor(x), **kw)
        want = torch.gradient(torch.tensor(x), **kw)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)
    a = np.array([2.5, 3.0])
    np.testing.assert_allclose(tg.mvlgamma(tg.tensor(a), 2).numpy(),
                               torch.mvlgamma(torch.tensor(a), 2).numpy(), rtol=1e-12)
    np.testing.assert_allclose(tg.igamma(tg.tensor(a), tg.tensor(a)).numpy(),
                               torch.igamma(torch.tensor(a), torch.tensor(a)).numpy(), rtol=1e-12)
    m = rng.standard_normal((3, 3))
    np.testing.assert_allclose(tg.nuclear_norm(tg.tensor(m)).numpy(),
                               torch.nuclear_norm(torch.tensor(m)).numpy(), rtol=1e-12)
