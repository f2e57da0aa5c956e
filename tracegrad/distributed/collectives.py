"""Collectives on tensors, in place as in PyTorch, over MPI's buffer interface.

Every call hands the tensor's own NumPy array to mpi4py's uppercase methods
(``Allreduce``, ``Bcast``, ...), so nothing is pickled and, for a contiguous
tensor, nothing is copied. A tensor MPI cannot address directly (a strided view,
float16) goes through a contiguous staging copy that is written back. The result
lands in the tensor's memory and bumps its version counter, as an in-place op
does. CUDA tensors go to NCCL when the group has it, else through host memory.

``async_op=True`` starts the nonblocking form (``Iallreduce``, ...) and returns a
``Work``; ``wait()`` completes it (and finishes what MPI cannot: the division of
``ReduceOp.AVG``, write-backs). Blocking calls wait in MPI; ``barrier`` and
``Work.wait`` poll, so the group's ``timeout`` bounds them.
"""
import time

import numpy as np

from ._group import mpi, resolve


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


class Work:
    """What a collective with ``async_op=True`` returns (PyTorch's ``Work``): ``wait()``
    completes it, ``is_completed()`` asks without blocking."""

    def __init__(self, request=None, finish=None, tensors=(), timeout=None):
        self._request = request
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
            poll(self._request, self._timeout if limit is None else limit, "wait")
            self._complete()
        return True

    def is_success(self):
        return self.is_completed()

    def result(self):
        self.wait()
        return self._tensors

    def synchronize(self):
        self.wait()


def poll(request, timeout, what):
    """Wait for an MPI (or NCCL) request, raising once ``timeout`` seconds have passed."""
    if request.Test():
        return
    start = time.monotonic()
    pause = 0.0
    while not request.Test():
        now = time.monotonic()
        if timeout is not None and now - start > timeout:
            raise RuntimeError(f"tracegrad.distributed: {what} timed out after {timeout:.0f} s "
                               "(another rank may have failed or not reached the same call)")
        if now - start > 0.01:      # past the fast path: stop competing for the core
            pause = min(pause * 2 or 1e-5, 1e-3)
            time.sleep(pause)


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


def _run(pg, async_op, start, finish, tensors):
    """Start the nonblocking MPI call (``start(nonblocking=True)``) or run the blocking one,
    then ``finish``; a ``Work`` for ``async_op``, else None."""
    if async_op:
        return Work(start(True), finish, tensors, pg.timeout)
    start(False)
    if finish is not None:
        finish()
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


def _starter(comm, name, *args):
    """``start(nonblocking)`` for ``_run``: MPI's ``I<name>`` on ``args`` (its request
    returned) or the blocking ``<name>``."""
    blocking, nonblocking = getattr(comm, name), getattr(comm, "I" + name.lower())

    def start(nonblock):
        if nonblock:
            return nonblocking(*args)
        blocking(*args)
    return start


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group in place: every rank ends with the result."""
    pg = resolve(group)
    nccl = _nccl_for(pg, tensor)
    if nccl is not None:
        return nccl.all_reduce(tensor, op, async_op)
    MPI = mpi()
    mop = _mpi_op(MPI, op)
    buf, back = _array(tensor)
    avg = _avg_step(buf, pg, tensor) if _is_avg(op) else None

    start = _starter(pg.comm, "Allreduce", MPI.IN_PLACE, buf, mop)
    return _run(pg, async_op, start, _finisher(avg, back, lambda: _bump(tensor)), [tensor])


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
    nccl = _nccl_for(pg, tensor)
    if nccl is not None:
        return nccl.broadcast(tensor, root, async_op)
    buf, back = _array(tensor)

    start = _starter(pg.comm, "Bcast", buf, root)
    return _run(pg, async_op, start, _finisher(back, lambda: _bump(tensor)), [tensor])


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
    send, _ = _array(tensor)
    recv = np.empty((n,) + send.shape, send.dtype)
    start = _starter(pg.comm, "Allgather", send, recv)

    def finish():
        for i, t in enumerate(tensor_list):
            _write(t, recv[i])
    return _run(pg, async_op, start, finish, tensor_list)


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
    nccl = _nccl_for(pg, output_tensor, input_tensor)
    if nccl is not None:
        return nccl.all_gather(output_tensor, input_tensor, async_op)
    send, _ = _array(input_tensor)
    recv, back = _array(output_tensor)
    start = _starter(pg.comm, "Allgather", send, recv)
    return _run(pg, async_op, start, _finisher(back, lambda: _bump(output_tensor)),
                [output_tensor])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` across ranks; rank i keeps the i-th of ``size`` equal blocks of dim 0."""
    pg = resolve(group)
    n = pg.size()
    if input.numel() != n * output.numel():
        raise ValueError(f"reduce_scatter_tensor: input has {input.numel()} elements, expected "
                         f"{n} x {output.numel()}")
    nccl = _nccl_for(pg, output, input)
    if nccl is not None:
        return nccl.reduce_scatter(output, input, op, async_op)
    MPI = mpi()
    mop = _mpi_op(MPI, op)
    send, _ = _array(input)
    recv, back = _array(output)
    avg = _avg_step(recv, pg, output) if _is_avg(op) else None

    start = _starter(pg.comm, "Reduce_scatter_block", send, recv, mop)
    return _run(pg, async_op, start, _finisher(avg, back, lambda: _bump(output)), [output])


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
    buf, back = _array(tensor)
    mine = pg.rank() == root
    if mine:
        avg = _avg_step(buf, pg, tensor) if _is_avg(op) else None
        send, recv = MPI.IN_PLACE, buf
        finish = _finisher(avg, back, lambda: _bump(tensor))
    else:
        send, recv, finish = buf, None, None

    start = _starter(pg.comm, "Reduce", send, recv, mop, root)
    return _run(pg, async_op, start, finish, [tensor])


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False, group_dst=None):
    """Rank ``dst`` receives every rank's ``tensor`` into ``gather_list``."""
    pg = resolve(group)
    root = group_dst if group_dst is not None else pg.group_rank(dst, "dst")
    send, _ = _array(tensor)
    mine = pg.rank() == root
    recv = None
    if mine:
        if gather_list is None or len(gather_list) != pg.size():
            raise ValueError(f"gather: rank {dst} needs a gather_list of {pg.size()} tensors")
        recv = np.empty((pg.size(),) + send.shape, send.dtype)
    elif gather_list:
        raise ValueError("gather: gather_list must be given on the destination rank only")

    start = _starter(pg.comm, "Gather", send, recv, root)

    def finish():
        if mine:
            for i, t in enumerate(gather_list):
                _write(t, recv[i])
    return _run(pg, async_op, start, finish, gather_list or [])


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False, group_src=None):
    """Rank i's ``tensor`` becomes ``scatter_list[i]`` of rank ``src``."""
    pg = resolve(group)
    root = group_src if group_src is not None else pg.group_rank(src, "src")
    recv, back = _array(tensor)
    send = None
    if pg.rank() == root:
        if scatter_list is None or len(scatter_list) != pg.size():
            raise ValueError(f"scatter: rank {src} needs a scatter_list of {pg.size()} tensors")
        send = np.stack([np.asarray(t._data if type(t._data) is np.ndarray else t._data.get())
                         for t in scatter_list]).astype(recv.dtype, copy=False)
    elif scatter_list:
        raise ValueError("scatter: scatter_list must be given on the source rank only")

    start = _starter(pg.comm, "Scatter", send, recv, root)
    return _run(pg, async_op, start, _finisher(back, lambda: _bump(tensor)), [tensor])


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Equal splits of dim 0: rank j's block i goes to rank i's block j."""
    if output_split_sizes is not None or input_split_sizes is not None:
        raise NotImplementedError("all_to_all_single: only equal splits are supported")
    pg = resolve(group)
    send, _ = _array(input)
    recv, back = _array(output)

    start = _starter(pg.comm, "Alltoall", send, recv)
    return _run(pg, async_op, start, _finisher(back, lambda: _bump(output)), [output])


def send(tensor, dst, group=None, tag=0):
    pg = resolve(group)
    buf, _ = _array(tensor)
    pg.comm.Send(buf, pg.group_rank(dst, "dst"), tag)


def recv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from ``src`` (None: any rank); returns the sender's rank."""
    pg = resolve(group)
    MPI = mpi()
    buf, back = _array(tensor)
    status = MPI.Status()
    pg.comm.Recv(buf, MPI.ANY_SOURCE if src is None else pg.group_rank(src, "src"),
                 MPI.ANY_TAG if tag is None else tag, status)
    if back is not None:
        back()
    _bump(tensor)
    return pg.ranks[status.Get_source()]


def isend(tensor, dst, group=None, tag=0):
    pg = resolve(group)
    buf, _ = _array(tensor)
    return Work(pg.comm.Isend(buf, pg.group_rank(dst, "dst"), tag), None, [tensor], pg.timeout)


def irecv(tensor, src=None, group=None, tag=0):
    pg = resolve(group)
    MPI = mpi()
    buf, back = _array(tensor)
    req = pg.comm.Irecv(buf, MPI.ANY_SOURCE if src is None else pg.group_rank(src, "src"), tag)
    return Work(req, _finisher(back, lambda: _bump(tensor)), [tensor], pg.timeout)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of the group has called ``barrier``; a rank that never comes
    makes it raise after the group's timeout."""
    pg = resolve(group)
    req = pg.comm.Ibarrier()
    if async_op:
        return Work(req, None, [], pg.timeout)
    poll(req, pg.timeout, "barrier")
    return None


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    pg = resolve(group)
    seconds = pg.timeout if timeout is None else timeout.total_seconds()
    poll(pg.comm.Ibarrier(), seconds, "monitored_barrier")


# Python objects (pickled, as PyTorch's *_object calls) -----------------------------------

def all_gather_object(object_list, obj, group=None):
    pg = resolve(group)
    object_list[:] = pg.comm.allgather(obj)


def broadcast_object_list(object_list, src=0, group=None, device=None):
    pg = resolve(group)
    object_list[:] = pg.comm.bcast(list(object_list), root=pg.group_rank(src, "src"))


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    pg = resolve(group)
    got = pg.comm.gather(obj, root=pg.group_rank(dst, "dst"))
    if got is not None and object_gather_list is not None:
        object_gather_list[:] = got


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0,
                        group=None):
    pg = resolve(group)
    scatter_object_output_list[0] = pg.comm.scatter(scatter_object_input_list,
                                                    root=pg.group_rank(src, "src"))
