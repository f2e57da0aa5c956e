"""``tracegrad.distributed``: PyTorch's ``torch.distributed`` on MPI (mpi4py) and NCCL (CuPy).

    import tracegrad.distributed as dist
    dist.init_process_group("mpi")          # "gloo" runs on MPI too; "nccl" for CUDA tensors
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

Start the processes with the launcher, ``python -m tracegrad.distributed.run
--nproc-per-node N script.py args...`` (torchrun's interface), or ``mpiexec -n N
python script.py``. Importing this package never needs mpi4py: without it
``is_available()`` is False and ``init_process_group`` says how to install it
(``pip install "tracegrad[distributed]"``).

Faults end the job instead of hanging it: every wait honours the group's
``timeout`` (``_wait``), a rank's early end aborts the job or is reported to the
launcher (``_exit``, ``_monitor``), and collectives compare shapes and dtypes
across ranks (``_check``, ``TRACEGRAD_DISTRIBUTED_DEBUG``). Several machines:
``run --nnodes`` (``_nodes``).
"""
from ._group import (
    Backend, GroupMember, ProcessGroup, default_pg_timeout, destroy_process_group,
    get_backend, get_global_rank, get_group_rank, get_process_group_ranks, get_rank,
    get_world_size, init_process_group, is_available, is_initialized, new_group,
)
from .collectives import (
    ReduceOp, Work, all_gather, all_gather_into_tensor, all_gather_object, all_reduce,
    all_to_all_single, barrier, broadcast, broadcast_object_list, gather, gather_object, irecv,
    isend, monitored_barrier, recv, reduce, reduce_op, reduce_scatter, reduce_scatter_tensor,
    scatter, scatter_object_list, send,
)


def is_mpi_available():
    return is_available()


def is_nccl_available():
    import importlib.util
    return importlib.util.find_spec("cupy") is not None


def is_gloo_available():
    """"gloo" is served by MPI here."""
    return is_available()


def is_torchelastic_launched():
    import os
    return "TORCHELASTIC_RUN_ID" in os.environ or "TRACEGRAD_LAUNCHED" in os.environ


__all__ = [
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all_single", "barrier",
    "broadcast", "broadcast_object_list", "default_pg_timeout", "destroy_process_group", "gather",
    "gather_object", "get_backend", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "get_rank", "get_world_size", "init_process_group", "irecv",
    "is_available", "is_initialized", "is_mpi_available", "is_nccl_available", "isend",
    "monitored_barrier", "new_group", "recv", "reduce", "reduce_op", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "scatter_object_list", "send",
]
