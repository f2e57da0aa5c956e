"""What the op table cannot say about ``ops/pointwise_more.py`` and ``ops/index_more.py``:
gradients at ties and NaN, integer ops and dtypes, frexp's two outputs, the in-place rules
(version counter, leaves, casts, views, the history PyTorch keeps or cuts), the small
``Tensor`` methods, and the errors for bad input, each checked against PyTorch 2.13.
"""
import math
import warnings

import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "cpu") else np.asarray(t)


def _same(a, b):
    """Equal values, dtype names and shapes (NaN equal to NaN)."""
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)
    np.testing.assert_array_equal(_np(a), _np(b))


def _both(fn):
    """``fn(lib)`` for tracegrad and PyTorch."""
    return fn(tg), fn(torch)


def _same_error(fn):
    """``fn`` raises the same exception type in both libraries, tracegrad's message holding
    PyTorch's first line."""
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(type(want.value)) as got:
        fn(tg)
    first = str(want.value).splitlines()[0]
    assert first in str(got.value), f"{got.value!r} lacks {first!r}"


def _grads(fn, values, dtype="float64", backward=True):
    """Outputs and input gradients of ``fn(lib, *inputs)`` in both libraries (a fixed
    weighting of the outputs; ``backward=False``: the outputs only)."""
    out = []
    for lib in (tg, torch):
        xs = [lib.tensor(v, dtype=getattr(lib, dtype), requires_grad=True) for v in values]
        y = fn(lib, *xs)
        w = lib.tensor(np.linspace(0.5, 1.5, int(np.prod(y.shape))).reshape(tuple(y.shape)),
                       dtype=y.dtype)
        if backward:
            (y * w).sum().backward()
        out.append((y, [x.grad for x in xs]))
    (ty, tgs), (py, pgs) = out
    assert str(ty.dtype).split(".")[-1] == str(py.dtype).split(".")[-1]
    np.testing.assert_allclose(_np(ty), _np(py), rtol=1e-12, atol=1e-300)
    for a, b in zip(tgs, pgs):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, atol=0)


# fmax / fmin --------------------------------------------------------------------------------

NAN = float("nan")


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_ties_and_nan_gradients_match_torch(name):
    a = [1.0, 2.0, NAN, NAN, -1.0, 0.0]
    b = [1.0, 1.0, 3.0, NAN, NAN, -0.0]
    _grads(lambda lib, x, y: getattr(lib, name)(x, y), [a, b])


def test_fmax_integer_and_mixed_dtypes():
    for args in (lambda lib: (lib.tensor([1, 5]), lib.tensor([3, 2])),
                 lambda lib: (lib.tensor([1, 2]), lib.tensor([1.5, 2.0])),
                 lambda lib: (lib.tensor([1, 2], dtype=lib.int8), lib.tensor(3))):
        _same(*_both(lambda lib: lib.fmax(*args(lib))))
        _same(*_both(lambda lib: lib.fmin(*args(lib))))


# integers -------------------------------------------------------------------------------------

def test_gcd_lcm_values_and_promotion():
    a = [4, -6, 0, 0, 15, -7]
    b = [6, 4, 0, 5, -10, 7]
    _same(*_both(lambda lib: lib.gcd(lib.tensor(a), lib.tensor(b))))
    _same(*_both(lambda lib: lib.lcm(lib.tensor(a), lib.tensor(b))))
    _same(*_both(lambda lib: lib.gcd(lib.tensor(a, dtype=lib.int8), lib.tensor([6]))))
    _same(*_both(lambda lib: lib.tensor(a, dtype=lib.int32).lcm(lib.tensor(b,
                                                                           dtype=lib.int16))))


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm_refuse_floats_and_bools(name):
    _same_error(lambda lib: getattr(lib, name)(lib.tensor([1.0]), lib.tensor([2.0])))
    _same_error(lambda lib: getattr(lib, name)(lib.tensor([True]), lib.tensor([True])))


def test_gcd_inplace_keeps_the_integer_tensor():
    t, p = _both(lambda lib: lib.tensor([4, 9]))
    assert t.gcd_(tg.tensor([6, 3])) is t
    p.gcd_(torch.tensor([6, 3]))
    _same(t, p)
    assert t._version == p._version == 1


def test_bitwise_inplace_on_ints_and_bools():
    for name in ("bitwise_and_", "bitwise_or_", "bitwise_xor_"):
        t, p = _both(lambda lib: lib.tensor([12, 5, -3]))
        getattr(t, name)(tg.tensor([10, 3, 7]))
        getattr(p, name)(torch.tensor([10, 3, 7]))
        _same(t, p)
    t, p = _both(lambda lib: lib.tensor([True, False]))
    t.bitwise_not_()
    p.bitwise_not_()
    _same(t, p)
    # core.inplace names the dtype Int64 where PyTorch says Long: the type and the rest match
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Bool"):
        tg.tensor([True, False]).bitwise_and_(tg.tensor([1, 2]))


def test_logical_xor_and_inplace_logical_forms():
    _same(*_both(lambda lib: lib.logical_xor(lib.tensor([1, 0, 2]), lib.tensor([1.0, 1.0, 0.0]))))
    for name in ("logical_and_", "logical_or_", "logical_xor_"):
        t, p = _both(lambda lib: lib.tensor([1.0, 0.0, 2.0, 0.0]))
        getattr(t, name)(tg.tensor([1, 1, 0, 0]))
        getattr(p, name)(torch.tensor([1, 1, 0, 0]))
        _same(t, p)
    t, p = _both(lambda lib: lib.tensor([3, 0]))
    t.logical_not_()
    p.logical_not_()
    _same(t, p)


def test_inplace_logical_keeps_the_history_as_torch():
    """PyTorch records no node for logical_*_: the old history (here x * 2) stays."""
    def run(lib):
        a = lib.tensor([1.0, 2.0, 0.0], requires_grad=True)
        x = a * 2
        x.logical_and_(lib.tensor([1.0, 0.0, 1.0]))
        x.sum().backward()
        return a.grad, x
    (tg_grad, tx), (pt_grad, px) = _both(run)
    _same(tg_grad, pt_grad)
    _same(tx.detach(), px.detach())


def test_inplace_comparison_cuts_the_history_with_zero_gradients():
    def run(lib):
        a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = lib.tensor([1.0, 0.0, 3.0], requires_grad=True)
        x = a * 1
        assert x.eq_(b) is x
        (x * 3).sum().backward()
        return x.detach(), a.grad, b.grad
    for t, p in zip(*_both(run)):
        _same(t, p)


def test_inplace_comparison_writes_in_self_dtype():
    for name in ("eq_", "ne_", "lt_", "le_", "gt_", "ge_", "greater_", "greater_equal_",
                 "less_", "less_equal_", "not_equal_"):
        t, p = _both(lambda lib: lib.tensor([1, 2, 3]))
        getattr(t, name)(tg.tensor([1.5, 2.0, 0.0]))
        getattr(p, name)(torch.tensor([1.5, 2.0, 0.0]))
        _same(t, p)
        t, p = _both(lambda lib: lib.tensor([1.0, 2.0]))
        getattr(t, name)(2)
        getattr(p, name)(2)
        _same(t, p)


# heaviside, nextafter, ldexp, frexp, isposinf... ----------------------------------------------

def test_heaviside_values_nan_and_dtypes():
    _same(*_both(lambda lib: lib.heaviside(lib.tensor([-1.0, 0.0, 2.0, NAN, -0.0]),
                                           lib.tensor([0.5]))))
    _same(*_both(lambda lib: lib.tensor([1, 0, -1]).heaviside(lib.tensor(5))))
    _same_error(lambda lib: lib.heaviside(lib.tensor([1.0]), lib.tensor([1.0],
                                                                         dtype=lib.float64)))
    t, p = _both(lambda lib: lib.tensor([-2.0, 0.0, 3.0]))
    t.heaviside_(tg.tensor(0.25))
    p.heaviside_(torch.tensor(0.25))
    _same(t, p)


def test_nextafter_values_and_integer_error():
    _same(*_both(lambda lib: lib.nextafter(lib.tensor([1.0, 0.0, -1.0]),
                                           lib.tensor([2.0, -1.0, -1.0]))))
    _same(*_both(lambda lib: lib.nextafter(lib.tensor([1.0]), lib.tensor([2.0],
                                                                          dtype=lib.float64))))
    _same_error(lambda lib: lib.nextafter(lib.tensor([1, 2]), lib.tensor([3, 4])))


def test_ldexp_dtypes():
    _same(*_both(lambda lib: lib.ldexp(lib.tensor([1, 2]), lib.tensor([3, 4]))))
    _same(*_both(lambda lib: lib.ldexp(lib.tensor([1.0, 3.0]).half(), lib.tensor([3, -1]))))
    _same(*_both(lambda lib: lib.ldexp(lib.tensor([1.0], dtype=lib.float64), lib.tensor([-3]))))


def test_frexp_outputs_dtypes_and_special_values():
    x = [1.0, 3.0, -0.375, 0.0, 1e-40, 2.0 ** 100, math.inf, NAN]
    (tm, te), (pm, pe) = _both(lambda lib: lib.frexp(lib.tensor(x)))
    _same(tm, pm)
    _same(te, pe)
    assert te.dtype is tg.int32
    t = tg.tensor(x).frexp()
    assert t.mantissa is not None and t.exponent.dtype is tg.int32
    _same_error(lambda lib: lib.frexp(lib.tensor([1, 2])))


def test_frexp_mantissa_gradient_matches_torch():
    _grads(lambda lib, x: lib.frexp(x)[0], [[0.3, 1.5, -6.0, 100.0]])


def test_inf_and_real_tests_on_ints_and_floats():
    for name in ("isposinf", "isneginf", "isreal"):
        _same(*_both(lambda lib: getattr(lib, name)(lib.tensor([1.0, math.inf, -math.inf, NAN]))))
        _same(*_both(lambda lib: getattr(lib.tensor([1, 2]), name)()))


# dist, cross, diagflat -------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0, 1, 2, 3.5, math.inf, -math.inf])
def test_dist_values_and_gradient_at_zero(p):
    # PyTorch's dist backward for p=0 fails (an undefined tensor); its value is compared
    _grads(lambda lib, a, b: lib.dist(a, b, p), [[1.0, 2.0, 3.0], [1.0, 0.5, -1.0]],
           backward=p != 0)


def test_dist_promotes_integers():
    _same(*_both(lambda lib: lib.dist(lib.tensor([1, 2]), lib.tensor([1.5, 2.0]))))


def test_cross_default_dim_warns_and_takes_the_first_size_3():
    a, b = np.arange(18.0).reshape(3, 2, 3), np.ones((3, 2, 3))
    with pytest.warns(UserWarning, match="without specifying the dim"):
        got = tg.cross(tg.tensor(a), tg.tensor(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.cross(torch.tensor(a), torch.tensor(b))
    _same(got, want)


def test_cross_errors():
    _same_error(lambda lib: lib.cross(lib.ones(2, 3), lib.ones(3), dim=-1))
    _same_error(lambda lib: lib.cross(lib.ones(2, 4), lib.ones(2, 4), dim=-1))
    _same_error(lambda lib: lib.cross(lib.ones(2, 3), lib.ones(2, 3), dim=0))
    _same_error(lambda lib: lib.linalg.cross(lib.ones(2, 4), lib.ones(2, 4)))


def test_linalg_cross_refuses_different_ndims():
    _same_error(lambda lib: lib.linalg.cross(lib.ones(2, 3), lib.ones(3)))


def test_cross_integers():
    _same(*_both(lambda lib: lib.linalg.cross(lib.tensor([[1, 2, 3]]), lib.tensor([[4, 5, 6]]))))


def test_diagflat_matches_torch():
    for offset in (0, 2, -1):
        _same(*_both(lambda lib: lib.diagflat(lib.arange(6).reshape(2, 3), offset)))


# in-place rules ---------------------------------------------------------------------------------

BINARY_INPLACE = ["atan2_", "arctan2_", "copysign_", "hypot_", "fmod_", "remainder_",
                  "floor_divide_", "multiply_", "subtract_", "divide_", "true_divide_"]
UNARY_INPLACE = ["absolute_", "erf_", "expm1_", "log1p_", "square_", "negative_", "trunc_",
                 "sign_", "rsqrt_"]


@pytest.mark.parametrize("name", BINARY_INPLACE)
def test_binary_inplace_values_version_and_identity(name):
    t, p = _both(lambda lib: lib.tensor([[1.5, -2.0, 3.25]]))
    assert getattr(t, name)(tg.tensor([0.5, 1.5, -2.0])) is t
    getattr(p, name)(torch.tensor([0.5, 1.5, -2.0]))
    np.testing.assert_allclose(_np(t), _np(p), rtol=1e-6)
    assert t._version == p._version == 1


@pytest.mark.parametrize("name", BINARY_INPLACE + UNARY_INPLACE)
def test_inplace_on_a_leaf_requiring_grad_fails(name):
    def call(lib):
        args = () if name in UNARY_INPLACE else (lib.tensor(1.5),)
        getattr(lib.tensor([1.0, 2.0], requires_grad=True), name)(*args)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        call(tg)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        call(torch)


@pytest.mark.parametrize("name", ["atan2_", "copysign_", "erf_", "expm1_", "log1p_", "rsqrt_",
                                  "true_divide_", "divide_", "ldexp_"])
def test_float_result_into_an_integer_tensor_fails(name):
    if name in UNARY_INPLACE + ["erf_", "expm1_", "log1p_"]:
        def call(lib):
            getattr(lib.tensor([1, 2]), name)()
    else:
        def call(lib):
            getattr(lib.tensor([1, 2]), name)(lib.tensor([2, 2]))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        call(tg)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        call(torch)


def test_inplace_result_must_keep_the_shape():
    for name in ("atan2_", "eq_", "lerp_"):
        args = (tg.ones(2, 3),) + ((0.5,) if name == "lerp_" else ())
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            getattr(tg.ones(3), name)(*args)


def test_inplace_through_a_view_reaches_the_base_and_its_gradient():
    def run(lib):
        a = lib.tensor([[0.5, -1.0, 2.0], [1.5, 3.0, -0.25]], requires_grad=True)
        base = a * 1
        row = base[0]
        row.atan2_(lib.tensor([1.0, 2.0, -1.0]))
        base.lerp_(lib.ones(2, 3), 0.25)
        (base * base).sum().backward()
        return base.detach(), a.grad, base._version
    (tb, tgr, tv), (pb, pgr, pv) = _both(run)
    np.testing.assert_allclose(_np(tb), _np(pb), rtol=1e-6)
    np.testing.assert_allclose(_np(tgr), _np(pgr), rtol=1e-6)
    assert tv == pv


@pytest.mark.parametrize("name,args", [
    ("lerp_", lambda lib: (lib.tensor([2.0, 0.0]), 0.3)),
    ("cumsum_", lambda lib: (0,)), ("cumprod_", lambda lib: (0,)), ("square_", lambda lib: ()),
    ("clip_", lambda lib: (-1.0, 0.8)), ("addmv_", lambda lib: (lib.ones(2, 2), lib.ones(2))),
    ("addr_", lambda lib: (lib.ones(2), lib.tensor([1.0, -1.0]))),
])
def test_composite_inplace_gradients_match_torch(name, args):
    """The composite's saved tensors are never the overwritten target (no version error)."""
    def fn(lib, a):
        x = a * 1
        getattr(x, name)(*(v.double() if hasattr(v, "double") else v for v in args(lib)))
        return x * x if name != "addr_" else x
    _grads(fn, [[0.5, 1.5]] if name != "addr_" else [[[0.5, 1.5], [2.0, -1.0]]])


def test_matrix_inplace_forms_match_torch():
    rng = np.random.default_rng(0)
    c, m1, m2 = (rng.standard_normal(s) for s in ((2, 4), (2, 3), (3, 4)))
    b1, b2 = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 3, 4))
    _grads(lambda lib, c, a, b: (c * 1).addmm_(a, b, beta=0.5, alpha=2.0), [c, m1, m2])
    _grads(lambda lib, c, a, b: (c * 1).addbmm_(a, b, beta=2.0), [c, b1, b2])
    _grads(lambda lib, c, a, b: (c * 1).baddbmm_(a, b, alpha=0.5),
           [np.broadcast_to(c, (5, 2, 4)).copy(), b1, b2])


def test_cumsum_inplace_dtype_argument():
    t, p = _both(lambda lib: lib.tensor([1.0, 2.0, 3.0]))
    t.cumsum_(0, dtype=tg.float32)
    p.cumsum_(0, dtype=torch.float32)
    _same(t, p)
    _same_error(lambda lib: lib.tensor([1.0, 2.0]).cumsum_(0, dtype=lib.float64))
    _same_error(lambda lib: lib.tensor([1, 2]).cumprod_(0, dtype=lib.float32))


# aliases and small methods -----------------------------------------------------------------------

def test_alias_methods():
    a = [[1.5, -2.0], [3.0, 0.5]]
    calls = [lambda x, lib: x.divide(lib.tensor(2.0), rounding_mode="floor"),
             lambda x, lib: x.multiply(3), lambda x, lib: x.subtract(1, alpha=2),
             lambda x, lib: x.greater(0.5), lambda x, lib: x.greater_equal(0.5),
             lambda x, lib: x.less(0.5), lambda x, lib: x.less_equal(0.5),
             lambda x, lib: x.not_equal(0.5), lambda x, lib: x.absolute(),
             lambda x, lib: x.clip(min=0.0), lambda x, lib: x.moveaxis(0, 1),
             lambda x, lib: lib.moveaxis(x, 1, 0), lambda x, lib: x.adjoint(),
             lambda x, lib: x.mH, lambda x, lib: x.H, lambda x, lib: x.byte(),
             lambda x, lib: x.char(), lambda x, lib: x.clone().clip_(max=1.0),
             lambda x, lib: x.clone().divide_(2.0, rounding_mode="trunc")]
    for call in calls:
        _same(*_both(lambda lib: call(lib.tensor(a), lib)))


def test_small_methods():
    x, p = _both(lambda lib: lib.ones(2, 3))
    assert x.itemsize == p.itemsize == 4
    assert tg.ones(2, dtype=tg.float64).itemsize == 8
    assert x.get_device() == p.get_device() == -1
    assert x.is_same_size(tg.zeros(2, 3)) and not x.is_same_size(tg.zeros(3, 2))
    assert tg.tensor([2.0]).is_nonzero() and not tg.tensor([[0]]).is_nonzero()
    _same_error(lambda lib: lib.ones(2).is_nonzero())
    _same_error(lambda lib: lib.ones(0).is_nonzero())
    _same_error(lambda lib: lib.ones(2, 3, 4).H)
    _same_error(lambda lib: lib.ones(3).H)
    _same_error(lambda lib: lib.ones(3).mH)
    _same_error(lambda lib: lib.ones(3).adjoint())


def test_adjoint_is_a_view():
    x = tg.zeros(2, 3)
    x.mH[0, 1] = 5.0
    assert x[1, 0].item() == 5.0


def test_fill_diagonal_matches_torch_and_its_errors():
    for shape, wrap in (((3, 4), False), ((7, 3), True), ((7, 3), False), ((3, 3, 3), False)):
        t, p = _both(lambda lib: lib.zeros(*shape))
        assert t.fill_diagonal_(2.5, wrap=wrap) is t
        p.fill_diagonal_(2.5, wrap=wrap)
        _same(t, p)
        assert t._version == 1
    _same_error(lambda lib: lib.zeros(3).fill_diagonal_(1))
    _same_error(lambda lib: lib.zeros(3, 4, 3).fill_diagonal_(1))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        tg.zeros(2, 2, requires_grad=True).fill_diagonal_(1.0)


def test_fill_diagonal_gradient_is_zero_on_the_diagonal():
    _grads(lambda lib, a: (a * 1).fill_diagonal_(3.0), [np.arange(6.0).reshape(2, 3)])


# indexing ---------------------------------------------------------------------------------------

def test_take_and_select_errors():
    _same_error(lambda lib: lib.take(lib.ones(3), lib.tensor([5])))
    _same_error(lambda lib: lib.take(lib.ones(3), lib.tensor([1.0])))
    _same_error(lambda lib: lib.ones(3).select(0, 5))
    _same_error(lambda lib: lib.tensor(1.0).select(0, 0))


def test_take_gradient_accumulates_repeats():
    _grads(lambda lib, a: lib.take(a, lib.tensor([[0, 3, 3], [-1, 0, 2]])),
           [[[1.0, 2.0], [3.0, 4.0]]])


def test_select_is_a_view():
    x = tg.zeros(2, 3)
    x.select(1, 2).fill_(4.0)
    assert x[:, 2].tolist() == [4.0, 4.0]


def test_scatter_family_shape_errors():
    _same_error(lambda lib: lib.select_scatter(lib.zeros(2, 3), lib.ones(3), 1, 0))
    _same_error(lambda lib: lib.zeros(3, 3).slice_scatter(lib.ones(1, 3), 0, 0, 2))
    _same_error(lambda lib: lib.zeros(3, 3).diagonal_scatter(lib.ones(2), 0))


def test_select_scatter_casts_src_like_torch():
    _same(*_both(lambda lib: lib.zeros(3).select_scatter(lib.tensor(1.0, dtype=lib.float64),
                                                         0, 0)))


def test_index_add_copy_put_errors():
    _same_error(lambda lib: lib.zeros(3).index_add(0, lib.tensor([0, 0]),
                                                   lib.ones(2, dtype=lib.float64)))
    _same_error(lambda lib: lib.zeros(3, 2).index_add(0, lib.tensor([0, 1]), lib.ones(3, 2)))
    _same_error(lambda lib: lib.zeros(3).index_add(0, lib.tensor([0.0, 1.0]), lib.ones(2)))
    _same_error(lambda lib: lib.zeros(3).index_add(0, lib.tensor([[0, 1]]), lib.ones(2)))
    _same_error(lambda lib: lib.zeros(3).index_add(0, lib.tensor([0, 5]), lib.ones(2)))
    _same_error(lambda lib: lib.zeros(3).index_copy(0, lib.tensor([0, 1]),
                                                    lib.ones(2, dtype=lib.float64)))
    _same_error(lambda lib: lib.zeros(3).index_copy(0, lib.tensor([0, 1]), lib.ones(3)))
    _same_error(lambda lib: lib.zeros(3).index_copy(0, lib.tensor([0.0, 1.0]), lib.ones(2)))
    _same_error(lambda lib: lib.zeros(3).index_copy(0, lib.tensor([0, 5]), lib.ones(2)))
    _same_error(lambda lib: lib.zeros(3).index_put((lib.tensor([0, 1]),),
                                                   lib.ones(2, dtype=lib.float64)))
    _same_error(lambda lib: lib.zeros(3, 2).index_put((None, lib.tensor([0])), lib.ones(1)))


def test_index_add_and_index_put_accumulate_gradients_match_torch():
    idx = [2, 0, 2, 2]
    _grads(lambda lib, a, s: a.index_add(0, lib.tensor(idx), s, alpha=1.5),
           [np.zeros((3, 2)), np.arange(8.0).reshape(4, 2)])
    _grads(lambda lib, a, v: a.index_put((lib.tensor(idx), lib.tensor([1, 0, 1, 1])), v,
                                         accumulate=True),
           [np.zeros((3, 2)), [1.0, 2.0, 3.0, 4.0]])
    _grads(lambda lib, a, s: a.index_copy(1, lib.tensor([1, 0]), s),
           [np.zeros((3, 2)), np.arange(6.0).reshape(3, 2)])


def test_index_add_and_copy_on_0d_tensors():
    _grads(lambda lib, a, s: a.index_add(0, lib.tensor(0), s, alpha=2.0), [1.0, 2.0])
    _grads(lambda lib, a, s: a.index_copy(0, lib.tensor([0]), s), [1.0, 2.0])
    _same(*_both(lambda lib: lib.zeros(3).index_copy(0, lib.tensor(1), lib.tensor(2.0))))


def test_index_add_on_integers():
    _same(*_both(lambda lib: lib.zeros(4, dtype=lib.int64).index_add(
        0, lib.tensor([1, 1, 3]), lib.tensor([5, 6, 7]), alpha=2)))


def test_index_inplace_forms_version_and_leaf():
    for name, args in (("index_add_", lambda lib: (0, lib.tensor([1]), lib.ones(1))),
                       ("index_copy_", lambda lib: (0, lib.tensor([1]), lib.ones(1))),
                       ("index_put_", lambda lib: ((lib.tensor([1]),), lib.ones(1))),
                       ("masked_scatter_", lambda lib: (lib.tensor([False, True, False]),
                                                        lib.ones(1)))):
        t, p = _both(lambda lib: lib.zeros(3))
        assert getattr(t, name)(*args(tg)) is t
        getattr(p, name)(*args(torch))
        _same(t, p)
        assert t._version == p._version == 1
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            getattr(tg.zeros(3, requires_grad=True), name)(*args(tg))


def test_masked_scatter_errors_and_gradients():
    _same_error(lambda lib: lib.zeros(3).masked_scatter(lib.tensor([True, True, True]),
                                                        lib.ones(2)))
    _same_error(lambda lib: lib.zeros(3).masked_scatter(lib.tensor([1, 0, 1]), lib.ones(2)))
    _same_error(lambda lib: lib.zeros(3).masked_scatter(lib.tensor([True, False, True]),
                                                        lib.ones(2, dtype=lib.float64)))
    mask = [[True, False, True], [False, True, True]]
    _grads(lambda lib, a, s: a.masked_scatter(lib.tensor(mask), s),
           [np.zeros((2, 3)), np.arange(1.0, 7.0).reshape(2, 3)])
    _grads(lambda lib, a, s: a.masked_scatter(lib.tensor([True, False, True]), s),
           [np.zeros((2, 3)), np.arange(1.0, 6.0)])


def test_masked_scatter_compiles_without_a_graph_break():
    f = tg.compile(lambda a, m, s: a.masked_scatter(m, s) * 2)
    m = tg.tensor([True, False, True])
    for _ in range(2):
        out = f(tg.zeros(2, 3), m, tg.arange(1.0, 6.0))
    assert out.tolist() == [[2.0, 0.0, 4.0], [6.0, 0.0, 8.0]]
    assert f.stats["compiles"] == 1


def test_split_family_matches_torch_and_errors():
    cases = [lambda lib: lib.tensor_split(lib.arange(7), 3),
             lambda lib: lib.tensor_split(lib.arange(7), [1, 5, 9]),
             lambda lib: lib.tensor_split(lib.arange(7), lib.tensor(3)),
             lambda lib: lib.tensor_split(lib.arange(7), lib.tensor([2, 2])),
             lambda lib: lib.arange(12).reshape(3, 4).tensor_split(5, dim=1),
             lambda lib: lib.hsplit(lib.arange(12).reshape(3, 4), [1, 3]),
             lambda lib: lib.vsplit(lib.arange(12).reshape(3, 4), 3),
             lambda lib: lib.dsplit(lib.arange(12).reshape(1, 3, 4), 2)]
    for case in cases:
        got, want = _both(case)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    _same_error(lambda lib: lib.tensor_split(lib.arange(7), lib.tensor([1.0])))
    _same_error(lambda lib: lib.tensor_split(lib.arange(7), 0))
    _same_error(lambda lib: lib.hsplit(lib.zeros(3, 4), 3))
    _same_error(lambda lib: lib.vsplit(lib.arange(7), 1))
    _same_error(lambda lib: lib.dsplit(lib.zeros(2, 2), 1))


def test_tensor_split_parts_are_views():
    x = tg.zeros(6)
    tg.tensor_split(x, 3)[1].fill_(1.0)
    assert x.tolist() == [0, 0, 1, 1, 0, 0]


def test_unravel_index_matches_torch():
    for case in (lambda lib: lib.unravel_index(lib.tensor([5, -1, 7, 0]), (2, 3)),
                 lambda lib: lib.unravel_index(lib.tensor(4), (2, 3)),
                 lambda lib: lib.unravel_index(lib.tensor([5], dtype=lib.int32), (2, 3)),
                 lambda lib: lib.unravel_index(lib.tensor([[5, 23]]), (2, 3, 4)),
                 lambda lib: lib.unravel_index(lib.tensor([5]), 6)):
        got, want = _both(case)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    _same_error(lambda lib: lib.unravel_index(lib.tensor([5]), (2, -3)))
    with pytest.raises(TypeError, match="expected 'indices' to be integer dtype"):
        tg.unravel_index(tg.tensor([4.0]), (2, 3))


def test_narrow_copy_shares_no_storage():
    x = tg.arange(5.0)
    y = tg.narrow_copy(x, 0, 1, 2)
    y.fill_(9.0)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and y._base is None
