"""``tracegrad.autograd.profiler``: the names of ``torch.autograd.profiler``.

The recording is ``tracegrad.profiler``'s; this module gives its ``profile``
PyTorch's older signature (``profile(enabled=True, *, use_cuda=False,
use_device=None, record_shapes=False, profile_memory=False, with_stack=False,
...)``), and ``print(prof)`` prints one row per recorded event as the older
profiler did. ``use_device="cuda"`` (or the deprecated ``use_cuda=True``)
adds device times; without a GPU it warns at construction, as PyTorch's CPU
build does, and profiles the CPU.

``emit_nvtx()`` marks each eager op and backward node with an NVTX range
(through ``cupy.cuda.nvtx``), for Nsight Systems to show beside the kernels:
ranges are named after the primitive (``mul``) or the node (``MulBackward0``),
with ``", sizes = [[3, 4], []]"`` added under ``record_shapes=True``. As in
PyTorch, it synchronises the device on entry and exit, is not reentrant, and
without a GPU raises on entry (``enabled=False`` does nothing anywhere).
"""
import warnings

from .. import _hooks
from .. import profiler as _profiler
from ..profiler import ProfilerActivity, record_function
from ..profiler.events import EventList, FunctionEvent, FunctionEventAvg

__all__ = ["profile", "record_function", "emit_nvtx", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


class profile(_profiler.profile):
    """``torch.autograd.profiler.profile``; ``enabled=False`` records nothing."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        activities = [ProfilerActivity.CPU]
        if enabled:
            if use_cuda:
                warnings.warn("The attribute `use_cuda` will be deprecated soon, please use "
                              "``use_device = 'cuda'`` instead.", FutureWarning, stacklevel=2)
                use_device = "cuda"
            if use_device == "cuda":
                from ..device import is_available
                if is_available():
                    activities.append(ProfilerActivity.CUDA)
                else:
                    warnings.warn(_profiler.CUDA_UNAVAILABLE, stacklevel=2)
                    use_device = None
        self.use_device = use_device
        self.use_cuda = use_device == "cuda"
        super().__init__(activities=activities, record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules)
        self.enabled = enabled


class emit_nvtx:
    """``with emit_nvtx():`` pushes an NVTX range around each op and backward node."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.entered = False
        self._hook_cm = self._prev_node_hook = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("NVTX annotation context manager is not reentrant")
        from ..device import cupy
        from . import engine
        cupy().cuda.Device().synchronize()      # the clear error without a GPU, as PyTorch's
        self.entered = True
        nvtx = cupy().cuda.nvtx
        shapes = self.record_shapes

        def on_bind(prim, args, params, inner):
            nvtx.RangePush(_range_name(prim.name, args, shapes))
            try:
                return inner(prim, args, params)
            finally:
                nvtx.RangePop()

        below = engine.node_hook

        def on_node(node, grads, *rest):
            nvtx.RangePush(_range_name(node.name(), grads, shapes))
            try:
                return (below or engine._run_node)(node, grads, *rest)
            finally:
                nvtx.RangePop()

        self._hook_cm = _hooks.bind_hook_installed(on_bind, all_threads=True)
        self._hook_cm.__enter__()
        self._prev_node_hook, engine.node_hook = below, on_node
        return self

    def __exit__(self, *exc):
        if not self.enabled or not self.entered:
            return False
        from ..device import cupy
        from . import engine
        engine.node_hook = self._prev_node_hook
        self._hook_cm.__exit__(None, None, None)
        self._hook_cm = None
        self.entered = False
        cupy().cuda.Device().synchronize()      # torch.cuda.synchronize on the current device
        return False


def _range_name(name, values, shapes):
    if not shapes:
        return name
    dims = [list(v.shape) if hasattr(v, "_data") else [] for v in values]
    return f"{name}, sizes = {dims}"
