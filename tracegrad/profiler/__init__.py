"""The profiler, PyTorch's ``torch.profiler`` (``torch.autograd.profiler`` is served from
here too, by ``tracegrad.autograd.profiler``).

- ``profiler``: ``profile``, the context the user opens, its schedule, activities and exports;
- ``record``: the ``Recorder`` that hooks every op, backward node and compiled call while a
  profile records;
- ``events``: what it records (``FunctionEvent``), and the tables and traces made of them
  (``EventList``), in PyTorch's formats.
"""
from .events import EventList, FunctionEvent, FunctionEventAvg
from .profiler import (CUDA_UNAVAILABLE, ProfilerAction, ProfilerActivity, _active,  # noqa: F401
                      profile, record_function, schedule, supported_activities,
                      tensorboard_trace_handler)

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg"]
