"""Fetchers: one batch from a dataset, in the main process or in a worker (PyTorch's)."""


class MapFetcher:
    """``dataset[i]`` for each index of a batch (``__getitems__`` where the dataset has it),
    merged by ``collate_fn``; without auto-collation one index, one sample."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        many = getattr(self.dataset, "__getitems__", None)
        data = many(index) if many is not None else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class IterableFetcher:
    """The next ``batch_size`` samples of the dataset's stream; ``StopIteration`` at its end
    (or before a short last batch with ``drop_last``)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = \
            auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, batch_size):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in range(batch_size):
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < batch_size):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last):
    cls = IterableFetcher if iterable else MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)
