"""The profiler's results: events, their averages, PyTorch's table, the Chrome trace.

``FunctionEvent`` is one recorded interval (an op, a backward node, a
``record_function`` block) with its children; ``EventList`` is a list of
them (or of ``FunctionEventAvg``, from ``key_averages()``) that prints
PyTorch's table:

    ----------  ------------  ------------  ------------  ------------  ------------  ------------
          Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls
    ----------  ------------  ------------  ------------  ------------  ------------  ------------
           pow        40.12%      20.100us        40.12%      20.100us      20.100us             1
    ...
    Self CPU time total: 50.100us

Times are kept in integer nanoseconds and reported in microseconds as
PyTorch does (``cpu_time_total`` is a float in us). Memory is bytes of
tensor storage an event allocated: ``self_cpu_memory_usage`` by the event
itself, ``cpu_memory_usage`` with its children.

With CUDA activity on a GPU, an op (or compiled kernel block) that ran on the
device carries the time between two CUDA events recorded around it
(``device_ns``): its ``device_time_total``; an event without its own
measurement (a backward node, a composite, a ``record_function`` block) totals
its children's, and ``self_device_time_total`` is the total less the
children's. The table then has PyTorch's "Self CUDA", "Self CUDA %", "CUDA
total" and "CUDA time avg" columns (the percentages are shares of the summed
self times, as PyTorch's legacy profiler kept kernel times on CPU events),
and the Chrome trace a track per device. The column layout, number
formats and sort keys follow ``torch.autograd.profiler_util`` so that tables
can be compared side by side (the table and the trace are written by ``report``).
Recording lives in ``record``.
"""
import gzip
import json

from .report import _build_table, _format_time, chrome_trace


class Interval:
    """``start``/``end`` in microseconds since the profiler started."""
    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class _Times:
    """The derived time attributes and their ``*_str`` forms, shared by events and averages."""
    __slots__ = ()

    @property
    def cpu_time(self):
        """Average CPU time per call, in us."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self):
        return self.self_cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self):
        """Average device (CUDA) time per call, in us."""
        return self.device_time_total / self.count if self.count else 0.0

    # PyTorch's older names for the device figures
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)
    node_id = -1
    is_async = is_remote = is_legacy = False
    flops = 0

    cpu_time_str = property(lambda self: _format_time(self.cpu_time))
    cpu_time_total_str = property(lambda self: _format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: _format_time(self.self_cpu_time_total))
    device_time_str = property(lambda self: _format_time(self.device_time))
    device_time_total_str = property(lambda self: _format_time(self.device_time_total))
    self_device_time_total_str = property(
        lambda self: _format_time(self.self_device_time_total))


class FunctionEvent(_Times):
    """One recorded interval. ``kind``: "op", "node" (backward), "annotation" (record_function)."""
    __slots__ = ("id", "name", "kind", "thread", "start_ns", "end_ns", "input_shapes",
                 "input_types", "stack", "cpu_children", "cpu_parent", "self_cpu_memory_usage",
                 "cpu_memory_usage", "frame", "_child_ns", "self_device_memory_usage",
                 "device_memory_usage", "device_ns", "device_start_ns", "device_index",
                 "cuda_events", "_device_total_ns", "_self_device_ns")
    count = 1

    def __init__(self, id, name, kind, thread, start_ns=0):
        self.id, self.name, self.kind, self.thread = id, name, kind, thread
        self.start_ns = self.end_ns = start_ns
        self.input_shapes = self.input_types = self.stack = None
        self.cpu_children = []
        self.cpu_parent = None
        self.self_cpu_memory_usage = self.cpu_memory_usage = 0
        self.self_device_memory_usage = self.device_memory_usage = 0
        self.frame = None       # the Python frame of an op function while it is open
        self._child_ns = 0
        # device timing (CUDA activity): the measured ns and where it ran, None where the
        # event was not measured; cuda_events holds the two events until they are read
        self.device_ns = self.device_start_ns = self.device_index = self.cuda_events = None
        self._device_total_ns = self._self_device_ns = 0

    @property
    def key(self):
        return self.name

    @property
    def time_range(self):
        return Interval(self.start_ns / 1000.0, self.end_ns / 1000.0)

    @property
    def cpu_time_total(self):
        return (self.end_ns - self.start_ns) / 1000.0

    @property
    def self_cpu_time_total(self):
        return (self.end_ns - self.start_ns - self._child_ns) / 1000.0

    @property
    def device_time_total(self):
        return self._device_total_ns / 1000.0

    @property
    def self_device_time_total(self):
        return self._self_device_ns / 1000.0

    @property
    def is_user_annotation(self):
        return self.kind == "annotation"

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={self.cpu_time_str} "
                f"start_us={self.start_ns / 1000.0:.3f} end_us={self.end_ns / 1000.0:.3f} "
                f"cpu_children={[c.id for c in self.cpu_children]} thread={self.thread} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg(_Times):
    """The events of one key (name, and input shapes or stack when grouped by them), summed."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self.input_shapes = self.stack = None
        self.cpu_children = self.cpu_parent = None
        self.is_user_annotation = False

    def add(self, other):
        if self.key is None:
            self.key = other.key
            self.input_shapes, self.stack = other.input_shapes, other.stack
            self.cpu_children, self.cpu_parent = other.cpu_children, other.cpu_parent
            self.is_user_annotation = other.is_user_annotation
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.device_memory_usage += other.device_memory_usage
        self.self_device_memory_usage += other.self_device_memory_usage
        return self

    def __iadd__(self, other):
        return self.add(other)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_total_str} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class EventList(list):
    """A list of events (or averages) with PyTorch's ``table``, ``key_averages`` and export."""

    def __init__(self, *args, profile_memory=False, trace_meta=None):
        super().__init__(*args)
        self._profile_memory = profile_memory
        self._trace_meta = trace_meta or {}
        self.use_device = self._trace_meta.get("use_device")     # "cuda" or None

    def _like(self, items):
        return EventList(items, profile_memory=self._profile_memory, trace_meta=self._trace_meta)

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0):
        """One ``FunctionEventAvg`` per name (and input shapes / top stack entries), in order
        of first appearance."""
        stats = {}
        for evt in self:
            key = (evt.key, evt.is_user_annotation)
            if group_by_input_shapes:
                key += (str(evt.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(evt.stack or ())[:group_by_stack_n]
            avg = stats.get(key)
            if avg is None:
                avg = stats[key] = FunctionEventAvg()
            avg.add(evt)
        for avg in stats.values():
            avg.stack = list(avg.stack or ())[:group_by_stack_n]
            if not group_by_input_shapes:
                avg.input_shapes = ""
        return self._like(stats.values())

    def total_average(self):
        total = FunctionEventAvg()
        for evt in self:
            total.add(evt)
        total.key = "Total"
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """PyTorch's table: one row per event, sorted (descending) by ``sort_by``."""
        return _build_table(self, sort_by, row_limit, max_src_column_width, max_name_column_width,
                            max_shapes_column_width, header, top_level_events_only, time_unit,
                            self._profile_memory, self.use_device)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path):
        """Write the events as Chrome trace-event JSON (Perfetto, chrome://tracing); a path
        ending in ``.gz`` is gzip-compressed."""
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "wt") as f:
            json.dump(chrome_trace(self, self._trace_meta, path), f)


_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
               "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
               "uint8": "unsigned char", "bool": "bool"}
_type_name_of = {}       # NumPy dtype -> name (str(dtype) is slow enough to show in profiles)


def type_name(value):
    """PyTorch's "Input type" string for an argument."""
    dt = getattr(getattr(value, "_data", None), "dtype", None)
    if dt is not None:
        name = _type_name_of.get(dt)
        if name is None:
            name = _type_name_of[dt] = _TYPE_NAMES.get(str(dt), str(dt))
        return name
    if isinstance(value, (bool, int, float, complex)):
        return "Scalar"
    return ""
