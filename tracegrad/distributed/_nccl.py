"""NCCL for CUDA tensors through ``cupy.cuda.nccl`` (the "nccl" backend).

One ``NcclCommunicator`` per process group, made with ``ncclCommInitRank``
over the group's MPI communicator (MPI carries the unique id, once). Collectives
are queued on CuPy's current stream; ``async_op`` returns a ``Work`` over a CUDA
event recorded after the call. Written against CuPy's documented API
(``NcclCommunicator(ndev, commId, rank)``, ``allReduce(sendbuf, recvbuf, count,
datatype, op, stream)``, ``bcast(buff, count, datatype, root, stream)``,
``allGather(sendbuf, recvbuf, count, datatype, stream)``,
``reduceScatter(sendbuf, recvbuf, recvcount, datatype, op, stream)``).
"""
import os

from ._wait import Work


def _cupy():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:
        raise RuntimeError('backend "nccl" needs CuPy built with NCCL and a CUDA GPU: '
                           f'pip install "tracegrad[cuda]" ({e}); use backend="mpi" on CPUs') \
            from None
    return cupy, nccl


class _EventRequest:
    """An MPI-request-like view of a CUDA event, for ``Work``."""

    def __init__(self, event):
        self.event = event

    def Test(self):
        return self.event.done

    def Wait(self):
        self.event.synchronize()


class NcclGroup:
    def __init__(self, comm, device_id=None):
        cupy, nccl = _cupy()
        self.cupy, self.nccl = cupy, nccl
        if device_id is None:
            local = int(os.environ.get("LOCAL_RANK", comm.Get_rank()))
            device_id = local % cupy.cuda.runtime.getDeviceCount()
        else:
            device_id = getattr(device_id, "index", device_id) or 0
        self.device_id = device_id
        self.timeout = None         # the process group's, set by it: Work.wait honours it
        cupy.cuda.Device(device_id).use()
        uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)
        self.comm = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
        self.size = comm.Get_size()
        n = nccl
        self._types = {"float16": n.NCCL_FLOAT16, "float32": n.NCCL_FLOAT32,
                       "float64": n.NCCL_FLOAT64, "int32": n.NCCL_INT32, "int64": n.NCCL_INT64,
                       "int8": n.NCCL_INT8, "uint8": n.NCCL_UINT8}
        self._ops = {"SUM": n.NCCL_SUM, "AVG": n.NCCL_SUM, "PRODUCT": n.NCCL_PROD,
                     "MIN": n.NCCL_MIN, "MAX": n.NCCL_MAX}

    def destroy(self):
        if self.comm is not None:
            self.comm.destroy()
            self.comm = None

    # helpers --------------------------------------------------------------------------------
    def _type(self, a):
        try:
            return self._types[a.dtype.name]
        except KeyError:
            raise TypeError(f"nccl: dtype {a.dtype} is not supported") from None

    def _op(self, op):
        try:
            return self._ops[op.name]
        except (KeyError, AttributeError):
            raise ValueError(f"nccl: reduce op {op!r} is not supported") from None

    def _buffer(self, t):
        a = t._data
        if a.flags.c_contiguous:
            return a, None
        c = self.cupy.ascontiguousarray(a)

        def back():
            t._data[...] = c
        return c, back

    def _done(self, async_op, tensors, finish):
        stream = self.cupy.cuda.get_current_stream()
        if not async_op:
            if finish is not None:
                finish()
            return None
        event = self.cupy.cuda.Event()
        event.record(stream)
        return Work(_EventRequest(event), finish, tensors, self.timeout, "NCCL collective")

    @staticmethod
    def _finish(*steps):
        steps = [s for s in steps if s is not None]

        def run():
            for s in steps:
                s()
        return run

    # collectives ----------------------------------------------------------------------------
    def all_reduce(self, t, op, async_op):
        a, back = self._buffer(t)
        stream = self.cupy.cuda.get_current_stream().ptr
        self.comm.allReduce(a.data.ptr, a.data.ptr, a.size, self._type(a), self._op(op), stream)
        if op.name == "AVG":
            a /= self.size          # queued on the same stream, after the reduction
        return self._done(async_op, [t], self._finish(back, lambda: _bump(t)))

    def broadcast(self, t, root, async_op):
        a, back = self._buffer(t)
        stream = self.cupy.cuda.get_current_stream().ptr
        self.comm.bcast(a.data.ptr, a.size, self._type(a), root, stream)
        return self._done(async_op, [t], self._finish(back, lambda: _bump(t)))

    def all_gather(self, out, inp, async_op):
        src, _ = self._buffer(inp)
        dst, back = self._buffer(out)
        stream = self.cupy.cuda.get_current_stream().ptr
        self.comm.allGather(src.data.ptr, dst.data.ptr, src.size, self._type(src), stream)
        return self._done(async_op, [out], self._finish(back, lambda: _bump(out)))

    def reduce_scatter(self, out, inp, op, async_op):
        src, _ = self._buffer(inp)
        dst, back = self._buffer(out)
        stream = self.cupy.cuda.get_current_stream().ptr
        self.comm.reduceScatter(src.data.ptr, dst.data.ptr, dst.size, self._type(src),
                                self._op(op), stream)
        if op.name == "AVG":
            dst /= self.size
        return self._done(async_op, [out], self._finish(back, lambda: _bump(out)))


def _bump(t):
    t._vc.value += 1
