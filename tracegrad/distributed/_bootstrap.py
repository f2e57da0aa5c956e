"""What each rank runs under the launcher: set torchrun's environment variables from the
MPI launcher's own, then run the user's script (or ``-m`` module) as ``__main__``.

    python -m tracegrad.distributed._bootstrap [-m] target args...

It also reports the rank's start and end to the launcher (``_monitor``), and
turns a ``sys.exit`` with a non-zero code, which bypasses ``sys.excepthook``,
into an abort of the whole job while a process group is live (``_exit``).
"""
import os
import runpy
import sys

# (rank, world size, local rank) as MPICH's hydra, Open MPI and Slurm name them
_SOURCES = [("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
            ("PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
            ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")]


def set_environment():
    for rank, size, local in _SOURCES:
        if rank in os.environ and size in os.environ:
            os.environ["RANK"] = os.environ[rank]
            os.environ["WORLD_SIZE"] = os.environ[size]
            os.environ["LOCAL_RANK"] = os.environ.get(local, os.environ[rank])
            os.environ.setdefault("LOCAL_WORLD_SIZE", os.environ[size])
            per_node = int(os.environ["LOCAL_WORLD_SIZE"]) or 1
            os.environ.setdefault("GROUP_RANK", str(int(os.environ[rank]) // per_node))
            return


def main(argv):
    set_environment()
    as_module = argv and argv[0] == "-m"
    if as_module:
        argv = argv[1:]
    if not argv:
        raise SystemExit("usage: python -m tracegrad.distributed._bootstrap [-m] target args...")
    from . import _exit, _monitor
    _monitor.connect()
    sys.argv = list(argv)
    try:
        if as_module:
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = _exit_code(e.code)
        if code != 0 and _exit.active():
            _print_exit_message(e.code)
            _exit.abort(code)
        _monitor.report_exit(code)
        raise
    except BaseException:
        _monitor.report_exit(1)    # sys.excepthook prints it and aborts the job (_exit)
        raise
    _monitor.report_exit(0)


def _exit_code(code):
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _print_exit_message(code):
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)      # what sys.exit("message") prints


if __name__ == "__main__":
    main(sys.argv[1:])
