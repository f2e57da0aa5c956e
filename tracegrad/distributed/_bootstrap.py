"""What each rank runs under the launcher: set torchrun's environment variables from the
MPI launcher's own, then run the user's script (or ``-m`` module) as ``__main__``.

    python -m tracegrad.distributed._bootstrap [-m] target args...
"""
import os
import runpy
import sys

# (rank, world size, local rank) as MPICH's hydra, Open MPI and Slurm name them
_SOURCES = [("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
            ("PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")]


def set_environment():
    for rank, size, local in _SOURCES:
        if rank in os.environ and size in os.environ:
            os.environ["RANK"] = os.environ[rank]
            os.environ["WORLD_SIZE"] = os.environ[size]
            os.environ["LOCAL_RANK"] = os.environ.get(local, os.environ[rank])
            os.environ.setdefault("LOCAL_WORLD_SIZE", os.environ[size])
            os.environ.setdefault("GROUP_RANK", "0")
            return


def main(argv):
    set_environment()
    as_module = argv and argv[0] == "-m"
    if as_module:
        argv = argv[1:]
    if not argv:
        raise SystemExit("usage: python -m tracegrad.distributed._bootstrap [-m] target args...")
    sys.argv = list(argv)
    if as_module:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
