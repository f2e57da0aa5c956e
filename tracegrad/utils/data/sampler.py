"""``tracegrad.utils.data.sampler``: the orders in which a ``DataLoader`` visits a dataset.

Samplers draw lazily, as PyTorch's do: ``RandomSampler`` with replacement draws its
indices 32 at a time, so ``RandomSampler(ds, replacement=True, num_samples=10**10)`` (an
endless loader) costs nothing until it is iterated; without replacement it draws one
permutation of the dataset per pass. A sampler without a ``generator`` seeds a generator
of its own from the default one at each ``iter()`` (so ``tracegrad.manual_seed`` makes its
orders reproducible). The numbers come from NumPy's PCG64, not PyTorch's Mersenne
Twister: a seed gives other orders than PyTorch's for the same seed.
"""
from ... import creation

_CHUNK = 32     # indices drawn per call with replacement, PyTorch's chunk


def _seeded_generator():
    """A generator seeded from the default generator (one draw), as PyTorch's samplers make."""
    seed = int(creation.randint(0, 2 ** 63 - 1, ()).item())
    return creation.Generator().manual_seed(seed)


class Sampler:
    """Iterates indices (or lists of them) of a dataset."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh random permutation each pass, or ``num_samples`` draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        gen = self.generator if self.generator is not None else _seeded_generator()
        if self.replacement:
            for _ in range(self.num_samples // _CHUNK):
                yield from creation.randint(0, n, (_CHUNK,), generator=gen).tolist()
            yield from creation.randint(0, n, (self.num_samples % _CHUNK,),
                                        generator=gen).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from creation.randperm(n, generator=gen).tolist()
            yield from creation.randperm(n, generator=gen).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, drawn afresh each pass."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in creation.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices of ``[0, len(weights))`` drawn by the given weights."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        from ... import dtypes
        weights = creation.as_tensor(weights, dtype=dtypes.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights.shape)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        from ...ops.random_ops import multinomial
        yield from multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of ``batch_size`` (the last may be short)."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]
