"""Waiting for MPI requests under the process group's timeout.

Every collective, blocking or not, starts MPI's nonblocking form and waits here,
so a rank that failed, exited or called something else makes the others raise
after ``timeout`` seconds instead of waiting in MPI for ever (PyTorch's gloo
backend raises on its timeout too). Uncaught, that error ends the job: see
``_exit``. ``Work``, what an ``async_op=True`` collective returns, waits here too; it is
defined here, below both backends (``collectives`` and ``_nccl``) that make one.
"""
import time


def poll(request, timeout, what, status=None):
    """Wait for an MPI (or NCCL) request; a RuntimeError naming ``what`` and the user's line
    once ``timeout`` seconds have passed. ``status`` (an ``MPI.Status``) is filled in."""
    test = request.Test if status is None else (lambda: request.Test(status))
    if test():
        return
    start = time.monotonic()
    pause = 0.0
    while not test():
        now = time.monotonic()
        if timeout is not None and now - start > timeout:
            raise timed_out(what, timeout)
        if now - start > 0.01:      # past the fast path: stop competing for the core
            pause = min(pause * 2 or 1e-5, 1e-3)
            time.sleep(pause)


def timed_out(what, timeout, hint=None):
    from ..ops.core import op_error
    return op_error(what, f"timed out after {timeout:g} s waiting for the other ranks "
                    f"(tracegrad.distributed: {_who()}). " + (hint or (
                        "Another rank may have failed, exited, or not reached the same call; "
                        "the group's timeout is init_process_group(timeout=...).")))


def _who():
    import os
    rank, size = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    return f"rank {rank} of {size}" if rank is not None else "this rank"


class Work:
    """What a collective with ``async_op=True`` returns (PyTorch's ``Work``): ``wait()``
    completes it, ``is_completed()`` asks without blocking."""

    def __init__(self, request=None, finish=None, tensors=(), timeout=None, what="wait"):
        self._request = request
        self._what = what
        self._finish = finish
        self._tensors = list(tensors)
        self._timeout = timeout
        self._done = request is None
        if self._done and finish is not None:
            finish()
            self._finish = None

    def _complete(self):
        self._done = True
        self._request = None
        if self._finish is not None:
            fn, self._finish = self._finish, None
            fn()

    def is_completed(self):
        if not self._done and self._request.Test():
            self._complete()
        return self._done

    def wait(self, timeout=None):
        if not self._done:
            limit = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
            poll(self._request, self._timeout if limit is None else limit, self._what)
            self._complete()
        return True

    def is_success(self):
        return self.is_completed()

    def result(self):
        self.wait()
        return self._tensors

    def synchronize(self):
        self.wait()
