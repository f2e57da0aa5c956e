"""Collectives on tensors, in place as in PyTorch, over MPI's buffer interface.

Every call hands the tensor's own NumPy array to mpi4py's uppercase methods
(``Allreduce``, ``Bcast``, ...), so nothing is pickled and, for a contiguous
tensor, nothing is copied. A tensor MPI cannot address directly (a strided view,
float16) goes through a contiguous staging copy that is written back. The result
lands in the tensor's memory and bumps its version counter, as an in-place op
does. CUDA tensors go to NCCL when the group has it, else through host memory.

``async_op=True`` starts the nonblocking form (``Iallreduce``, ...) and returns a
``Work``; ``wait()`` completes it (and finishes what MPI cannot: the division of
``ReduceOp.AVG``, write-backs). A blocking call starts the same nonblocking form
and polls it (``_wait.poll``), so the group's ``timeout`` bounds every wait.
Before a collective starts, ``_check`` may compare its shapes and dtypes across
the ranks (``TRACEGRAD_DISTRIBUTED_DEBUG``). Object collectives live in
``_objects``.
"""
import numpy as np

from ._check import check, describe
from ._group import mpi, resolve
from ._objects import (  # noqa: F401 - re-exported
    all_gather_object, broadcast_object_list, gather_object, scatter_object_list,
)
from ._wait import Work, poll  # noqa: F401 - poll re-exported (nn.parallel waits with it)


class _Op:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<RedOpType.{self.name}>"


class ReduceOp:
    """PyTorch's reduction names."""
    SUM = _Op("SUM")
    AVG = _Op("AVG")
    PRODUCT = _Op("PRODUCT")
    MIN = _Op("MIN")
    MAX = _Op("MAX")
    BAND = _Op("BAND")
    BOR = _Op("BOR")
    BXOR = _Op("BXOR")
    RedOpType = _Op


reduce_op = ReduceOp


def _mpi_op(MPI, op):
    table = {"SUM": MPI.SUM, "AVG": MPI.SUM, "PRODUCT": MPI.PROD, "MIN": MPI.MIN,
             "MAX": MPI.MAX, "BAND": MPI.BAND, "BOR": MPI.BOR, "BXOR": MPI.BXOR}
    name = getattr(op, "name", None)
    if name not in table:
        raise ValueError(f"unknown reduce op {op!r}; use dist.ReduceOp.SUM, AVG, PRODUCT, MIN or "
                         "MAX")
    return table[name]


def _is_avg(op):
    return getattr(op, "name", None) == "AVG"


_STAGED = {np.dtype(np.float16): np.float32}


def _array(t):
    """The NumPy array MPI reads and writes for ``t``, and how to put a result back."""
    a = t._data
    if type(a) is not np.ndarray:               # a CuPy array on the MPI path: via the host
        host = a.get()

        def back(h=host, t=t):
            t._data[...] = _to_device(h, t._data)
        return host, back
    staged = _STAGED.get(a.dtype)
    if a.flags.c_contiguous and staged is None:
        return a, None
    copy = np.ascontiguousarray(a, dtype=staged or a.dtype)

    def back(copy=copy, t=t):
        np.copyto(t._data, copy, casting="unsafe")
    return copy, back


def _to_device(host, like):
    import cupy
    return cupy.asarray(host, dtype=like.dtype)


def _bump(*tensors):
    for t in tensors:
        t._vc.value += 1


def _run(pg, async_op, request, finish, tensors, what):
    """A started nonblocking MPI call: a ``Work`` for ``async_op``; else wait for it under the
    group's timeout, then ``finish``, and return None."""
    work = Work(request, finish, tensors, pg.timeout, what)
    if async_op:
        return work
    work.wait()
    return None


def _finisher(*steps):
    steps = [s for s in steps if s is not None]
    if not steps:
        return None

    def finish():
        for s in steps:
            s()
    return finish


def _nccl_for(pg, *tensors):
    if pg.nccl is None:
        return None
    return pg.nccl if all(type(t._data) is not np.ndarray for t in tensors) else None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group in place: every rank ends with the result."""
    pg = resolve(group)
    MPI = mpi()
    mop = _mpi_op(MPI, op)
    check(pg, "all_reduce", describe(tensor), f"op={op.name}")
    nccl = _nccl_for(pg, tensor)
    if nccl is not None:
        return nccl.all_reduce(tensor, op, async_op)
    buf, back = _array(tensor)
    avg = _avg_step(buf, pg, tensor) if _is_avg(op) else None
    request = pg.comm.Iallreduce(MPI.IN_PLACE, buf, mop)
    return _run(pg, async_op, request, _finisher(avg, back, lambda: _bump(tensor)), [tensor],
                "all_reduce")


def _avg_step(buf, pg, tensor):
    if not np.issubdtype(buf.dtype, np.floating) and not np.issubdtype(buf.dtype,
                                                                       np.complexfloating):
        raise ValueError(f"ReduceOp.AVG needs a floating point tensor, got {tensor.dtype}")
    n = pg.size()

    def divide():
        np.divide(buf, n, out=buf)
    return divide


def broadcast(tensor, src=0, group=None, async_op=False, group_src=None):
    """Every rank's ``tensor`` becomes rank ``src``'s (a global rank, as in PyTorch)."""
    pg = resolve(group)
    root = group_src if group_src is not None else pg.group_rank(src, "src")
    check(pg, "broadcast", describe(tensor), f"src={pg.ranks[root]}")
    nccl = _nccl_for(pg, tensor)
    if nccl is not None:
        return nccl.broadcast(tensor, root, async_op)
    buf, back = _array(tensor)
    request = pg.comm.Ibcast(buf, root)
    return _run(pg, async_op, request, _finisher(back, lambda: _bump(tensor)), [tensor],
                "broadcast")


def _check_same(a, b, what):
    if tuple(a.shape) != tuple(b.shape) or a.dtype is not b.dtype:
        raise ValueError(f"{what}: expected tensors of shape {tuple(b.shape)} and dtype {b.dtype}, "
                         f"got shape {tuple(a.shape)} and dtype {a.dtype}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[i]`` becomes rank i's ``tensor``."""
    pg = resolve(group)
    n = pg.size()
    if len(tensor_list) != n:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, the group has "
                         f"{n} ranks")
    for t in tensor_list:
        _check_same(t, tensor, "all_gather")
    check(pg, "all_gather", describe(tensor))
    send, _ = _array(tensor)
    recv = np.empty((n,) + send.shape, send.dtype)
    request = pg.comm.Iallgather(send, recv)

    def finish():
        for i, t in enumerate(tensor_list):
            _write(t, recv[i])
    return _run(pg, async_op, request, finish, tensor_list, "all_gather")


def _write(t, values):
    if type(t._data) is np.ndarray:
        np.copyto(t._data, values.reshape(t._data.shape), casting="unsafe")
    else:
        t._data[...] = _to_device(values.reshape(t._data.shape), t._data)
    t._vc.value += 1


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (the ranks' inputs concatenated along dim 0, or stacked) in place."""
    pg = resolve(group)
    n = pg.size()
    if output_tensor.numel() != n * input_tensor.numel():
        raise ValueError(f"all_gather_into_tensor: output has {output_tensor.numel()} elements, "
                         f"expected {n} x {input_tensor.numel()}")
    check(pg, "all_gather_into_tensor", describe(input_tensor), describe(output_tensor))
    nccl = _nccl_for(pg, output_tensor, input_tensor)
    if nccl is not None:
        return nccl.all_gather(output_tensor, input_tensor, async_op)
    send, _ = _array(input_tensor)
    recv, back = _array(output_tensor)
    request = pg.comm.Iallgather(send, recv)
    return _run(pg, async_op, request, _finisher(back, lambda: _bump(output_tensor)),
                [output_tensor], "all_gather_into_tensor")


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` across ranks; rank i keeps the i-th of ``size`` equal blocks of dim 0."""
    pg = resolve(group)
    n = pg.size()
    if input.numel() != n * output.numel():
        raise ValueError(f"reduce_scatter_tensor: input has {input.numel()} elements, expected "
                         f"{n} x {output.numel()}")
    MPI = mpi()
    mop = _mpi_op(MPI, op)
    check(pg, "reduce_scatter_tensor", describe(output), describe(input), f"op={op.name}")
    nccl = _nccl_for(pg, output, input)
    if nccl is not None:
        return nccl.reduce_scatter(output, input, op, async_op)
    send, _ = _array(input)
    recv, back = _array(output)
    avg = _avg_step(recv, pg, output) if _is_avg(op) else None
    request = pg.comm.Ireduce_scatter_block(send, recv, mop)
    return _run(pg, async_op, request, _finisher(avg, back, lambda: _bump(output)), [output],
                "reduce_scatter_tensor")


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``reduce_scatter_tensor`` with the input given as one tensor per rank."""
    from ..ops import stack
    return reduce_scatter_tensor(output, stack([t.detach() for t in input_list]), op, group,
                                 async_op)


def reduce(tensor, dst=0, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Rank ``dst``'s ``tensor`` becomes the reduction; the others' are left as they were."""
    pg = resolve(group)
    root = group_dst if group_dst is not None else pg.group_rank(dst, "dst")
    MPI = mpi()
    mop = _mpi_op(MPI, op)
    check(pg, "reduce", describe(tensor), f"op={op.name}", f"dst={pg.ranks[root]}")
    buf, back = _array(tensor)
    mine = pg.rank() == root
    if mine:
        avg = _avg_step(buf, pg, tensor) if _is_avg(op) else None
        send, recv = MPI.IN_PLACE, buf
        finish = _finisher(avg, back, lambda: _bump(tensor))
    else:
        send, recv, finish = buf, None, None
    request = pg.comm.Ireduce(send, recv, mop, root)
    return _run(pg, async_op, request, finish, [tensor], "reduce")


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False, group_dst=None):
    """Rank ``dst`` receives every rank's ``tensor`` into ``gather_list``."""
    pg = resolve(group)
    root = group_dst if group_dst is not None else pg.group_rank(dst, "dst")
    check(pg, "gather", describe(tensor), f"dst={pg.ranks[root]}")
    send, _ = _array(tensor)
    mine = pg.rank() == root
    recv = None
    if mine:
        if gather_list is None or len(gather_list) != pg.size():
            raise ValueError(f"gather: rank {dst} needs a gather_list of {pg.size()} tensors")
        recv = np.empty((pg.size(),) + send.shape, send.dtype)
    elif gather_list:
        raise ValueError("gather: gather_list must be given on the destination rank only")
    request = pg.comm.Igather(send, recv, root)

    def finish():
        if mine:
            for i, t in enumerate(gather_list):
                _write(t, recv[i])
    return _run(pg, async_op, request, finish, gather_list or [], "gather")


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False, group_src=None):
    """Rank i's ``tensor`` becomes ``scatter_list[i]`` of rank ``src``."""
    pg = resolve(group)
    root = group_src if group_src is not None else pg.group_rank(src, "src")
    check(pg, "scatter", describe(tensor), f"src={pg.ranks[root]}")
    recv, back = _array(tensor)
    send = None
    if pg.rank() == root:
        if scatter_list is None or len(scatter_list) != pg.size():
            raise ValueError(f"scatter: rank {src} needs a scatter_list of {pg.size()} tensors")
        send = np.stack([np.asarray(t._data if type(t._data) is np.ndarray else t._data.get())
                         for t in scatter_list]).astype(recv.dtype, copy=False)
    elif scatter_list:
        raise ValueError("scatter: scatter_list must be given on the source rank only")
    request = pg.comm.Iscatter(send, recv, root)
    return _run(pg, async_op, request, _finisher(back, lambda: _bump(tensor)), [tensor],
                "scatter")


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Equal splits of dim 0: rank j's block i goes to rank i's block j."""
    if output_split_sizes is not None or input_split_sizes is not None:
        raise NotImplementedError("all_to_all_single: only equal splits are supported")
    pg = resolve(group)
    if output.numel() != input.numel() or output.numel() % pg.size():
        raise ValueError(f"all_to_all_single: input ({input.numel()} elements) and output "
                         f"({output.numel()}) must be equal and divisible by the group size "
                         f"{pg.size()}")
    check(pg, "all_to_all_single", describe(output), describe(input))
    send, _ = _array(input)
    recv, back = _array(output)
    request = pg.comm.Ialltoall(send, recv)
    return _run(pg, async_op, request, _finisher(back, lambda: _bump(output)), [output],
                "all_to_all_single")


def send(tensor, dst, group=None, tag=0):
    pg = resolve(group)
    buf, _ = _array(tensor)
    poll(pg.comm.Isend(buf, pg.group_rank(dst, "dst"), tag), pg.timeout, "send")


def recv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from ``src`` (None: any rank); returns the sender's rank."""
    pg = resolve(group)
    MPI = mpi()
    buf, back = _array(tensor)
    status = MPI.Status()
    request = pg.comm.Irecv(buf, MPI.ANY_SOURCE if src is None else pg.group_rank(src, "src"),
                            MPI.ANY_TAG if tag is None else tag)
    poll(request, pg.timeout, "recv", status)
    if back is not None:
        back()
    _bump(tensor)
    return pg.ranks[status.Get_source()]


def isend(tensor, dst, group=None, tag=0):
    pg = resolve(group)
    buf, _ = _array(tensor)
    return Work(pg.comm.Isend(buf, pg.group_rank(dst, "dst"), tag), None, [tensor], pg.timeout,
                "isend")


def irecv(tensor, src=None, group=None, tag=0):
    pg = resolve(group)
    MPI = mpi()
    buf, back = _array(tensor)
    req = pg.comm.Irecv(buf, MPI.ANY_SOURCE if src is None else pg.group_rank(src, "src"), tag)
    return Work(req, _finisher(back, lambda: _bump(tensor)), [tensor], pg.timeout, "irecv")


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of the group has called ``barrier``; a rank that never comes
    makes it raise after the group's timeout."""
    pg = resolve(group)
    req = pg.comm.Ibarrier()
    if async_op:
        return Work(req, None, [], pg.timeout, "barrier")
    poll(req, pg.timeout, "barrier")
    return None


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    pg = resolve(group)
    seconds = pg.timeout if timeout is None else timeout.total_seconds()
    poll(pg.comm.Ibarrier(), seconds, "monitored_barrier")
