"""``tracegrad.utils.data.dataloader``: ``DataLoader``, PyTorch's.

``DataLoader`` draws indices from a sampler (sequential, or a random permutation from
``generator``), groups them into batches (``batch_size``, ``drop_last``) and merges each
batch with ``collate_fn``. With ``num_workers > 0`` batches are loaded by that many worker
processes (``multiprocessing``, the platform's default start method unless
``multiprocessing_context`` names one): up to ``prefetch_factor`` batches per worker are in
flight, batches come back in the sampler's order, ``worker_init_fn(id)`` runs in each
worker after it is seeded ``base_seed + id``, ``persistent_workers`` keeps the workers
from one epoch to the next, and ``timeout`` bounds the wait for a batch. Batches travel
back pickled (copied), not through shared memory as PyTorch's tensors do. An
``IterableDataset`` is iterated by every worker on its own copy (shard it with
``get_worker_info()``). ``len(loader)`` is the number of batches per epoch.

Each ``iter()`` draws a base seed from ``generator`` (or the default generator) before
the sampler draws, as PyTorch's does, so a seeded ``generator`` fixes the workers' seeds
and the shuffled order; the orders differ from PyTorch's own for the same seed
(``sampler.py`` says why). ``pin_memory=True`` copies each batch's tensors into
page-locked memory where a GPU is present; without one it warns at each ``iter()``, as
PyTorch does, and loads as usual.
"""
import multiprocessing
import queue
import warnings

from ... import creation
from ...tensor import Tensor
from ._utils import worker as _worker
from ._utils.collate import default_collate, default_convert
from ._utils.fetch import make_fetcher
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

get_worker_info = _worker.get_worker_info


class DataLoader:
    """Iterate a dataset in batches: ``for x, y in DataLoader(ds, batch_size=32,
    shuffle=True)``. ``shuffle`` draws a new order each epoch from ``generator``."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = _context(multiprocessing_context, num_workers)
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            for name, value in (("shuffle", shuffle not in (None, False)),
                                ("sampler", sampler is not None),
                                ("batch_sampler", batch_sampler is not None)):
                if value:
                    given = {"shuffle": shuffle, "sampler": sampler,
                             "batch_sampler": batch_sampler}[name]
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={given}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    def _index_stream(self):
        """What each fetch is given: a batch's indices, one index, or (a stream) the size."""
        if self._iterable:
            size = self.batch_size

            def forever():
                while True:
                    yield size
            return forever()
        return iter(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self):
        if self.num_workers == 0:
            it = _SingleProcessDataLoaderIter(self)
        elif self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessingDataLoaderIter(self)
            else:
                self._iterator._reset()
            it = self._iterator
        else:
            it = _MultiProcessingDataLoaderIter(self)
        if self.pin_memory:
            from ... import cuda
            if not cuda.is_available():
                warnings.warn("'pin_memory' argument is set as true but no accelerator is "
                              "found, then device pinned memory won't be used.", stacklevel=2)
            else:
                it._pin = True
        return it

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)       # a TypeError here, as in PyTorch, without a __len__
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)


def _context(ctx, num_workers):
    if ctx is None:
        return None
    if num_workers == 0:
        raise ValueError(f"multiprocessing_context can only be used with multi-process loading "
                         f"(num_workers > 0), but got num_workers={num_workers}")
    if isinstance(ctx, str):
        methods = multiprocessing.get_all_start_methods()
        if ctx not in methods:
            raise ValueError(f"multiprocessing_context option should specify a valid start "
                             f"method in {methods!r}, but got multiprocessing_context={ctx!r}")
        return multiprocessing.get_context(ctx)
    if not isinstance(ctx, multiprocessing.context.BaseContext):
        raise TypeError(f"multiprocessing_context option should be a valid context object or a "
                        f"string specifying the start method, but got "
                        f"multiprocessing_context={ctx}")
    return ctx


class _BaseDataLoaderIter:
    _pin = False

    def __init__(self, loader):
        self._loader = loader
        self._start_epoch()

    def _start_epoch(self, draw_seed=True):
        loader = self._loader
        self._index_iter = loader._index_stream()
        if draw_seed:   # before the sampler draws, from the loader's generator: PyTorch's order
            self._base_seed = int(creation.randint(0, 2 ** 63 - 1, (),
                                                   generator=loader.generator).item())

    def __iter__(self):
        return self

    def __next__(self):
        data = self._next_data()
        return _pinned(data) if self._pin else data

    def __len__(self):
        return len(self._loader)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """Loads in the calling process."""

    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = make_fetcher(loader._iterable, loader.dataset, loader._auto_collation,
                                     loader.collate_fn, loader.drop_last)

    def _next_data(self):
        return self._fetcher.fetch(next(self._index_iter))    # StopIteration ends the epoch


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Loads with ``num_workers`` processes (see the module docstring)."""

    def __init__(self, loader):
        super().__init__(loader)
        ctx = loader.multiprocessing_context or multiprocessing
        n = loader.num_workers
        self._epoch = 0
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        for wid in range(n):
            q = ctx.Queue()
            q.cancel_join_thread()      # indices unread at shutdown need not be flushed
            w = ctx.Process(target=_worker.worker_loop, daemon=True, args=(
                loader._iterable, loader.dataset, q, self._result_queue, self._done_event,
                loader._auto_collation, loader.collate_fn, loader.drop_last, self._base_seed,
                loader.worker_init_fn, wid, n))
            w.start()
            self._index_queues.append(q)
            self._workers.append(w)
        self._shut = False
        self._begin()

    def _begin(self):
        n = self._loader.num_workers
        self._active = [True] * n
        self._next_worker = 0
        self._sent = self._received = 0
        self._task_worker = {}      # task -> worker, while in flight
        self._results = {}          # task -> data, arrived early
        for _ in range(self._loader.prefetch_factor * n):
            self._send()

    def _reset(self):
        """A new epoch on persistent workers: stale batches are dropped by their epoch."""
        self._epoch += 1
        self._start_epoch(draw_seed=False)     # the workers keep the seeds they were given
        for q in self._index_queues:
            q.put(_worker.Resume(self._epoch))
        acks = 0
        while acks < len(self._workers):
            msg = self._get()
            if isinstance(msg[0], _worker.Resume) and msg[0].epoch == self._epoch:
                acks += 1
        self._begin()

    def _send(self):
        if not any(self._active):
            return
        try:
            index = next(self._index_iter)
        except StopIteration:
            return
        n = len(self._workers)
        while not self._active[self._next_worker]:
            self._next_worker = (self._next_worker + 1) % n
        wid, self._next_worker = self._next_worker, (self._next_worker + 1) % n
        self._index_queues[wid].put((self._epoch, self._sent, index))
        self._task_worker[self._sent] = wid
        self._sent += 1

    def _get(self):
        """The next message on the result queue, watching the workers while waiting."""
        timeout = self._loader.timeout
        waited = 0.0
        while True:
            step = _worker.POLL_S if not timeout else min(_worker.POLL_S, timeout - waited)
            try:
                return self._result_queue.get(timeout=step)
            except queue.Empty:
                waited += step
                dead = [str(w.pid) for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(dead)}) exited "
                                       f"unexpectedly") from None
                if timeout and waited >= timeout:
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None

    def _next_data(self):
        while True:
            if self._received >= self._sent:
                if not self._loader.persistent_workers:
                    self._shutdown()
                raise StopIteration
            task = self._received
            if self._loader.in_order or task in self._results:
                while task not in self._results:
                    self._receive()
            else:               # in_order=False: whichever batch is ready
                task = self._receive()
                if task is None:
                    continue
            data = self._results.pop(task)
            wid = self._task_worker.pop(task)
            if task == self._received:
                self._received += 1
                while self._received < self._sent and self._received not in self._task_worker:
                    self._received += 1
            if isinstance(data, _worker.IterableEnd):
                self._active[data.worker_id] = False
                self._drop_tasks_of(wid)
                continue
            self._send()
            if isinstance(data, _worker.ExceptionWrapper):
                data.reraise()
            return data

    def _receive(self):
        """Take one message; keep it if it answers a task of this epoch still awaited."""
        epoch, idx, data = self._get()
        if epoch == self._epoch and idx in self._task_worker:
            self._results[idx] = data
            return idx
        return None

    def _drop_tasks_of(self, wid):
        """A worker whose stream ended answers its later tasks with ends too: skip them."""
        for task, w in list(self._task_worker.items()):
            if w == wid:
                del self._task_worker[task]
                self._results.pop(task, None)
        while self._received < self._sent and self._received not in self._task_worker:
            self._received += 1

    def _shutdown(self):
        if self._shut:
            return
        self._shut = True
        self._done_event.set()
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=5 * _worker.POLL_S)
            if w.is_alive():
                w.terminate()
        self._result_queue.cancel_join_thread()
        self._result_queue.close()

    def __del__(self):
        try:
            self._shutdown()
        except Exception:   # noqa: BLE001 - interpreter shutdown
            pass


def _pinned(batch):
    """``batch`` with its CPU tensors copied to page-locked memory, structure kept."""
    if isinstance(batch, Tensor):
        return batch.pin_memory() if not batch.is_cuda else batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_pinned(b) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pinned(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _pinned(v) for k, v in batch.items()}
    return batch


__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]
