"""What the op table cannot say about ``scatter_reduce``/``index_reduce`` and the small names
PyTorch's OpInfo database knows (``put``, ``fill``, ``constant_pad_nd``, ``nonzero_static``,
``empty_strided``...): gradients at zeros and ties, integer dtypes, 0-d tensors, the in-place
forms and the errors, each checked against PyTorch 2.13.
"""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")

REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _np(t):
    return t.detach().numpy()


def _same(a, b):
    """Equal values, dtype names and shapes (NaN equal to NaN)."""
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)
    np.testing.assert_array_equal(_np(a), _np(b))


def _same_error(fn):
    """The same exception type in both libraries, tracegrad's message holding PyTorch's."""
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(type(want.value)) as got:
        fn(tg)
    first = str(want.value).splitlines()[0]
    assert first in str(got.value), f"{got.value!r} lacks {first!r}"


def _grads(fn, *values):
    """(output, input gradients) of ``fn(lib, *inputs)`` for float64 inputs, both libraries,
    for one fixed cotangent."""
    results = []
    for lib in (tg, torch):
        xs = [lib.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in values]
        out = fn(lib, *xs)
        g = np.random.default_rng(0).standard_normal(tuple(out.shape))
        grads = lib.autograd.grad(out, xs, lib.tensor(g), allow_unused=True)
        results.append((out, grads))
    (out, grads), (want_out, want_grads) = results
    np.testing.assert_allclose(_np(out), _np(want_out), rtol=1e-12)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-15)


# scatter_reduce ------------------------------------------------------------------------------

IDX = [[0, 1, 0], [2, 1, 0], [0, 1, 2], [1, 1, 2]]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", ["float32", "int64", "int32"])
def test_scatter_reduce_values(reduce, include_self, dtype):
    rng = np.random.default_rng(1)
    x, src = rng.integers(-9, 9, (4, 3)), rng.integers(-9, 9, (4, 3))
    want, got = (lib.tensor(x, dtype=getattr(lib, dtype)).scatter_reduce(
        0, lib.tensor(IDX), lib.tensor(src, dtype=getattr(lib, dtype)), reduce,
        include_self=include_self) for lib in (torch, tg))
    _same(got, want)        # int mean rounds down, as PyTorch's


def test_scatter_reduce_nan_propagates_through_amax_and_amin():
    for reduce in ("amax", "amin"):
        want, got = (lib.tensor([5., 7, 9]).scatter_reduce(
            0, lib.tensor([1, 1, 2]), lib.tensor([float("nan"), 1., 3.]), reduce)
            for lib in (torch, tg))
        _same(got, want)


@pytest.mark.parametrize("include_self", [True, False])
def test_prod_gradient_with_zeros(include_self):
    """Place 0 gets one zero from src (its gradient: the product of the others), place 1 two
    zeros (every gradient zero), place 2 a zero in self."""
    x = [2., 3., 0., 5.]
    src = [0., 4., 0., 0., 6., 7.]
    index = [0, 0, 1, 1, 2, 2]
    _grads(lambda lib, a, s: lib.scatter_reduce(a, 0, lib.tensor(index), s, "prod",
                                                include_self=include_self), x, src)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_ties_split_the_gradient_evenly(reduce, include_self):
    x = [[4., 1.], [2., 2.], [3., 9.]]
    src = [[4., 1.], [4., 2.], [1., 9.], [3., 2.]]
    index = [[0, 0], [0, 1], [2, 2], [2, 1]]
    _grads(lambda lib, a, s: lib.scatter_reduce(a, 0, lib.tensor(index), s, reduce,
                                                include_self=include_self), x, src)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_sum_and_mean_gradients_exclude_self(reduce):
    _grads(lambda lib, a, s: lib.scatter_reduce(a, 1, lib.tensor([[2, 2], [0, 3]]), s, reduce,
                                                include_self=False),
           [[1., 2., 3., 4.], [5., 6., 7., 8.]], [[1., 2.], [4., 5.]])


def test_scatter_reduce_0d_and_inplace():
    want, got = (lib.tensor(3.).scatter_reduce(0, lib.tensor(0), lib.tensor(5.), "prod")
                 for lib in (torch, tg))
    _same(got, want)
    for lib in (torch, tg):
        x = lib.tensor([1., 2., 3.])
        assert x.scatter_reduce_(0, lib.tensor([2, 2]), lib.tensor([7., 1.]), "amax") is x
    _same(x, torch.tensor([1., 2., 7.]))


def test_scatter_reduce_takes_the_old_names_max_and_min():
    _same(tg.tensor([5., 7.]).scatter_reduce(0, tg.tensor([1]), tg.tensor([9.]), "max"),
          torch.tensor([5., 9.]))


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(4).scatter_reduce(0, lib.tensor([4]), lib.ones(1), "sum"),
    lambda lib: lib.zeros(4).scatter_reduce(0, lib.tensor([-1]), lib.ones(1), "sum"),
    lambda lib: lib.zeros(4).scatter_reduce(0, lib.tensor([1]), lib.ones(1), "add"),
    lambda lib: lib.zeros(4).scatter_reduce(0, lib.tensor([1.]), lib.ones(1), "sum"),
    lambda lib: lib.zeros(4).scatter_reduce(0, lib.tensor([1]), lib.ones(1).double(), "sum"),
])
def test_scatter_reduce_errors(call):
    _same_error(call)


# index_reduce -------------------------------------------------------------------------------

@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES[1:])
def test_index_reduce_values_and_gradients(reduce, include_self):
    x = [[1., 0., 3., 4.], [2., 2., 5., 1.]]
    source = [[2., 0., 3., 3., 1.], [2., 1., 0., 2., 2.]]       # zeros and ties
    index = [1, 3, 1, 0, 1]
    _grads(lambda lib, a, s: lib.index_reduce(a, 1, lib.tensor(index), s, reduce,
                                              include_self=include_self), x, source)


def test_index_reduce_int_mean_0d_and_inplace():
    want, got = (lib.tensor([[7, -7], [1, 2]]).index_reduce(
        0, lib.tensor([0, 0]), lib.tensor([[0, 0], [1, 3]]), "mean") for lib in (torch, tg))
    _same(got, want)
    want, got = (lib.tensor(3.).index_reduce(0, lib.tensor(0), lib.tensor(5.), "prod")
                 for lib in (torch, tg))
    _same(got, want)
    x = tg.ones(2, 3)
    assert x.index_reduce_(1, tg.tensor([2]), tg.full((2, 1), 5.), "amin") is x
    _same(x, torch.tensor([[1., 1., 1.], [1., 1., 1.]]))


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(4).index_reduce(0, lib.tensor([1]), lib.ones(1), "sum"),
    lambda lib: lib.zeros(4).index_reduce(0, lib.tensor([-1]), lib.ones(1), "prod"),
    lambda lib: lib.zeros(4).index_reduce(0, lib.tensor([4]), lib.ones(1), "prod"),
    lambda lib: lib.zeros(4).index_reduce(0, lib.tensor([1, 2]), lib.ones(1), "prod"),
    lambda lib: lib.zeros(4).index_reduce(0, lib.tensor([1.]), lib.ones(1), "prod"),
    lambda lib: lib.zeros(4).index_reduce(0, lib.tensor([1]), lib.ones(1).double(), "prod"),
])
def test_index_reduce_errors(call):
    _same_error(call)


def test_scatter_reduce_compiles():
    fn = tg.compile(lambda a, s: a.scatter_reduce(1, tg.tensor([[1, 1], [0, 1]]), s, "mean",
                                                  include_self=False) * 2)
    a, s = tg.tensor([[1., 2.], [3., 4.]]), tg.tensor([[5., 6.], [7., 8.]])
    _same(fn(a, s), torch.tensor([[2., 11.], [14., 16.]]))


# put --------------------------------------------------------------------------------------

def test_put_accumulate_negative_and_gradients():
    index = [0, -1, 0, 5]
    _grads(lambda lib, a, v: lib.put(a, lib.tensor(index), v, accumulate=True),
           np.arange(6.).reshape(2, 3), [9., 8., 7., 6.])
    _grads(lambda lib, a, v: a.put(lib.tensor([[1], [-2]]), v), np.arange(6.).reshape(2, 3),
           [[9., 8.]])
    for lib in (torch, tg):
        x = lib.zeros(2, 2)
        assert x.put_(lib.tensor([3]), lib.tensor([1.])) is x
    _same(x, torch.tensor([[0., 0.], [0., 1.]]))


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(2, 3).put(lib.tensor([6]), lib.ones(1)),
    lambda lib: lib.zeros(2, 3).put(lib.tensor([-7]), lib.ones(1)),
    lambda lib: lib.zeros(2, 3).put(lib.tensor([1, 2]), lib.ones(1)),
    lambda lib: lib.zeros(2, 3).put(lib.tensor([1.]), lib.ones(1)),
    lambda lib: lib.zeros(2, 3).put(lib.tensor([1]), lib.ones(1).double()),
])
def test_put_errors(call):
    _same_error(call)


# the small names ----------------------------------------------------------------------------

def test_fill_is_out_of_place_and_casts():
    for lib in (torch, tg):
        x = lib.tensor([1, 2])
        _same(lib.fill(x, 2.7), torch.tensor([2, 2]))
        _same(x, torch.tensor([1, 2]))
    _grads(lambda lib, a, v: lib.fill(a, v[0]), [[1., 2.], [3., 4.]], [5.])
    _same_error(lambda lib: lib.fill(lib.zeros(2), lib.ones(1)))


def test_unsafe_chunk_and_split():
    for fn in (lambda lib, x: lib.unsafe_chunk(x, 3, 1), lambda lib, x: x.unsafe_chunk(2),
               lambda lib, x: lib.unsafe_split(x, 2, 1), lambda lib, x: x.unsafe_split(1)):
        want, got = (fn(lib, lib.arange(14.).reshape(2, 7)) for lib in (torch, tg))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    with pytest.raises(TypeError, match="'split_size' must be int, not list"):
        tg.unsafe_split(tg.zeros(4), [1, 3])


def test_constant_pad_nd():
    _grads(lambda lib, a: lib.constant_pad_nd(a, [1, -1, 2, 0], 0.5),
           np.arange(12.).reshape(3, 4))
    _same_error(lambda lib: lib.constant_pad_nd(lib.zeros(2, 3), [1, 2, 3]))
    with pytest.raises(RuntimeError, match="Length of pad should be no more than twice"):
        tg.constant_pad_nd(tg.zeros(2, 3), [1] * 6)


def test_rdiv_and_rmod():
    for fn in (lambda lib, x: x.__rdiv__(2.5), lambda lib, x: x.__rmod__(4),
               lambda lib, x: 4 % x):
        want, got = (fn(lib, lib.tensor([[-1.5, 2.], [0., 3.]])) for lib in (torch, tg))
        _same(got, want)
    _grads(lambda lib, a: a.__rdiv__(2.5), [[1., -2.], [4., 0.5]])


@pytest.mark.parametrize("size, fill_value", [(0, -1), (2, -1), (6, -1), (6, 9)])
def test_nonzero_static(size, fill_value):
    want, got = (lib.nonzero_static(lib.tensor([[0, 1, 2], [3, 0, 0]]), size=size,
                                    fill_value=fill_value) for lib in (torch, tg))
    _same(got, want)
    want, got = (lib.tensor([0., 1.5, 0, 2]).nonzero_static(size=3) for lib in (torch, tg))
    _same(got, want)
    _same_error(lambda lib: lib.nonzero_static(lib.ones(3), size=-1))


def test_nonzero_static_compiles_without_a_graph_break():
    fn = tg.compile(lambda x: tg.nonzero_static(x > 0, size=3) + 1, fullgraph=True)
    _same(fn(tg.tensor([0., 2., -1., 5.])), torch.tensor([[2], [4], [0]]))


@pytest.mark.parametrize("size, stride", [((2, 3), (1, 2)), ((2, 3, 4), (12, 1, 3)),
                                          ((2, 3), (3, 1)), ((), ())])
def test_empty_strided_keeps_a_dense_stride(size, stride):
    for lib in (torch, tg):
        t = lib.empty_strided(size, stride, dtype=lib.float64)
        assert tuple(t.shape) == size and t.stride() == stride and t.dtype == lib.float64
    t = tg.zeros(1, dtype=tg.int32).new_empty_strided(size, stride)
    assert t.stride() == stride and t.dtype == tg.int32


def test_empty_strided_otherwise_contiguous():
    t = tg.empty_strided((2, 3), (5, 1), requires_grad=True)
    assert tuple(t.shape) == (2, 3) and t.stride() == (3, 1) and t.requires_grad
    _same_error(lambda lib: lib.empty_strided((2, 3), (1,)))
