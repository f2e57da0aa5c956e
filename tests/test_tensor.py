"""The tensor itself: creation, dtypes and promotion, repr, conversions, indexing, devices."""
import numpy as np
import pytest

import tracegrad as tg


def torch_or_skip():
    return pytest.importorskip("torch")


# creation ----------------------------------------------------------------------

def test_tensor_infers_pytorch_dtypes():
    assert tg.tensor([1.0, 2.0]).dtype is tg.float32
    assert tg.tensor([1, 2]).dtype is tg.int64
    assert tg.tensor([True, False]).dtype is tg.bool
    assert tg.tensor([1, 2.5]).dtype is tg.float32
    assert tg.tensor(np.zeros(3)).dtype is tg.float64          # NumPy's float64 is kept
    assert tg.tensor([[1, 2], [3, 4]], dtype=tg.float64).dtype is tg.float64
    assert tg.tensor(3.0).shape == ()


def test_creation_functions_shapes_and_values():
    assert tg.zeros(2, 3).shape == (2, 3) and tg.zeros((2, 3)).tolist() == [[0.0] * 3] * 2
    assert tg.ones(4, dtype=tg.int32).dtype is tg.int32
    assert tg.full((2,), 7).dtype is tg.int64 and tg.full((2,), 7.0).dtype is tg.float32
    assert tg.eye(3).tolist() == np.eye(3).tolist()
    assert tg.arange(5).tolist() == [0, 1, 2, 3, 4] and tg.arange(5).dtype is tg.int64
    assert tg.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert tg.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    x = tg.randn(3, 4)
    for like in (tg.zeros_like, tg.ones_like, tg.empty_like, tg.rand_like, tg.randn_like):
        y = like(x)
        assert y.shape == x.shape and y.dtype is x.dtype
    assert tg.full_like(x, 2).tolist() == [[2.0] * 4] * 3
    r = tg.randint(0, 10, (100,))
    assert r.dtype is tg.int64 and 0 <= r.min().item() and r.max().item() < 10
    u = tg.rand(1000)
    assert 0 <= u.min().item() and u.max().item() < 1
    assert tg.empty(2, 0).shape == (2, 0)
    with pytest.raises(RuntimeError, match="negative dimension"):
        tg.zeros(-1)


def test_manual_seed_makes_draws_repeatable():
    tg.manual_seed(123)
    a = tg.randn(5)
    tg.manual_seed(123)
    b = tg.randn(5)
    assert a.tolist() == b.tolist()
    g = tg.Generator().manual_seed(7)
    c = tg.rand(3, generator=g)
    assert c.tolist() == tg.rand(3, generator=tg.Generator().manual_seed(7)).tolist()


def test_from_numpy_and_as_tensor_share_memory():
    a = np.arange(4.0)
    t = tg.from_numpy(a)
    a[0] = 10
    assert t[0].item() == 10.0
    assert tg.as_tensor(a) is not None and tg.as_tensor(a)._data is a
    assert tg.tensor(a)._data is not a


def test_legacy_constructor():
    t = tg.Tensor([1, 2])
    assert t.dtype is tg.float32 and t.tolist() == [1.0, 2.0]
    assert tg.Tensor(2, 3).shape == (2, 3)
    assert tg.LongTensor([1, 2]).dtype is tg.int64
    assert tg.DoubleTensor(2).shape == (2,) and tg.DoubleTensor(2).dtype is tg.float64
    assert isinstance(tg.ones(2), tg.FloatTensor) and not isinstance(tg.ones(2), tg.LongTensor)


def test_requires_grad_only_for_floating_point():
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        tg.tensor([1, 2], requires_grad=True)
    assert tg.tensor([1.0], requires_grad=True).requires_grad


# promotion -------------------------------------------------------------------------

PROMOTION_CASES = [
    ("float32 * python float", lambda m: m.ones(2) * 2.5),
    ("int64 * python float", lambda m: m.ones(2, dtype=m.int64) * 2.5),
    ("int32 + int64 0-dim", lambda m: m.ones(2, dtype=m.int32) + m.tensor(3)),
    ("int32 + python int", lambda m: m.ones(2, dtype=m.int32) + 3),
    ("int32 + float64 0-dim", lambda m: m.ones(2, dtype=m.int32) + m.tensor(1.0,
                                                                             dtype=m.float64)),
    ("float16 + float64 0-dim", lambda m: m.ones(2, dtype=m.float16) + m.tensor(1.0,
                                                                                dtype=m.float64)),
    ("float16 + int64 tensor", lambda m: m.ones(2, dtype=m.float16) + m.ones(2, dtype=m.int64)),
    ("float32 + float64 tensor", lambda m: m.ones(2) + m.ones(2, dtype=m.float64)),
    ("bool + bool", lambda m: m.tensor([True]) + m.tensor([True])),
    ("bool + python int", lambda m: m.tensor([True]) + 1),
    ("bool * python float", lambda m: m.tensor([True]) * 1.5),
    ("int / int", lambda m: m.tensor([1, 2]) / m.tensor([2, 2])),
    ("exp of int", lambda m: m.exp(m.tensor([1, 2]))),
    ("sum of int32", lambda m: m.ones(3, dtype=m.int32).sum()),
    ("sum of bool", lambda m: m.tensor([True, True]).sum()),
    ("comparison", lambda m: m.ones(2) > 0),
    ("float64 0-dim * float32 tensor", lambda m: m.tensor(2.0, dtype=m.float64) * m.ones(2)),
    ("int ** float", lambda m: m.tensor([1, 2]) ** 0.5),
    ("where int/float", lambda m: m.where(m.tensor([True, False]), m.tensor([1, 2]),
                                          m.tensor([0.5, 1.5]))),
    ("cat int32 and int64", lambda m: m.cat([m.ones(1, dtype=m.int32),
                                             m.ones(1, dtype=m.int64)])),
]


@pytest.mark.parametrize("name,make", PROMOTION_CASES, ids=[c[0] for c in PROMOTION_CASES])
def test_promotion_matches_pytorch(name, make):
    torch = torch_or_skip()
    ours, theirs = make(tg), make(torch)
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    # the cases' values are exact (small integers and halves) except a float32 exp or square
    # root, an ulp or two: the check is of dtypes and gross values, not of rounding
    np.testing.assert_allclose(np.asarray(ours.tolist(), dtype=np.float64),
                               np.asarray(theirs.tolist(), dtype=np.float64), rtol=1e-3)


def test_promotion_rules_without_pytorch():
    assert (tg.ones(2) * 2.5).dtype is tg.float32
    assert (tg.ones(2, dtype=tg.int64) * 2.5).dtype is tg.float32
    assert (tg.ones(2, dtype=tg.int32) + tg.tensor(3)).dtype is tg.int32
    assert (tg.ones(2, dtype=tg.int32) + tg.tensor(1.0, dtype=tg.float64)).dtype is tg.float64


# repr ------------------------------------------------------------------------------

REPR_CASES = [
    ("scalar int-valued float", lambda m: m.tensor(9.0)),
    ("scalar fraction", lambda m: m.tensor(0.7470499873161316)),
    ("vector", lambda m: m.tensor([1.0, 2.0])),
    ("matrix", lambda m: m.tensor([[5.0, 8.0], [11.0, 14.0]])),
    ("fractions", lambda m: m.tensor([[0.0255, 0.0777, 0.0249], [1.5, -2.25, 3.0]])),
    ("sci small", lambda m: m.tensor([1e-5, 1.0, 2.0])),
    ("sci large", lambda m: m.tensor([1e9, 1.0])),
    ("int64", lambda m: m.tensor([1, 2, 300])),
    ("int32", lambda m: m.tensor([1, -2], dtype=m.int32)),
    ("float64", lambda m: m.tensor([1.5, 2.0], dtype=m.float64)),
    ("bool", lambda m: m.tensor([True, False])),
    ("nan inf", lambda m: m.tensor([float("nan"), float("inf"), 1.0])),
    ("nan inf fraction", lambda m: m.tensor([float("nan"), -float("inf"), 1.25])),
    ("empty", lambda m: m.tensor([])),
    ("empty 2d", lambda m: m.zeros(0, 3)),
    ("empty int", lambda m: m.zeros(0, dtype=m.int64)),
    ("3d", lambda m: m.arange(24).reshape(2, 3, 4)),
    ("long row wraps", lambda m: m.arange(40, dtype=m.float32) / 7),
    ("summarized", lambda m: m.arange(2000).reshape(40, 50)),
    ("summarized float", lambda m: (m.arange(3000, dtype=m.float64) / 3)),
    ("requires grad", lambda m: m.tensor([1.0], requires_grad=True)),
    ("grad_fn", lambda m: m.tensor([1.0, 2.0], requires_grad=True) * 2),
    ("float16", lambda m: m.tensor([1.5, 2.25], dtype=m.float16)),
    ("negative zero-dim", lambda m: m.tensor(-3.5)),
    ("all zeros", lambda m: m.zeros(2, 2)),
    ("float64 grad", lambda m: m.ones(3, dtype=m.float64, requires_grad=True).sum()),
]


@pytest.mark.parametrize("name,make", REPR_CASES, ids=[c[0] for c in REPR_CASES])
def test_repr_matches_pytorch(name, make):
    torch = torch_or_skip()
    expected = repr(make(torch)).replace("torch.", "tracegrad.")
    assert repr(make(tg)) == expected


def test_repr_without_pytorch():
    assert repr(tg.tensor(9.0)) == "tensor(9.)"
    assert repr(tg.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    x = tg.tensor(2.0, requires_grad=True)
    assert repr(x ** 3 + 1) == "tensor(9., grad_fn=<AddBackward0>)"
    assert repr(tg.tensor([[5.0, 8.0], [11.0, 14.0]])) == \
        "tensor([[ 5.,  8.],\n        [11., 14.]])"
    assert repr(tg.tensor([1, 2], dtype=tg.int32)) == "tensor([1, 2], dtype=tracegrad.int32)"


def test_format_of_zero_dim_tensor_is_its_value():
    loss = tg.tensor(0.7470499873161316)
    assert f"{loss}" == f"{np.float32(0.7470499873161316).item()}"
    assert f"{loss:.3f}" == "0.747"


# conversions and attributes --------------------------------------------------------

def test_conversions():
    t = tg.tensor([[1.5, 2.5]])
    assert t.item if t.numel() > 1 else True
    assert tg.tensor([3.5]).item() == 3.5
    assert t.tolist() == [[1.5, 2.5]]
    assert t.numpy().dtype == np.float32
    assert t.double().dtype is tg.float64 and t.long().dtype is tg.int64
    assert t.long().tolist() == [[1, 2]]
    assert float(tg.tensor(2.5)) == 2.5 and int(tg.tensor(3)) == 3
    assert t.to(tg.float64).dtype is tg.float64
    assert t.size() == (1, 2) and t.size(1) == 2 and t.dim() == 2 and t.numel() == 2
    assert t.ndim == 2 and len(t) == 1 and t.shape == tg.Size([1, 2])
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        t.item()
    with pytest.raises(RuntimeError, match="numpy"):
        tg.tensor([1.0], requires_grad=True).numpy()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(tg.ones(2))


def test_to_dtype_is_differentiable():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x.double() * 3
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "ToCopyBackward0"
    y.sum().backward()
    assert x.grad.dtype is tg.float32 and x.grad.tolist() == [3.0, 3.0]


def test_device_cpu_and_cuda_error():
    t = tg.ones(2)
    assert str(t.device) == "cpu" and t.device == tg.device("cpu")
    assert t.cpu() is t
    if not tg.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            tg.ones(2, device="cuda")
        with pytest.raises(RuntimeError, match="cuda"):
            t.to("cuda")


# indexing ----------------------------------------------------------------------

INDEX_CASES = [
    ("int", lambda: 1),
    ("negative int", lambda: -1),
    ("slice", lambda: slice(1, 3)),
    ("step slice", lambda: (slice(None), slice(None, None, 2))),
    ("tuple", lambda: (1, 2)),
    ("none and ellipsis", lambda: (None, Ellipsis, 1)),
    ("int array", lambda: ([0, 2, 2],)),
    ("two int arrays", lambda: ([0, 1], [2, 3])),
    ("bool mask", lambda: (np.array([True, False, True]),)),
    ("array and slice", lambda: (slice(None), [3, 0])),
]


def _key_for(lib, key):
    if not isinstance(key, tuple):
        return key
    out = []
    for k in key:
        if isinstance(k, (list, np.ndarray)):
            out.append(lib.tensor(np.asarray(k)))
        else:
            out.append(k)
    return tuple(out)


@pytest.mark.parametrize("name,make_key", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_getitem_matches_numpy_and_backward(name, make_key):
    data = np.arange(12.0).reshape(3, 4)
    x = tg.tensor(data, requires_grad=True)
    key = make_key()
    y = x[_key_for(tg, key)]
    np_key = tuple(np.asarray(k) if isinstance(k, list) else k for k in key) \
        if isinstance(key, tuple) else key
    # indexing copies values, and the gradient sums ones a few times: both exact
    np.testing.assert_array_equal(y.detach().numpy(), data[np_key])
    y.sum().backward()
    expected = np.zeros_like(data)
    np.add.at(expected, np_key, 1.0)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_setitem_in_place_and_versions():
    x = tg.zeros(3, 4)
    v0 = x._version
    x[1] = 5.0
    x[:, 0] = tg.tensor([1.0, 2.0, 3.0])
    x[tg.tensor([0, 2]), 3] = 9.0
    x[x > 8] = -1.0
    expected = np.zeros((3, 4), np.float32)
    expected[1] = 5
    expected[:, 0] = [1, 2, 3]
    expected[[0, 2], 3] = 9
    expected[expected > 8] = -1
    np.testing.assert_array_equal(x.numpy(), expected)     # written constants: exact
    assert x._version == v0 + 4


def test_views_share_storage_and_version():
    x = tg.arange(6.0).reshape(2, 3)
    v = x[0]
    t = x.t()
    x.add_(1)
    assert v.tolist() == [1.0, 2.0, 3.0] and t[0].tolist() == [1.0, 4.0]
    assert v._version == x._version == t._version == 1


def test_indexing_errors():
    x = tg.zeros(3)
    with pytest.raises(IndexError, match="out of bounds"):
        x[5]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(IndexError, match="tensors used as indices"):
        x[tg.tensor([0.0])]
