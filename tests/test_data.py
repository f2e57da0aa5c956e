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
        [(np.float32(i), (f"img{i}.png", i)) for i in range(2)],     # strings in a tuple
        [(f"s{i}",) for i in range(3)],
        [Point(f"p{i}", [f"q{i}"]) for i in range(2)],
    ]
    for batch in samples:
        _same_structure(default_collate(batch), t_collate(batch), torch)


def _same_structure(ours, theirs, torch):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tg.Tensor)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())    # stacked copies: exact
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


# lazy samplers ------------------------------------------------------------------------------

def test_random_sampler_with_replacement_is_lazy_for_endless_epochs():
    """The idiom for an endless loader: 10**10 draws, nothing allocated up front (an eager
    draw would need 80 GB). PyTorch draws 32 indices at a time; so does tracegrad."""
    import tracemalloc
    ds, _, _ = make_dataset(10)
    tracemalloc.start()
    try:
        sampler = RandomSampler(ds, replacement=True, num_samples=10 ** 10,
                                generator=tg.Generator().manual_seed(0))
        loader = DataLoader(ds, batch_size=4, sampler=sampler)
        assert len(sampler) == 10 ** 10 and len(loader) == 2_500_000_000
        it = iter(loader)
        batches = [next(it) for _ in range(50)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2 ** 20
    drawn = [i for _, y in batches for i in y.tolist()]
    assert len(drawn) == 200 and set(drawn) <= set(range(10)) and len(set(drawn)) == 10
    # the draws are a reproducible stream of 32-index chunks from the generator
    g = tg.Generator().manual_seed(0)
    chunks = [i for _ in range(7) for i in tg.randint(0, 10, (32,), generator=g).tolist()]
    assert drawn == chunks[:200]


def test_random_sampler_draws_like_pytorchs_structure():
    ds, _, _ = make_dataset(5)
    # without replacement: whole permutations, then the head of one more
    order = list(RandomSampler(ds, num_samples=12, generator=tg.Generator().manual_seed(3)))
    assert len(order) == 12 and sorted(order[:5]) == sorted(order[5:10]) == list(range(5))
    assert len(set(order[10:])) == 2
    # without a generator: a generator of its own, seeded from the default one per iter()
    tg.manual_seed(11)
    a = list(RandomSampler(ds, replacement=True, num_samples=40))
    tg.manual_seed(11)
    b = list(RandomSampler(ds, replacement=True, num_samples=40))
    assert a == b
    s = RandomSampler(make_dataset(10)[0], generator=tg.Generator().manual_seed(0))
    assert list(s) != list(s)           # each pass draws a new permutation
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(ds, replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(ds, num_samples=0)


def test_subset_and_weighted_samplers():
    from tracegrad.utils.data import SubsetRandomSampler, WeightedRandomSampler
    s = SubsetRandomSampler([10, 20, 30], generator=tg.Generator().manual_seed(0))
    assert sorted(s) == [10, 20, 30] and len(s) == 3
    w = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200, generator=tg.Generator().manual_seed(0))
    drawn = list(w)
    assert len(drawn) == 200 and set(drawn) == {1, 3} and drawn.count(3) > drawn.count(1)
    assert sorted(WeightedRandomSampler([1, 1, 1], 3, replacement=False)) == [0, 1, 2]
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        WeightedRandomSampler([1.0], 0)


def test_seeded_orders_differ_from_pytorchs_and_why():
    """The orders cannot be PyTorch's: its generator is a Mersenne Twister (CPU), tracegrad's
    NumPy's PCG64. What is PyTorch's is the structure: the same seed gives the same order,
    and a loader draws its base seed before the sampler draws."""
    g = tg.Generator().manual_seed(5)
    base = tg.randint(0, 2 ** 63 - 1, (), generator=g)      # what iter(loader) draws first
    perm = tg.randperm(6, generator=g).tolist()
    ds, _, _ = make_dataset(6)
    loader = DataLoader(ds, batch_size=6, shuffle=True, generator=tg.Generator().manual_seed(5))
    assert next(iter(loader))[1].tolist() == perm and base.item() >= 0


# worker processes ---------------------------------------------------------------------------

class _Squares(Dataset):
    def __len__(self):
        return 11

    def __getitem__(self, i):
        return tg.tensor([float(i * i)]), i


class _Stream(IterableDataset):
    """Each worker yields its share of range(n), sharded by ``get_worker_info``."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        from tracegrad.utils.data import get_worker_info
        info = get_worker_info()
        wid, num = (info.id, info.num_workers) if info is not None else (0, 1)
        return iter(range(wid, self.n, num))

    def __len__(self):
        return self.n


class _WhoLoads(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        import os
        import random
        from tracegrad.utils.data import get_worker_info
        info = get_worker_info()
        return {"i": i, "worker": info.id, "pid": os.getpid(), "seed": info.seed,
                "rand": random.random(), "tg": tg.rand(()).item()}


class _Fails(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 4:
            raise KeyError(f"no sample {i}")
        return i


def _ids(loader):
    return [y.tolist() for _, y in loader]


def test_workers_give_the_single_process_batches_in_order():
    ds = _Squares()
    single = list(DataLoader(ds, batch_size=3))
    for workers, prefetch in ((1, 2), (2, 1), (3, 4)):
        loader = DataLoader(ds, batch_size=3, num_workers=workers, prefetch_factor=prefetch)
        assert len(loader) == 4
        multi = list(loader)
        assert [y.tolist() for _, y in multi] == [y.tolist() for _, y in single]
        for (xa, _), (xb, _) in zip(multi, single):
            np.testing.assert_array_equal(xa.numpy(), xb.numpy())
    assert _ids(DataLoader(ds, batch_size=3, num_workers=2, drop_last=True)) == \
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    got = DataLoader(ds, batch_size=None, num_workers=2, collate_fn=lambda s: s[1] * 10)
    assert list(got) == [10 * i for i in range(11)]
    unordered = [y.tolist() for _, y in DataLoader(ds, batch_size=2, num_workers=2,
                                                   in_order=False)]
    assert sorted(i for b in unordered for i in b) == list(range(11))


def test_workers_shuffle_like_the_main_process_for_a_seeded_generator():
    ds = _Squares()
    a = _ids(DataLoader(ds, batch_size=4, shuffle=True, generator=tg.Generator().manual_seed(9)))
    b = _ids(DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                        generator=tg.Generator().manual_seed(9)))
    assert a == b and sorted(i for x in a for i in x) == list(range(11))


def test_worker_seeds_init_fn_and_info():
    import os
    seen = []
    loader = DataLoader(_WhoLoads(), batch_size=2, num_workers=2,
                        generator=tg.Generator().manual_seed(1),
                        worker_init_fn=lambda wid: os.environ.__setitem__("TG_W", str(wid)))
    batches = list(loader)
    for b in batches:
        seen += list(zip(b["i"].tolist(), b["worker"].tolist(), b["pid"].tolist(),
                         b["seed"].tolist()))
    assert [s[0] for s in seen] == list(range(8))
    assert [s[1] for s in seen] == [0, 0, 1, 1, 0, 0, 1, 1]    # batches go round-robin
    assert len({s[2] for s in seen}) == 2 and os.getpid() not in {s[2] for s in seen}
    base = tg.randint(0, 2 ** 63 - 1, (), generator=tg.Generator().manual_seed(1)).item()
    assert {(s[1], s[3]) for s in seen} == {(0, base), (1, base + 1)}   # base_seed + id
    again = list(DataLoader(_WhoLoads(), batch_size=2, num_workers=2,
                            generator=tg.Generator().manual_seed(1)))
    for x, y in zip(batches, again):       # seeded workers draw the same numbers again
        assert x["rand"].tolist() == y["rand"].tolist() and x["tg"].tolist() == y["tg"].tolist()
    from tracegrad.utils.data import get_worker_info
    assert get_worker_info() is None


def test_persistent_workers_keep_their_processes():
    loader = DataLoader(_WhoLoads(), batch_size=4, num_workers=2, persistent_workers=True,
                        shuffle=True)
    pids = []
    for _ in range(3):
        epoch = list(loader)
        assert sorted(i for b in epoch for i in b["i"].tolist()) == list(range(8))
        pids.append({p for b in epoch for p in b["pid"].tolist()})
    assert pids[0] == pids[1] == pids[2] and len(pids[0]) == 2
    it = iter(loader)
    next(it)                                # an epoch left half-way, then a new one
    assert sorted(i for b in loader for i in b["i"].tolist()) == list(range(8))
    loader._iterator._shutdown()


@pytest.mark.filterwarnings("ignore:This DataLoader will create")   # PyTorch's, on 2 cores
def test_iterable_dataset_with_workers_matches_pytorch():
    ours = [b.tolist() for b in DataLoader(_Stream(11), batch_size=2, num_workers=3)]
    assert ours == [[0, 3], [1, 4], [2, 5], [6, 9], [7, 10], [8]]
    dropped = [b.tolist() for b in DataLoader(_Stream(11), batch_size=2, num_workers=3,
                                              drop_last=True)]
    assert dropped == [[0, 3], [1, 4], [2, 5], [6, 9], [7, 10]]
    torch = pytest.importorskip("torch")

    class TorchStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            return iter(range(info.id, 11, info.num_workers))
    theirs = [b.tolist() for b in torch.utils.data.DataLoader(TorchStream(), batch_size=2,
                                                               num_workers=3)]
    assert ours == theirs


def test_worker_errors_are_raised_in_the_main_process():
    with pytest.raises(KeyError, match=r"Caught KeyError in DataLoader worker process \d"):
        list(DataLoader(_Fails(), batch_size=2, num_workers=2))
    got = []
    with pytest.raises(KeyError, match="no sample 4"):
        for b in DataLoader(_Fails(), batch_size=1, num_workers=2):
            got += b.tolist()
    assert got == [0, 1, 2, 3]      # batches before the failure arrive, in order

    def bad_init(wid):
        raise ValueError("init failed")
    with pytest.raises(ValueError, match="init failed"):
        list(DataLoader(_Squares(), batch_size=2, num_workers=2, worker_init_fn=bad_init))


def test_worker_options_are_checked_as_pytorch_checks_them():
    ds = _Squares()
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="timeout option should be non-negative"):
        DataLoader(ds, timeout=-1)
    with pytest.raises(ValueError, match="multiprocessing_context can only be used"):
        DataLoader(ds, multiprocessing_context="fork")
    with pytest.raises(ValueError, match="should specify a valid start method"):
        DataLoader(ds, num_workers=1, multiprocessing_context="nope")
    assert DataLoader(ds, num_workers=2).prefetch_factor == 2


def test_worker_timeout():
    class Slow(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            import time
            time.sleep(3)
            return i
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        list(DataLoader(Slow(), num_workers=1, timeout=0.5))


def test_spawned_workers():
    ds = TensorDataset(tg.arange(12.0).reshape(6, 2), tg.arange(6))
    loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    assert _ids(loader) == [[0, 1, 2, 3], [4, 5]]


def test_new_datasets():
    from tracegrad.utils.data import ChainDataset, StackDataset
    chained = ChainDataset([_Stream(3), _Stream(2)])
    assert list(chained) == [0, 1, 2, 0, 1] and len(chained) == 5
    stacked = StackDataset(_Squares(), _Squares())
    assert len(stacked) == 11 and stacked[2][1][1] == 2
    named = StackDataset(a=_Squares(), b=_Squares())
    assert set(named[0]) == {"a", "b"}
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset(_Squares(), _Stream(3))
