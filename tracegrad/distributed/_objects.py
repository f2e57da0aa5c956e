"""Collectives on picklable Python objects (PyTorch's ``*_object`` calls).

Each object is pickled to bytes; the byte counts travel first (one small
collective), then the bytes (MPI's ``v`` forms), both nonblocking and polled
under the group's timeout, as the tensor collectives are. mpi4py's own
lowercase methods (``comm.bcast``...) would block in MPI with no timeout.
"""
import pickle

import numpy as np

from ._group import mpi, resolve
from ._wait import poll


def _bytes(obj):
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)


def _loads(buf):
    return pickle.loads(buf.tobytes())


def _displacements(counts):
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def all_gather_object(object_list, obj, group=None):
    """``object_list[i]`` becomes rank i's ``obj``."""
    pg = resolve(group)
    MPI, n = mpi(), pg.size()
    data = _bytes(obj)
    counts = np.empty(n, np.int64)
    poll(pg.comm.Iallgather(np.array([data.size], np.int64), counts), pg.timeout,
         "all_gather_object")
    recv = np.empty(int(counts.sum()), np.uint8)
    displs = _displacements(counts)
    poll(pg.comm.Iallgatherv(data, [recv, counts, displs, MPI.BYTE]), pg.timeout,
         "all_gather_object")
    object_list[:] = [_loads(recv[d:d + c]) for d, c in zip(displs, counts)]


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Every rank's ``object_list`` (same length) becomes rank ``src``'s, in place."""
    pg = resolve(group)
    root = pg.group_rank(src, "src")
    data = _bytes(list(object_list)) if pg.rank() == root else None
    count = np.array([0 if data is None else data.size], np.int64)
    poll(pg.comm.Ibcast(count, root), pg.timeout, "broadcast_object_list")
    if data is None:
        data = np.empty(int(count[0]), np.uint8)
    poll(pg.comm.Ibcast(data, root), pg.timeout, "broadcast_object_list")
    object_list[:] = _loads(data)


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """Rank ``dst``'s ``object_gather_list`` becomes every rank's ``obj``."""
    pg = resolve(group)
    MPI, n = mpi(), pg.size()
    root = pg.group_rank(dst, "dst")
    mine = pg.rank() == root
    data = _bytes(obj)
    counts = np.empty(n, np.int64) if mine else None
    poll(pg.comm.Igather(np.array([data.size], np.int64), counts, root), pg.timeout,
         "gather_object")
    recv = None
    if mine:
        displs = _displacements(counts)
        buf = np.empty(int(counts.sum()), np.uint8)
        recv = [buf, counts, displs, MPI.BYTE]
    poll(pg.comm.Igatherv(data, recv, root), pg.timeout, "gather_object")
    if mine and object_gather_list is not None:
        object_gather_list[:] = [_loads(buf[d:d + c]) for d, c in zip(displs, counts)]


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0,
                        group=None):
    """``scatter_object_output_list[0]`` becomes ``scatter_object_input_list[rank]`` of rank
    ``src``."""
    pg = resolve(group)
    MPI, n = mpi(), pg.size()
    root = pg.group_rank(src, "src")
    send, counts = None, None
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != n:
            raise ValueError(f"scatter_object_list: rank {src} needs a list of {n} objects")
        parts = [_bytes(o) for o in scatter_object_input_list]
        counts = np.array([p.size for p in parts], np.int64)
        send = [np.concatenate(parts), counts, _displacements(counts), MPI.BYTE]
    count = np.empty(1, np.int64)
    poll(pg.comm.Iscatter(counts, count, root), pg.timeout, "scatter_object_list")
    recv = np.empty(int(count[0]), np.uint8)
    poll(pg.comm.Iscatterv(send, recv, root), pg.timeout, "scatter_object_list")
    scatter_object_output_list[0] = _loads(recv)
