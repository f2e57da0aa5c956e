"""How one rank's early end ends the whole job instead of leaving the others waiting.

- An uncaught exception: ``sys.excepthook`` prints it, then ``MPI_Abort``
  stops every rank (as ``python -m mpi4py`` does), so the job ends at once with
  a non-zero status.
- ``sys.exit(code)`` with a non-zero code under the launcher: its bootstrap
  catches the ``SystemExit`` (which bypasses ``excepthook``) and aborts the same way
  (``abort``). Without the launcher (plain ``mpiexec python script.py``) MPI's
  finalisation waits for the other ranks, which raise at their group's timeout.
- ``sys.exit(0)``, the end of the script, or ``os._exit`` while other ranks are
  still inside a collective: the others raise at the group's timeout (every wait
  polls, see ``_wait``); uncaught, that aborts the job. The launcher also learns
  each rank's end over its monitor connection (``_monitor``) and never reports
  success for a job whose ranks did not all finish.
"""
import os
import sys

_state = {}


def install(comm):
    """Abort the job through ``comm`` when an exception ends this rank."""
    if "previous" in _state:
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        abort(1)
    _state.update(previous=previous, hook=hook, comm=comm)
    sys.excepthook = hook


def uninstall():
    """After ``destroy_process_group``: an exception ends this rank alone again."""
    previous = _state.pop("previous", None)
    if previous is not None and sys.excepthook is _state.get("hook"):
        sys.excepthook = previous
    _state.pop("hook", None)
    _state.pop("comm", None)


def active():
    return "comm" in _state


def abort(code):
    """End every rank of the job now with ``code`` (non-zero), after flushing this rank's
    output and telling the launcher."""
    from . import _monitor
    code = code if isinstance(code, int) and code != 0 else 1
    _monitor.report_exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # noqa: BLE001 - a closed stream must not stop the abort
            pass
    comm = _state.get("comm")
    try:
        if comm is not None:
            comm.Abort(code)
    except Exception:       # noqa: BLE001 - MPI already torn down: exit all the same
        pass
    os._exit(code)
