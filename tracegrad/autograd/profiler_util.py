"""PyTorch's ``torch.autograd.profiler_util`` path: the profiler's events and their tables,
which live in ``tracegrad.profiler.events`` and ``tracegrad.profiler.report``."""
from ..profiler.events import *  # noqa: F401,F403
from ..profiler.report import SORT_KEYS, _format_memory, _format_time  # noqa: F401 - PyTorch's
