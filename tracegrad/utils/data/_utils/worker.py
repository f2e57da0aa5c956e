"""Worker processes of a ``DataLoader`` with ``num_workers > 0``, as PyTorch's.

Each worker is seeded ``base_seed + worker_id`` (``tracegrad.manual_seed`` and Python's
``random``; NumPy's global generator from both numbers), calls ``worker_init_fn(id)``,
then loops: it takes ``(epoch, task, index)`` from its index queue, fetches that batch
and puts ``(epoch, task, batch)`` on the shared result queue. A failure travels back as
an ``ExceptionWrapper`` and is raised again in the main process with the worker's
traceback; the end of an iterable dataset's stream as ``IterableEnd``. ``None`` stops
the worker; ``Resume`` (persistent workers, a new epoch) makes it restart its stream.
A worker whose parent died exits at its next poll.
"""
import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass

import numpy as np

POLL_S = 1.0        # how often a waiting worker (or the main process) checks on the other side
_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """In a worker process: its ``WorkerInfo`` (``id``, ``num_workers``, ``seed``, its copy
    of ``dataset``); in the main process: None."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as text."""

    def __init__(self, where):
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type
        self.msg = (f"Caught {exc_type.__name__} {where}.\nOriginal "
                    + "".join(traceback.format_exception(exc_type, exc, exc.__traceback__)))

    def reraise(self):
        msg = self.msg
        if self.exc_type is KeyError:       # KeyError quotes its message: keep it readable
            msg = KeyError(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:   # noqa: BLE001 - an exception type that takes other arguments
            raise RuntimeError(msg) from None
        raise exc


@dataclass(frozen=True)
class IterableEnd:
    worker_id: int


@dataclass(frozen=True)
class Resume:
    epoch: int


def _seed_worker(base_seed, worker_id):
    from .... import creation
    seed = base_seed + worker_id
    random.seed(seed)
    creation.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    return seed


def worker_loop(iterable, dataset, index_queue, result_queue, done_event, auto_collation,
                collate_fn, drop_last, base_seed, init_fn, worker_id, num_workers):
    from .fetch import make_fetcher
    global _worker_info
    parent = os.getppid()
    seed = _seed_worker(base_seed, worker_id)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    failure, fetcher = None, None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
    except Exception:   # noqa: BLE001 - reported with the first task
        failure = ExceptionWrapper(f"in DataLoader worker process {worker_id}")
    try:
        while True:
            try:
                task = index_queue.get(timeout=POLL_S)
            except queue.Empty:
                if os.getppid() != parent or done_event.is_set():
                    return
                continue
            if task is None:
                return
            if isinstance(task, Resume):
                if failure is None and iterable:
                    fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn,
                                           drop_last)
                result_queue.put((task, None, None))
                continue
            epoch, idx, index = task
            if done_event.is_set():
                continue
            if failure is not None:
                data, failure = failure, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        raise
                    data = IterableEnd(worker_id)
                except Exception:   # noqa: BLE001 - raised again in the main process
                    data = ExceptionWrapper(f"in DataLoader worker process {worker_id}")
            result_queue.put((epoch, idx, data))
            del data
    except KeyboardInterrupt:
        pass
    finally:
        if done_event.is_set():     # the main process reads no more: do not wait on the pipe
            result_queue.cancel_join_thread()
