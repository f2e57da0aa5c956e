"""tracegrad.utils.data: datasets, batching, shuffling, collation, against PyTorch's rules."""
from collections import namedtuple

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.utils.data import (
    BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
    SequentialSampler, Subset, TensorDataset, default_collate, random_split,
)


def make_dataset(n=10):
    x = tg.arange(n * 2, dtype=tg.float32).reshape(n, 2)
    y = tg.arange(n)
    return TensorDataset(x, y), x, y


def test_tensor_dataset_and_sequential_batches():
    ds, x, y = make_dataset()
    assert len(ds) == 10
    sample = ds[3]
    assert isinstance(sample, tuple) and sample[0].equal(x[3]) and sample[1].item() == 3
    loader = DataLoader(ds, batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    xb, yb = batches[0]
    assert isinstance(batches[0], list)          # PyTorch collates a tuple sample to a list
    assert xb.shape == (4, 2) and xb.equal(x[:4]) and yb.tolist() == [0, 1, 2, 3]
    assert batches[-1][1].tolist() == [8, 9]
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(tg.ones(3), tg.ones(4))


def test_drop_last():
    ds, _, _ = make_dataset()
    loader = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(loader) == 2
    assert [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(ds, batch_size=5, drop_last=True)) == 2


def test_shuffle_is_reproducible_with_a_seeded_generator():
    ds, _, _ = make_dataset(20)

    def epoch(loader):
        return [i for _, yb in loader for i in yb.tolist()]
    a = epoch(DataLoader(ds, batch_size=3, shuffle=True, generator=tg.Generator().manual_seed(7)))
    b = epoch(DataLoader(ds, batch_size=3, shuffle=True, generator=tg.Generator().manual_seed(7)))
    assert a == b and sorted(a) == list(range(20)) and a != list(range(20))
    loader = DataLoader(ds, batch_size=3, shuffle=True, generator=tg.Generator().manual_seed(7))
    assert epoch(loader) != epoch(loader)       # a new order every epoch
    tg.manual_seed(3)                           # the default generator when none is given
    c = epoch(DataLoader(ds, batch_size=4, shuffle=True))
    tg.manual_seed(3)
    assert epoch(DataLoader(ds, batch_size=4, shuffle=True)) == c


def test_default_collate_matches_torch_structure():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as t_collate
    Point = namedtuple("Point", "x y")
    samples = [     # samples made of NumPy and Python values, which both libraries take
        [{"a": np.float32(i), "b": [i, float(i)], "s": f"s{i}", "t": np.arange(2) + i,
          "p": Point(i, 2.0 * i), "flag": i % 2 == 0} for i in range(3)],
        [(float(i), i) for i in range(4)],
    ]
    for batch in samples:
        _same_structure(default_collate(batch), t_collate(batch), torch)


def _same_structure(ours, theirs, torch):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tg.Tensor)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for k in theirs:
            _same_structure(ours[k], theirs[k], torch)
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same_structure(a, b, torch)
    else:
        assert ours == theirs


def test_dict_dataset_and_tensor_stacking():
    class Pairs(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"image": tg.full((2, 2), float(i)), "label": i, "name": f"n{i}"}
    batches = list(DataLoader(Pairs(), batch_size=2))
    assert len(batches) == 3
    first = batches[0]
    assert first["image"].shape == (2, 2, 2) and first["image"][1, 0, 0].item() == 1.0
    assert first["label"].dtype is tg.int64 and first["name"] == ["n0", "n1"]
    assert batches[-1]["label"].tolist() == [4]


def test_collate_fn_batch_size_none_and_errors():
    ds, _, _ = make_dataset(6)
    sizes = [len(b) for b in DataLoader(ds, batch_size=4, collate_fn=lambda b: b)]
    assert sizes == [4, 2]
    unbatched = list(DataLoader(ds, batch_size=None))
    assert len(unbatched) == 6 and unbatched[2][1].item() == 2
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([object()])
    with pytest.raises(NotImplementedError):
        Dataset()[0]


def test_samplers_and_batch_sampler():
    ds, _, _ = make_dataset(7)
    assert list(SequentialSampler(ds)) == list(range(7))
    order = list(RandomSampler(ds, generator=tg.Generator().manual_seed(1)))
    assert sorted(order) == list(range(7))
    drawn = list(RandomSampler(ds, replacement=True, num_samples=20,
                               generator=tg.Generator().manual_seed(1)))
    assert len(drawn) == 20 and all(0 <= i < 7 for i in drawn)
    bs = BatchSampler(SequentialSampler(ds), 3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    loader = DataLoader(ds, batch_sampler=bs)
    assert len(loader) == 3 and [b[1].tolist() for b in loader][-1] == [6]
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_sampler=bs, batch_size=2)


def test_iterable_dataset():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5],
                                                                         [6]]
    assert len(list(DataLoader(Stream(), batch_size=3, drop_last=True))) == 2
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Stream(), shuffle=True)


def test_random_split_subset_concat():
    ds, _, _ = make_dataset(10)
    a, b = random_split(ds, [7, 3], generator=tg.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3
    ids = sorted(a[i][1].item() for i in range(7)) + sorted(b[i][1].item() for i in range(3))
    assert sorted(ids) == list(range(10))
    c, d, e = random_split(ds, [0.5, 0.3, 0.2])
    assert (len(c), len(d), len(e)) == (5, 3, 2)
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [3, 3])
    sub = Subset(ds, [9, 0])
    assert len(sub) == 2 and sub[0][1].item() == 9
    cat = ds + Subset(ds, [1])
    assert isinstance(cat, ConcatDataset) and len(cat) == 11 and cat[10][1].item() == 1
    assert cat[-1][1].item() == 1 and cat[3][1].item() == 3


def test_seed_training_loop_shape():
    # the seeds' loop: 30 samples, batch_size=10, shuffle=True, three batches of (10, 8)
    ds = TensorDataset(tg.randn(30, 8), tg.randn(30, 4))
    shapes = [(d.shape, l.shape) for d, l in DataLoader(ds, batch_size=10, shuffle=True)]
    assert shapes == [((10, 8), (10, 4))] * 3
