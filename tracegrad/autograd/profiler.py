"""``tracegrad.autograd.profiler``: the names of ``torch.autograd.profiler``.

The recording is ``tracegrad.profiler``'s; this module gives its ``profile``
PyTorch's older signature (``profile(enabled=True, *, use_cuda=False,
record_shapes=False, profile_memory=False, with_stack=False, ...)``), and
``print(prof)`` prints one row per recorded event as the older profiler did.
"""
from .. import profiler as _profiler
from ..profiler import record_function
from .profiler_util import EventList, FunctionEvent, FunctionEventAvg

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]


class profile(_profiler.profile):
    """``torch.autograd.profiler.profile``; ``enabled=False`` records nothing."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules)
        self.enabled = enabled
