"""Indices outside an op's range are PyTorch's errors, never a silent read of another
element: a negative index where PyTorch takes none (gather, scatter, index_select,
index_add, index_copy, a class target), an index past the end (index_fill), a class past
``num_classes`` (one_hot); and where PyTorch counts a negative index from the end
(take_along_dim along a dim, index_fill), so does tracegrad. The user's tensor is
unchanged after the error."""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")

CASES = {
    "gather": lambda L, x, i: x.gather(0, i),
    "scatter": lambda L, x, i: x.scatter(0, i, L.ones(1)),
    "scatter value": lambda L, x, i: x.scatter(0, i, 2.0),
    "scatter_add": lambda L, x, i: x.scatter_add(0, i, L.ones(1)),
    "index_select": lambda L, x, i: x.index_select(0, i),
    "index_add": lambda L, x, i: x.index_add(0, i, L.ones(1)),
    "index_copy": lambda L, x, i: x.index_copy(0, i, L.ones(1)),
    "index_fill": lambda L, x, i: x.index_fill(0, i, 5.0),
    "take_along_dim": lambda L, x, i: L.take_along_dim(x, i),
    "nll_loss": lambda L, x, i: L.nn.functional.nll_loss(x.reshape(1, 3), i),
    "cross_entropy": lambda L, x, i: L.nn.functional.cross_entropy(x.reshape(1, 3), i),
    "one_hot": lambda L, x, i: L.nn.functional.one_hot(i, 3),
}


@pytest.mark.parametrize("index", [-1, 3, -4])
@pytest.mark.parametrize("op", sorted(CASES))
def test_an_index_out_of_range_is_torchs_error(op, index):
    outcome = []
    for L in (torch, tg):
        x = L.tensor([0.0, 1.0, 2.0])
        try:
            result = CASES[op](L, x, L.tensor([index]))
        except (IndexError, RuntimeError) as e:
            outcome.append(type(e))
        else:
            outcome.append(result.detach().numpy().tolist())
        assert x.tolist() == [0.0, 1.0, 2.0]
    if isinstance(outcome[0], type):     # torch refuses: tracegrad raises too
        assert isinstance(outcome[1], type), outcome
        assert issubclass(outcome[1], (IndexError, RuntimeError))
    else:
        np.testing.assert_allclose(outcome[1], outcome[0])


def test_take_along_dim_counts_negative_indices_from_the_end_along_a_dim():
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[-1], [0]])
    got = tg.take_along_dim(tg.tensor(x), tg.tensor(idx), dim=1)
    want = torch.take_along_dim(torch.tensor(x), torch.tensor(idx), dim=1)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_compiled_cross_entropy_target_out_of_range_is_refused():
    # on the first call (the trace) and on a later one (the compiled gather checks too)
    f = tg.compile(lambda x, t: tg.nn.functional.cross_entropy(x, t))
    x = tg.zeros(2, 3)
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        f(x, tg.tensor([-1, 1]))
    assert f(x, tg.tensor([-100, 1])).item() == pytest.approx(np.log(3))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        f(x, tg.tensor([-1, 1]))


def test_a_uint8_index_is_a_mask_as_torch():
    # PyTorch reads a uint8 tensor in a key as a boolean mask (with a deprecation warning)
    # and refuses one in an assignment; it was taken as positions
    got = []
    for L in (torch, tg):
        x = L.tensor([10.0, 20.0, 30.0])
        m = L.tensor([1, 0, 1], dtype=L.uint8)
        with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
            got.append(x[m].tolist())
        with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
            x[m] = 0.0
        assert x.tolist() == [10.0, 20.0, 30.0]
    assert got[0] == got[1] == [10.0, 30.0]


@pytest.mark.parametrize("call", [
    lambda L: L.arange(3.0).chunk(0), lambda L: L.arange(3.0).split(0),
    lambda L: L.arange(3.0).split(-1), lambda L: L.linspace(0, 1, -2), lambda L: L.eye(-2),
    lambda L: L.randint(5, 2, (3,)), lambda L: L.arange(0, 10, -1),
], ids=["chunk 0", "split 0", "split -1", "linspace -2", "eye -2", "randint 5..2",
        "arange wrong sign"])
def test_sizes_torch_refuses_are_refused_with_its_error(call):
    # each was a raw Python or NumPy error from inside, or (split -1, arange) a silent
    # empty result
    for L in (torch, tg):
        with pytest.raises(RuntimeError):
            call(L)
    assert tg.zeros(0).split(0)[0].shape == (0,) and tg.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
