"""``tracegrad.multiprocessing``: PyTorch's ``torch.multiprocessing``, the standard library's
``multiprocessing`` plus ``spawn``/``start_processes``.

Tensors pickle by value (their NumPy data), so they cross ``Queue``s and ``Pipe``s as is;
there is no shared-memory storage, so a child's writes to a tensor do not reach the parent
(PyTorch's ``share_memory_`` tensors would). The sharing-strategy functions exist for code
that calls them and only record the choice.
"""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403 - the standard library's names, as PyTorch's
from multiprocessing import ProcessError, get_context

_sharing_strategy = "file_system"


def get_all_sharing_strategies():
    return {"file_descriptor", "file_system"}


def get_sharing_strategy():
    return _sharing_strategy


def set_sharing_strategy(new_strategy):
    global _sharing_strategy
    if new_strategy not in get_all_sharing_strategies():
        raise ValueError(f"set_sharing_strategy: unknown strategy {new_strategy!r}; expected "
                         f"one of {sorted(get_all_sharing_strategies())}")
    _sharing_strategy = new_strategy


class ProcessRaisedException(ProcessError):
    """A spawned process exited with a nonzero code."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


ProcessExitedException = ProcessRaisedException


class ProcessContext:
    """The processes ``start_processes`` started; ``join()`` waits for them and raises if one
    failed (as PyTorch's, without forwarding the child's traceback text)."""

    def __init__(self, processes):
        self.processes = processes

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        for p in self.processes:
            p.join(timeout)
        for i, p in enumerate(self.processes):
            if p.exitcode not in (0, None):
                for other in self.processes:
                    if other.is_alive():
                        other.terminate()
                raise ProcessRaisedException(f"process {i} terminated with exit code "
                                             f"{p.exitcode}", i, p.pid)
        return all(p.exitcode is not None for p in self.processes)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run ``fn(i, *args)`` for ``i`` in ``range(nprocs)``, each in its own process."""
    ctx = get_context(start_method)
    processes = [ctx.Process(target=fn, args=(i,) + tuple(args), daemon=daemon)
                 for i in range(nprocs)]
    for p in processes:
        p.start()
    context = ProcessContext(processes)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    return start_processes(fn, args, nprocs, join, daemon, start_method)


__all__ = multiprocessing.__all__ + [
    "spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
    "ProcessExitedException", "get_all_sharing_strategies", "get_sharing_strategy",
    "set_sharing_strategy",
]
