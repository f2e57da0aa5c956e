"""``nn.parallel.DistributedDataParallel``: data parallel training over ``tracegrad.distributed``
(and ``DataParallel``, the single-process wrapper, at the end).

At construction rank 0's parameters and buffers are broadcast to every rank.
Gradients are averaged across ranks in buckets: the parameters, in reverse
order of ``parameters()`` (roughly the order backward produces their
gradients), are packed into buckets of about ``bucket_cap_mb`` (25 MB; the
first bucket 1 MB, as PyTorch). A post-accumulate-grad hook on each parameter
copies its ``.grad`` into its bucket; when a bucket's last gradient has arrived,
its all-reduce starts (``Iallreduce``) as soon as the buckets before it have
started too (every rank issues its collectives in one order), so communication
overlaps the rest of backward. A callback queued on the autograd engine waits for
every bucket when ``backward`` ends and writes the averages back into ``.grad``.

``no_sync()`` skips the all-reduce (gradients accumulate locally) until the
first backward outside it. ``find_unused_parameters=True`` lets a parameter that
got no gradient in a backward on a rank contribute that rank's ``.grad`` so far
(zeros if none), as PyTorch's reducer does; a parameter no rank used keeps its
``.grad``. Without it such a parameter is an error, raised when that backward
ends (PyTorch raises it at the next forward).
``broadcast_buffers`` sends rank 0's buffers before each forward in training.

``DDP(compile(model))`` runs the compiled forward and backward with the same
hooks; ``compile(DDP(model))`` traces DDP's forward, whose buffer broadcast is
a custom ``Function`` and so runs at every compiled call.
"""
import contextlib

import numpy as np

from ..autograd import grad_mode
from ..autograd.engine import queue_callback
from .module import Module

_FIRST_BUCKET_BYTES = 1024 * 1024


class _Bucket:
    __slots__ = ("params", "indices", "offsets", "buffer", "pending", "ready", "request",
                 "dtype")

    def __init__(self, params, indices):
        self.params = params
        self.indices = indices
        self.dtype = params[0]._data.dtype
        self.offsets, total = [], 0
        for p in params:
            self.offsets.append(total)
            total += p._data.size
        self.buffer = np.zeros(total, self.dtype)
        self.reset()

    def reset(self):
        self.pending = len(self.params)
        self.ready = [False] * len(self.params)
        self.request = None


class DistributedDataParallel(Module):
    """PyTorch's ``DistributedDataParallel`` (CPU tensors; one device per process)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, init_sync=True, **kwargs):
        super().__init__()
        from .. import distributed as dist
        from ..distributed._group import resolve
        self.module = module
        self.process_group = process_group
        self._pg = resolve(process_group)
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_cap_mb = 25 if bucket_cap_mb is None else bucket_cap_mb
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self._dist = dist
        self._params = [p for p in module.parameters() if p.requires_grad]
        if init_sync and self._pg.size() > 1:
            src = self._pg.ranks[0]
            with grad_mode.no_grad():
                for t in list(module.parameters()) + [b for b in module.buffers()]:
                    dist.broadcast(t, src, group=process_group)
        self._buckets, self._where = self._make_buckets()
        self._queued, self._next = False, 0    # _next: the bucket to start next
        self._handles = [p.register_post_accumulate_grad_hook(self._make_hook(i))
                         for i, p in enumerate(self._params)]

    # buckets --------------------------------------------------------------------------------
    def _make_buckets(self):
        buckets, where = [], {}
        current, size, cap = [], 0, _FIRST_BUCKET_BYTES
        limit = max(1, int(self.bucket_cap_mb * 1024 * 1024))
        order = list(range(len(self._params)))[::-1]
        for i in order:
            p = self._params[i]
            if current and (size >= cap or p._data.dtype != self._params[current[0]]._data.dtype):
                buckets.append(current)
                current, size, cap = [], 0, limit
            current.append(i)
            size += p._data.nbytes
        if current:
            buckets.append(current)
        made = []
        for b, members in enumerate(buckets):
            made.append(_Bucket([self._params[i] for i in members], members))
            for slot, i in enumerate(members):
                where[i] = (b, slot)
        return made, where

    def _make_hook(self, index):
        def hook(param):
            if not self.require_backward_grad_sync or self._pg.size() == 1:
                return
            self._mark_ready(index, param.grad)
        return hook

    def _mark_ready(self, index, grad):
        b, slot = self._where[index]
        bucket = self._buckets[b]
        if bucket.ready[slot]:
            return              # accumulated twice in one backward: the first copy is kept
        if not self._queued:
            queue_callback(self._finish)
            self._queued = True
            self._next = 0
        self._copy_in(bucket, slot, grad)
        bucket.ready[slot] = True
        bucket.pending -= 1
        self._launch_ready()
        for other in self._buckets:     # MPI progresses requests only when it is called
            if other.request is not None:
                other.request.Test()

    @staticmethod
    def _copy_in(bucket, slot, grad):
        p = bucket.params[slot]
        start = bucket.offsets[slot]
        view = bucket.buffer[start:start + p._data.size]
        if grad is None:
            view[...] = 0
        else:
            data = grad._data
            view[...] = (data if type(data) is np.ndarray else data.get()).reshape(-1)

    def _launch_ready(self):
        """Start the all-reduce of each full bucket, in bucket order: every rank must issue
        its collectives in one order, whichever gradients its backward makes first."""
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            self._start(self._buckets[self._next])
            self._next += 1

    def _start(self, bucket):
        from ..distributed._group import mpi
        MPI = mpi()
        bucket.request = self._pg.comm.Iallreduce(MPI.IN_PLACE, bucket.buffer, MPI.SUM)

    def _finish(self):
        """End of backward: every bucket reduced, averages written back into ``.grad``."""
        self._queued = False
        from ..distributed.collectives import poll
        missing = [i for i, p in enumerate(self._params)
                   if not self._buckets[self._where[i][0]].ready[self._where[i][1]]]
        used = None
        if missing and not self.find_unused_parameters:
            for b in self._buckets:
                b.reset()
            names = {id(p): n for n, p in self.module.named_parameters()}
            raise RuntimeError(
                "DistributedDataParallel: parameters got no gradient in this backward: "
                f"{[names.get(id(self._params[i]), i) for i in missing]}. Pass "
                "find_unused_parameters=True to DistributedDataParallel if some parameters "
                "are not used in producing the loss, or make sure every output takes part "
                "in it.")
        if self.find_unused_parameters:     # every rank: which parameters any rank used
            used = np.ones(len(self._params), np.int32)
            for i in missing:       # this rank's .grad so far (accumulated, or none: zeros)
                used[i] = 0
                b, slot = self._where[i]
                bucket = self._buckets[b]
                self._copy_in(bucket, slot, self._params[i].grad)
                bucket.ready[slot] = True
                bucket.pending -= 1
            self._launch_ready()
            from ..distributed._group import mpi
            poll(self._pg.comm.Iallreduce(mpi().IN_PLACE, used, mpi().SUM), self._pg.timeout,
                 "DistributedDataParallel (find_unused_parameters)")
        n = self._pg.size()
        for bucket in self._buckets:
            poll(bucket.request, self._pg.timeout, "DistributedDataParallel gradient all-reduce")
            np.divide(bucket.buffer, n, out=bucket.buffer)
            for slot, p in enumerate(bucket.params):
                if used is not None and used[bucket.indices[slot]] == 0:
                    continue        # no rank used it: its .grad is left alone
                start = bucket.offsets[slot]
                avg = bucket.buffer[start:start + p._data.size].reshape(p._data.shape)
                self._write_grad(p, avg)
            bucket.reset()

    @staticmethod
    def _write_grad(p, avg):
        from ..tensor import Tensor
        g = p._grad
        if g is None:
            p._grad = Tensor._make(avg.astype(p._data.dtype, copy=True))
        elif type(g._data) is np.ndarray and g._data.flags.writeable:
            np.copyto(g._data, avg, casting="unsafe")
            g._vc.value += 1
        else:
            p._grad = Tensor._make(type(g._data)(avg) if type(g._data) is np.ndarray
                                   else _to_device(avg, g._data))

    # the module -----------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if (self.broadcast_buffers and self.training and self.require_forward_param_sync
                and self._pg.size() > 1):
            self._sync_buffers()
        return self.module(*inputs, **kwargs)

    def _sync_buffers(self):
        from ..distributed._functions import broadcast_from
        src = self._pg.ranks[0]
        with grad_mode.no_grad():
            for b in self.module.buffers():
                b.copy_(broadcast_from(b, src, self.process_group))

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally inside the block; the first backward after it
        all-reduces the accumulated ``.grad``."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def __getstate__(self):
        raise TypeError("DistributedDataParallel cannot be pickled; save .module's state_dict")

    def join(self, *args, **kwargs):
        raise NotImplementedError("DistributedDataParallel.join (uneven inputs) is not supported")


def _to_device(host, like):
    import cupy
    return cupy.asarray(host, dtype=like.dtype)


class DataParallel(Module):
    """``nn.DataParallel``, PyTorch's single-process wrapper: calling it calls ``module``,
    with the tensor arguments moved to the first of ``device_ids`` (every cuda device by
    default; none without a GPU, where it calls ``module`` as it is, as PyTorch does). The
    batch is not split across several GPUs: one device runs it, with the same results
    (``DistributedDataParallel`` runs one process a device). The state-dict keys take the
    ``module.`` prefix, as PyTorch's."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        from ..device import device_count, is_available
        self.module = module
        if device_ids is None:
            device_ids = list(range(device_count())) if is_available() else []
        self.device_ids = [d if isinstance(d, int) else d.index for d in device_ids]
        self.output_device = output_device if output_device is not None else (
            self.device_ids[0] if self.device_ids else None)
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        where = f"cuda:{self.device_ids[0]}"
        return self.module(*_moved(inputs, where), **_moved(kwargs, where))


def _moved(x, where):
    """``x`` with every tensor in it (in tuples, lists and dicts) moved to ``where``."""
    from ..tensor import Tensor
    if isinstance(x, Tensor):
        return x.to(where)
    if isinstance(x, (tuple, list)):
        return type(x)(_moved(e, where) for e in x)
    if isinstance(x, dict):
        return {k: _moved(v, where) for k, v in x.items()}
    return x


DDP = DistributedDataParallel
__all__ = ["DistributedDataParallel", "DDP", "DataParallel"]
