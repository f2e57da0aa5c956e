"""Waiting for MPI requests under the process group's timeout.

Every collective, blocking or not, starts MPI's nonblocking form and waits here,
so a rank that failed, exited or called something else makes the others raise
after ``timeout`` seconds instead of waiting in MPI for ever (PyTorch's gloo
backend raises on its timeout too). Uncaught, that error ends the job: see
``_exit``.
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
