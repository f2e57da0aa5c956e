"""Scans, sorting, einsum, random draws, isclose, finfo/iinfo and testing.assert_close,
beyond what the op table checks: dtypes, ties, zeros, errors and messages against PyTorch."""
import numpy as np
import pytest

import tracegrad as tg

from tolerances import close, ulps

torch = pytest.importorskip("torch")

# The float results compared here are at most a few operations deep (a logaddexp's exp, log1p
# and max; an einsum's sums of at most a dozen products of standard normal entries), which
# PyTorch's vectorised kernels round a few ulps from NumPy's.
F64 = close("float64", n_ops=16, scale=8)


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _both(fn, *arrays, dtype="float64", grad=False):
    t_in = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=grad) for a in arrays]
    g_in = [tg.tensor(a, dtype=getattr(tg, dtype), requires_grad=grad) for a in arrays]
    return t_in, fn(torch, *t_in), g_in, fn(tg, *g_in)


def _same(t, g, exact=False):
    assert str(t.dtype).split(".")[-1] == g.dtype.name
    assert tuple(t.shape) == tuple(g.shape)
    if exact:   # integers, selections (sort, nan_to_num) and sums of small integers: no rounding
        np.testing.assert_array_equal(_np(g), _np(t))
    else:
        np.testing.assert_allclose(_np(g), _np(t), **F64, equal_nan=True)


# scans ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "float32"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scan_dtypes_match_torch(name, dtype):
    a = [[1, 0, 2], [3, 1, 1]]
    t = getattr(torch, name)(torch.tensor(a, dtype=getattr(torch, dtype)), 1)
    g = getattr(tg, name)(tg.tensor(a, dtype=getattr(tg, dtype)), 1)
    _same(t, g, exact=True)
    t = getattr(torch, name)(torch.tensor(a), 0, dtype=torch.float64)
    g = getattr(tg, name)(tg.tensor(a), 0, dtype=tg.float64)
    _same(t, g, exact=True)


@pytest.mark.parametrize("values", [
    [0.0, 0.0, 0.0, 2.0], [2.0, 0.0, 3.0, 0.0, 0.0, 1.5], [0.0, 1.5, 2.0], [1.5, 2.0, 0.0]],
    ids=["all-but-one zero", "three zeros", "leading zero", "trailing zero"])
def test_cumprod_derivatives_at_zeros_match_torch(values):
    """First and second derivatives of a weighted cumprod, where the input holds zeros."""
    w = np.linspace(0.5, 1.5, len(values))
    res = []
    for lib in (torch, tg):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad((lib.cumprod(x, 0) * lib.tensor(w)).sum(), x, create_graph=True)
        (h,) = lib.autograd.grad((g * lib.tensor(w[::-1].copy())).sum(), x)
        res.append((_np(g), _np(h)))
    # products and sums of at most 6 values, twice differentiated: a few dozen operations
    np.testing.assert_allclose(res[1][0], res[0][0], **close("float64", n_ops=36, scale=8))
    np.testing.assert_allclose(res[1][1], res[0][1], **close("float64", n_ops=36, scale=8))


# sorting -------------------------------------------------------------------------------------

TIES = [[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.0, 0.0, -1.0, 5.0, 5.0, 0.0]]


@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_with_ties_matches_torch(descending):
    for dtype in ("float64", "int64"):
        _, t, _, g = _both(lambda lib, x: lib.sort(x, dim=1, descending=descending, stable=True),
                           TIES, dtype=dtype)
        _same(t.values, g.values, exact=True)
        _same(t.indices, g.indices, exact=True)
        _, t, _, g = _both(lambda lib, x: lib.argsort(x, dim=1, descending=descending,
                                                      stable=True), TIES, dtype=dtype)
        _same(t, g, exact=True)


def test_sort_gradient_scatters_to_indices():
    x = tg.tensor([[0.5, -1.0, 2.0], [1.0, 3.0, -2.0]], dtype=tg.float64, requires_grad=True)
    values, indices = x.sort(1, descending=True)
    w = tg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=tg.float64)
    (values * w).sum().backward()
    expect = np.zeros((2, 3))
    np.put_along_axis(expect, _np(indices), _np(w), 1)
    np.testing.assert_array_equal(_np(x.grad), expect)     # scattered copies: no rounding


def test_topk_kthvalue_values_and_named_fields():
    x = tg.tensor([[4.0, 1.0, 3.0, 2.0]])
    top = tg.topk(x, 3)
    assert top.values.tolist() == [[4.0, 3.0, 2.0]] and top.indices.tolist() == [[0, 2, 3]]
    kv = x.kthvalue(2, 1, keepdim=True)
    assert kv.values.tolist() == [[2.0]] and kv.indices.tolist() == [[3]]
    with pytest.raises(IndexError):
        tg.topk(x, 5)
    with pytest.raises(IndexError):
        tg.kthvalue(x, 0)


def test_sort_of_nan_matches_torch():
    a = [[1.0, float("nan"), -2.0, 0.5]]
    for desc in (False, True):
        _, t, _, g = _both(lambda lib, x: lib.sort(x, dim=1, descending=desc, stable=True), a)
        _same(t.values, g.values)
        _same(t.indices, g.indices, exact=True)


# elementwise and shape ops -----------------------------------------------------------------

def test_nan_to_num_defaults_match_torch():
    a = [float("nan"), float("inf"), -float("inf"), 1.5]
    for dtype in ("float32", "float64"):
        _, t, _, g = _both(lambda lib, x: lib.nan_to_num(x), a, dtype=dtype)
        _same(t, g, exact=True)
    t_in, t, g_in, g = _both(lambda lib, x: x.nan_to_num(posinf=1.0), a, grad=True)
    t.sum().backward()
    g.sum().backward()
    np.testing.assert_array_equal(_np(g_in[0].grad), _np(t_in[0].grad))   # ones and zeros
    ints = tg.tensor([1, 2])
    assert tg.nan_to_num(ints).dtype is tg.int64


def test_logaddexp_infinities_and_ties_match_torch():
    inf = float("inf")
    a, b = [-inf, inf, 1.0, -inf, 2.0], [-inf, inf, 1.0, 3.0, -1.0]
    t_in, t, g_in, g = _both(lambda lib, x, y: lib.logaddexp(x, y), a, b, grad=True)
    _same(t, g)
    t_in, t, g_in, g = _both(lambda lib, x, y: lib.logaddexp2(x, y), a, b)
    _same(t, g)
    t_in, t, g_in, g = _both(lambda lib, x, y: lib.logaddexp(x, y), [1.0, 2.0], [1.0, 0.0],
                             grad=True)
    t.sum().backward()
    g.sum().backward()
    for ti, gi in zip(t_in, g_in):
        np.testing.assert_allclose(_np(gi.grad), _np(ti.grad), **F64)


def test_atan2_int_inputs_promote_like_torch():
    t = torch.atan2(torch.tensor([1, -2]), torch.tensor([3, 0]))
    g = tg.atan2(tg.tensor([1, -2]), tg.tensor([3, 0]))
    assert g.dtype is tg.float32 and str(t.dtype) == "torch.float32"
    np.testing.assert_allclose(_np(g), _np(t), rtol=ulps("float32", 2))     # one atan2


def test_repeat_interleave_forms_match_torch():
    for fn in (lambda lib: lib.repeat_interleave(lib.tensor([2, 0, 1])),
               lambda lib: lib.tensor([[1, 2], [3, 4]]).repeat_interleave(2),
               lambda lib: lib.repeat_interleave(lib.tensor([[1, 2], [3, 4]]), lib.tensor(3),
                                                 dim=1),
               lambda lib: lib.repeat_interleave(lib.tensor([[1, 2], [3, 4]]),
                                                 lib.tensor([1, 2]), dim=0)):
        _same(fn(torch), fn(tg), exact=True)


def test_meshgrid_and_diag_trace_roll_forms_match_torch():
    for fn in (lambda lib: lib.meshgrid(lib.arange(3), lib.arange(2), indexing="xy")[1],
               lambda lib: lib.meshgrid([lib.arange(3), lib.arange(2)], indexing="ij")[0],
               lambda lib: lib.diag(lib.arange(6).reshape(2, 3), -1),
               lambda lib: lib.trace(lib.arange(6).reshape(2, 3)),
               lambda lib: lib.roll(lib.arange(6).reshape(2, 3), (1, 1), (0, 1)),
               lambda lib: lib.arange(24).reshape(2, 3, 4).diagonal(1, -1, 0),
               lambda lib: lib.tril(lib.ones(2, 3, 3, dtype=lib.int64), -1),
               lambda lib: lib.diag_embed(lib.arange(6.0).reshape(2, 3), 1, 0, 2)):
        _same(fn(torch), fn(tg), exact=True)


# einsum -------------------------------------------------------------------------------------

@pytest.mark.parametrize("equation,shapes", [
    ("i,i", [(3,)]), ("ij->j", [(2, 3)]), ("ba,ca->bc", [(2, 3), (4, 3)]),
    ("...->...", [(2, 3)]), ("i...->...", [(2, 3, 1)]), ("bij,jk", [(2, 2, 3), (3, 2)]),
    ("a...b,b...c->a...c", [(2, 4, 3), (3, 4, 2)]), ("ijji->i", [(2, 3, 3, 2)]),
    ("Ab,bA->A", [(2, 3), (3, 2)]), ("i,i,i->i", [(3,), (3,), (3,)]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_einsum_matches_torch(equation, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in (shapes if len(shapes) > 1 or equation == "i,i"
                                                 else shapes)]
    if equation == "i,i":
        arrays = arrays * 2
    t_in, t, g_in, g = _both(lambda lib, *xs: lib.einsum(equation, *xs), *arrays, grad=True)
    _same(t, g)
    t.sum().backward()
    g.sum().backward()
    for ti, gi in zip(t_in, g_in):
        np.testing.assert_allclose(_np(gi.grad), _np(ti.grad), **F64)


def test_einsum_int_operands_and_errors():
    a = [[1, 2], [3, 4]]
    _same(torch.einsum("ij,jk->ik", torch.tensor(a), torch.tensor(a)),
          tg.einsum("ij,jk->ik", tg.tensor(a), tg.tensor(a)), exact=True)
    x = tg.ones(2, 3)
    for eq, ops in (("ij,jk->ik", (x,)), ("ijk->i", (x,)), ("ij->k", (x,)), ("ij->ii", (x,)),
                    ("ij,jk->ik", (x, tg.ones(4, 2)))):
        with pytest.raises(RuntimeError, match="einsum"):
            tg.einsum(eq, *ops)


# random draws ----------------------------------------------------------------------------------

def test_bernoulli_seeded_and_statistics():
    p = tg.full((4000,), 0.3, dtype=tg.float64)
    tg.manual_seed(1)
    a = tg.bernoulli(p)
    tg.manual_seed(1)
    b = p.bernoulli()
    assert a.dtype is tg.float64 and (a == b).all().item()
    assert set(np.unique(_np(a))) <= {0.0, 1.0}
    assert abs(_np(a).mean() - 0.3) < 0.04
    assert not (tg.bernoulli(tg.zeros(10)) != 0).any().item()
    assert (tg.bernoulli(tg.ones(10)) == 1).all().item()
    x = tg.full((3,), 0.5, requires_grad=True)
    out = tg.bernoulli(x)
    assert out.requires_grad       # as in PyTorch, with a zero gradient
    out.sum().backward()
    assert (x.grad == 0).all().item()
    gen = tg.Generator().manual_seed(3)
    c = tg.bernoulli(p, generator=gen)
    gen.manual_seed(3)
    assert (tg.bernoulli(p, generator=gen) == c).all().item()


def test_normal_forms_and_zero_gradients():
    tg.manual_seed(0)
    z = tg.normal(2.0, 3.0, (20000,))
    assert z.shape == (20000,) and abs(z.mean().item() - 2.0) < 0.1
    assert abs(z.std().item() - 3.0) < 0.1
    mean = tg.zeros(2, 3, requires_grad=True)
    std = tg.ones(3, requires_grad=True)
    s = tg.normal(mean, std)
    assert s.shape == (2, 3) and s.requires_grad
    s.sum().backward()
    assert (mean.grad == 0).all().item() and (std.grad == 0).all().item()
    tg.manual_seed(5)
    a = tg.normal(tg.zeros(3), 1.0)
    tg.manual_seed(5)
    b = tg.randn(3)
    # bit for bit: the same generator state draws the same numbers, and 0 + 1 * z is exact
    np.testing.assert_array_equal(_np(a), _np(b))
    with pytest.raises(RuntimeError):
        tg.normal(tg.zeros(2), tg.tensor([1.0, -1.0]))


def test_multinomial_with_and_without_replacement():
    w = tg.tensor([[0.0, 1.0, 3.0, 0.0], [2.0, 2.0, 0.0, 1.0]], dtype=tg.float64)
    tg.manual_seed(0)
    draws = tg.multinomial(w, 4000, replacement=True)
    assert draws.dtype is tg.int64 and draws.shape == (2, 4000)
    counts = np.stack([np.bincount(r, minlength=4) for r in _np(draws)]) / 4000
    np.testing.assert_allclose(counts, _np(w / w.sum(1, keepdim=True)), atol=0.04)
    for _ in range(20):
        d = _np(w.multinomial(2))
        assert all(len(set(r)) == 2 for r in d)
        assert set(d[0]) == {1, 2} and 2 not in d[1]
    tg.manual_seed(7)
    a = tg.multinomial(w[1], 3)
    tg.manual_seed(7)
    assert (tg.multinomial(w[1], 3) == a).all().item()
    with pytest.raises(RuntimeError):
        tg.multinomial(w, 3)                 # only 2 non-zero weights in row 0
    with pytest.raises(RuntimeError):
        tg.multinomial(tg.tensor([1.0, -1.0]), 1)
    with pytest.raises(RuntimeError):
        tg.multinomial(w[0], 5)


def test_compiled_random_draws_fresh_each_call_and_follow_the_seed():
    @tg.compile
    def f(p, mean, w):
        return tg.bernoulli(p), tg.normal(mean, 1.0), tg.multinomial(w, 3, replacement=True)

    p, mean, w = tg.full((64,), 0.5), tg.zeros(64), tg.tensor([1.0, 2.0, 3.0])
    tg.manual_seed(11)
    first = [_np(o) for o in f(p, mean, w)]
    second = [_np(o) for o in f(p, mean, w)]
    assert not np.array_equal(first[0], second[0]) and not np.array_equal(first[1], second[1])
    tg.manual_seed(11)
    again = [_np(o) for o in f(p, mean, w)]
    for a, b in zip(first, again):    # the same seed, the same code: the same draws
        np.testing.assert_array_equal(a, b)
    assert f.stats["compiles"] == 1


# isclose, allclose, finfo, iinfo ---------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, {"equal_nan": True}, {"rtol": 0.1, "atol": 0.0},
                                {"rtol": 0.0, "atol": 0.0}])
def test_isclose_matches_torch(kw):
    inf, nan = float("inf"), float("nan")
    a = [1.0, 1.0 + 1e-6, 1.0, inf, inf, nan, 0.0, 100.0, 1e-9]
    b = [1.0, 1.0, 1.1, inf, -inf, nan, 1e-8, 105.0, 0.0]
    for dtype in ("float32", "float64"):
        _, t, _, g = _both(lambda lib, x, y: lib.isclose(x, y, **kw), a, b, dtype=dtype)
        _same(t, g, exact=True)
        _, t, _, g = _both(lambda lib, x, y: x.allclose(y, **kw), a, b, dtype=dtype)
        assert t == g
    _, t, _, g = _both(lambda lib, x, y: lib.isclose(x, y, **kw), [1, 2, 30], [1, 3, 31],
                       dtype="int64")
    _same(t, g, exact=True)
    assert tg.allclose(tg.tensor([1.0, nan]), tg.tensor([1.0, nan]), equal_nan=True)


def test_isclose_dtype_mismatch_raises():
    with pytest.raises(RuntimeError):
        tg.isclose(tg.tensor([1.0]), tg.tensor([1.0], dtype=tg.float64))


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_finfo_matches_torch(name):
    t, g = torch.finfo(getattr(torch, name)), tg.finfo(getattr(tg, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(g, attr) == getattr(t, attr), attr
    assert tg.finfo().dtype == "float32"
    with pytest.raises(TypeError):
        tg.finfo(tg.int32)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    t, g = torch.iinfo(getattr(torch, name)), tg.iinfo(getattr(tg, name))
    for attr in ("bits", "max", "min", "dtype"):
        assert getattr(g, attr) == getattr(t, attr), attr
    with pytest.raises(TypeError):
        tg.iinfo(tg.float32)


# testing.assert_close --------------------------------------------------------------------------

def _message(lib, fn):
    with pytest.raises(AssertionError) as info:
        fn(lib)
    return str(info.value).replace("tracegrad.", "torch.")


@pytest.mark.parametrize("fn", [
    lambda lib: lib.testing.assert_close(lib.tensor([1.0, 2.0, 3.0]), lib.tensor([1.0, 2.5, 3.0])),
    lambda lib: lib.testing.assert_close(lib.tensor([[1, 2], [5, 4]]),
                                         lib.tensor([[1, 3], [3, 4]])),
    lambda lib: lib.testing.assert_close(lib.tensor(1.0), lib.tensor(2.0)),
    lambda lib: lib.testing.assert_close(1.0, 1.5),
    lambda lib: lib.testing.assert_close(1, 2),
    lambda lib: lib.testing.assert_close(lib.tensor([[1.0, float("nan")]]),
                                         lib.tensor([[1.0, float("nan")]])),
    lambda lib: lib.testing.assert_close(lib.tensor([0.0, 1.0]), lib.tensor([1e-3, 1.0])),
    lambda lib: lib.testing.assert_close(lib.tensor([True, False]), lib.tensor([True, True])),
    lambda lib: lib.testing.assert_close(lib.tensor([1.0, 2.0]),
                                         lib.tensor([1.0, 3.0], dtype=lib.float64),
                                         check_dtype=False),
    lambda lib: lib.testing.assert_close(lib.tensor([1.0, 2.0], dtype=lib.float64),
                                         lib.tensor([1.0, 2.1], dtype=lib.float64)),
    lambda lib: lib.testing.assert_close([lib.tensor(1.0), lib.tensor([2.0])],
                                         [lib.tensor(1.0), lib.tensor([3.0])]),
    lambda lib: lib.testing.assert_close({"a": lib.tensor(1.0)}, {"a": lib.tensor(2.0)}),
    lambda lib: lib.testing.assert_close(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0, 3.0])),
    lambda lib: lib.testing.assert_close(lib.tensor([1.0]), lib.tensor([1.0], dtype=lib.float64)),
    lambda lib: lib.testing.assert_close(lib.tensor([1.0]), lib.tensor([2.0]), msg="custom"),
    lambda lib: lib.testing.assert_close(lib.tensor([1.0, 2.0]), lib.tensor([1.1, 2.0]),
                                         rtol=0.01, atol=0.05),
], ids=["float", "int", "0-d", "python float", "python int", "nan", "relative", "bool",
        "promoted", "float64", "sequence item", "mapping item", "shape", "dtype", "msg",
        "given tolerances"])
def test_assert_close_message_matches_torch(fn):
    assert _message(tg, fn) == _message(torch, fn)


def test_assert_close_passes_within_default_tolerances():
    tg.testing.assert_close(tg.tensor([1.0, 2.0]), tg.tensor([1.0 + 1e-6, 2.0]))
    tg.testing.assert_close(tg.tensor([1.0], dtype=tg.float16),
                            tg.tensor([1.0005], dtype=tg.float16))
    tg.testing.assert_close(tg.tensor([float("nan")]), tg.tensor([float("nan")]), equal_nan=True)
    tg.testing.assert_close(tg.tensor([1, 2]), np.array([1, 2]))
    with pytest.raises(AssertionError):
        tg.testing.assert_close(tg.tensor([1.0], dtype=tg.float64),
                                tg.tensor([1.0 + 1e-6], dtype=tg.float64))
    with pytest.raises(ValueError, match="no atol"):
        tg.testing.assert_close(tg.tensor(1.0), tg.tensor(1.0), rtol=0.1)
    with pytest.raises(TypeError):
        tg.testing.assert_close(tg.tensor([1.0]), [1.0])


@pytest.mark.parametrize("eq", ["i1->", "0...->...", "i_j->"])
def test_einsum_subscripts_must_be_letters(eq):
    with pytest.raises(RuntimeError, match="subscripts must be in \\[a-zA-Z\\]"):
        tg.einsum(eq, tg.ones(3, 3))


def test_isfinite_as_torch():
    torch = pytest.importorskip("torch")
    v = [1.0, float("inf"), -float("inf"), float("nan"), 0.0]
    np.testing.assert_array_equal(tg.isfinite(tg.tensor(v)).numpy(),
                                  torch.isfinite(torch.tensor(v)).numpy())
    assert tg.isfinite(tg.tensor([1, 2])).numpy().all()


# issue 22: cases PyTorch's OpInfo samples found wrong (the op table checks the values) -----

@pytest.mark.parametrize("value", [3.0, 0.0])
def test_nonzero_of_a_0d_tensor_as_torch(value):
    t, g = torch.tensor(value), tg.tensor(value)
    assert tuple(g.nonzero().shape) == tuple(t.nonzero().shape)
    assert [x.tolist() for x in g.nonzero(as_tuple=True)] == \
        [x.tolist() for x in t.nonzero(as_tuple=True)]


@pytest.mark.parametrize("args,kwargs", [
    ((10, (2, 3)), {}), ((2, 10, (4,)), {}), ((10,), {"size": (3,)}),
    ((10, torch.Size([2, 2])), {"dtype": "float32"})])
def test_randint_forms_as_torch(args, kwargs):
    def call(lib):
        kw = dict(kwargs)
        if "dtype" in kw:
            kw["dtype"] = getattr(lib, kw["dtype"])
        return lib.randint(*[tuple(a) if isinstance(a, torch.Size) else a for a in args], **kw)
    t, g = call(torch), call(tg)
    assert tuple(g.shape) == tuple(t.shape) and g.dtype.name == str(t.dtype).split(".")[-1]
    low = args[0] if len(args) == 3 else 0
    high = args[1] if len(args) == 3 else args[0]
    assert ((g >= low) & (g < high)).all()


def test_memory_formats_are_accepted_and_change_nothing():
    x = tg.arange(24.0).reshape(1, 2, 3, 4)
    for fmt in (tg.contiguous_format, tg.channels_last, tg.preserve_format):
        assert x.to(memory_format=fmt).equal(x)
        assert x.contiguous(memory_format=fmt).equal(x)
        assert x.float(memory_format=fmt).dtype is tg.float32
        assert x.double(memory_format=fmt).dtype is tg.float64
    assert x.to(tg.float64, memory_format=tg.channels_last).dtype is tg.float64
    assert repr(tg.channels_last) == repr(torch.channels_last) == "torch.channels_last"


def test_tensor_addmm_is_the_function():
    c, a, b = tg.ones(2, 2), tg.ones(2, 3), tg.ones(3, 2)
    assert c.addmm(a, b, beta=2, alpha=0.5).tolist() == [[3.5, 3.5], [3.5, 3.5]]
    # beta = 0 ignores input, NaN included, as PyTorch's
    nan = tg.full((2, 2), float("nan"))
    assert nan.addmm(a, b, beta=0).tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_div_rounding_mode_errors_as_torch():
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(torch.ones(2), 2, rounding_mode="round")
    with pytest.raises(RuntimeError, match="rounding_mode"):
        tg.div(tg.ones(2), 2, rounding_mode="round")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_and_floor_divide_are_pythons(dtype):
    """The quotient and remainder of Python's float // and % (fmod-based), not
    floor(a / b): exact where a / b rounds (1.0 // 0.001 is 999; -1e20 % 501 is 460 in
    float32)."""
    a = [1.0, -1.0, -1e20, 1e20, 7.5, -7.5, 5.0, -5.0, 0.0, 3.0]
    b = [0.001, 0.001, 501.0, -501.0, 0.1, 0.1, float("inf"), float("inf"), 2.0, 0.0]
    _, t_div, _, g_div = _both(lambda lib, x, y: lib.div(x, y, rounding_mode="floor"), a, b,
                               dtype=dtype)
    _same(t_div, g_div, exact=True)
    _, t_rem, _, g_rem = _both(lambda lib, x, y: x % y, a, b, dtype=dtype)
    _same(t_rem, g_rem, exact=True)
    if dtype == "float64":      # Python's floats are doubles
        assert g_div.tolist()[:6] == [x // y for x, y in zip(a[:6], b[:6])]


def test_sign_of_nan_is_zero_eager_and_compiled():
    x = tg.tensor([float("nan"), -2.0, 0.0, 3.0])
    assert tg.sign(x).tolist() == torch.sign(torch.tensor(x.tolist())).tolist() == \
        [0.0, -1.0, 0.0, 1.0]
    assert tg.compile(lambda t: tg.sign(t) * 2)(x).tolist() == [0.0, -2.0, 0.0, 2.0]
