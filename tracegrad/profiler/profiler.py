"""PyTorch's profiler (``torch.profiler``, ``torch.autograd.profiler``) for tracegrad.

    with tracegrad.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with tracegrad.profiler.record_function("model"):
            loss = (x ** 2).mm(w).sum()
        loss.backward()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

What is recorded, and under which name:
- Eager ops. Every primitive call passes ``ops.core.bind``, which hands it to
  ``_hooks.bind_hook`` while a profiler records. An op is reported under the
  name of the public function the caller used (``mm``, ``pow``, ``add_``),
  read off the Python frames between the caller and ``bind``; a composite
  (``mean``, ``softmax``, ``nn.functional.linear``) is one event enclosing the
  ops it calls, and a public function that calls one op is that one event.
  Public functions are those of ``tracegrad.ops``, ``tracegrad.creation`` and
  ``tracegrad.nn.functional`` (``profiler.record._OP_MODULES``) and a
  few ``Tensor`` methods.
- Backward. Each node the engine runs is an event named ``node.name()``
  (``PowBackward0``, ``torch::autograd::AccumulateGrad``) enclosing the ops of
  its derivative; the engine calls ``engine.node_hook`` only while recording.
- ``record_function(name)`` blocks: their CPU total includes what ran inside,
  their self time does not.

When no profiler records, the cost is the ``bind_hook is None`` check in
``bind``, one ``node_hook is None`` check per backward call, and one global
read per ``record_function`` block.

For the compiler runtime (and other library code): report intervals with
``record_function``; where the call is hot, test ``_active()`` first so that
nothing is built when no profiler records::

    if profiler._active():
        with profiler.record_function(f"compiled:{fn_name}:forward"):
            outs = run_forward(*args)
    else:
        outs = run_forward(*args)

Names: ``compiled:<fn name>:forward`` and ``compiled:<fn name>:backward`` for
running generated code, ``compile:<fn name>:<phase>`` for compile phases
(``trace``, ``autodiff``, ``passes``, ``codegen``, ``load``), ``<fn name>``
being the user's function. They are table rows like any block, and in the
Chrome trace their category is ``kernel`` or ``compile``; eager ops that run
inside nest under them.

CUDA. With ``ProfilerActivity.CUDA`` (in the default activities where a GPU
is present) each eager op on cuda tensors, and each block opened with
``record_function(name, device="cuda")`` (the compiled runtime's kernels),
is timed on the device by two CUDA events recorded around it; the table gets
PyTorch's CUDA columns ("Self CUDA", "Self CUDA %", "CUDA total", "CUDA time
avg"), ``sort_by="cuda_time_total"`` sorts by them, and the Chrome trace a
"GPU N" process with the device intervals. Device times belong to the op
rows themselves (as PyTorch's legacy profiler kept them): there are no
separate rows named after CUDA kernels. Without a GPU, asking for CUDA
activity does what a CPU build of PyTorch does: it warns "CUDA is not
available, disabling CUDA profiling" when recording starts and profiles the
CPU; with only CUDA asked for, it then raises "No activities specified for
the profiler". CPU events are recorded whenever a profiler records (they
carry the device times), even with CUDA activity alone.

Limits: host times of ops on a GPU measure their launches (the device times
are the CUDA columns), memory is bytes of tensor
storage allocated by ops (frees are not tracked), and an in-place update that
does not pass ``bind`` (``p -= lr * g`` under ``no_grad`` writes through NumPy)
is not an event. One profiler records at a time, best from one thread.
"""
import contextlib
import enum
import os
import socket
import sys
import time
import warnings

from .events import EventList, FunctionEvent, FunctionEventAvg
from .record import Recorder

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg"]

_current = None         # the Recorder of the profile that records now, or None


def _active():
    """Whether a profiler records now (for library code that reports its own events)."""
    return _current is not None


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1            # device times from CUDA events, where a GPU is present


def supported_activities():
    from ..device import is_available
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA} if is_available() \
        else {ProfilerActivity.CPU}


CUDA_UNAVAILABLE = "CUDA is not available, disabling CUDA profiling"


def _cuda_activity(asked, cpu):
    """Whether to time device work: ``asked`` for CUDA, and a GPU present. Without one,
    PyTorch's CPU build warns, and raises when nothing is left to record."""
    if not asked:
        return False
    from ..device import is_available
    if is_available():
        return True
    warnings.warn(CUDA_UNAVAILABLE, stacklevel=2)
    if not cpu:
        raise AssertionError("No activities specified for the profiler")
    return False


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """PyTorch's step schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle,
    ``warmup`` (not recorded here either) and ``active`` recorded steps, ``repeat`` times
    (0: until the profiler stops). The last active step of a cycle saves the trace."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(f"schedule: expected wait >= 0, warmup >= 0, active > 0, repeat >= 0, "
                         f"skip_first >= 0, got wait={wait}, warmup={warmup}, active={active}, "
                         f"repeat={repeat}, skip_first={skip_first}")
    cycle = wait + warmup + active

    def schedule_fn(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        k = step % cycle
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if k < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


def _always_record(step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An ``on_trace_ready`` that writes ``<worker>.<ms>.pt.trace.json[.gz]`` into ``dir_name``."""
    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json" + (".gz" if use_gzip
                                                                           else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler


class profile:
    """``with profile(...) as prof:`` or ``prof.start()`` / ``prof.stop()``; see the module doc.

    Arguments follow ``torch.profiler.profile``. ``with_flops``, ``with_modules`` and the rest
    are accepted and have no effect; ``schedule``/``on_trace_ready``/``step()`` work as in
    PyTorch (warmup steps are not recorded).
    """

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 use_cuda=None, custom_trace_id_callback=None):
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead",
                          FutureWarning, stacklevel=2)
        self.activities = set(activities) if activities else supported_activities()
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.enabled = True
        self.schedule = schedule or _always_record
        self._record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._step_rf = None
        self._recording = False
        self._recorder = None   # made at the first start, so it sees the options as set then
        self._events = None

    # public API ---------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        if not self.enabled:
            return
        self.step_num = 0
        self._action = self.schedule(0)
        if self._action in _RECORDING:
            self._start_recording()
        self._enter_step()

    def stop(self):
        if not self.enabled:
            return
        self._exit_step()
        if self._recording:
            self._stop_recording()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        self._action = ProfilerAction.NONE

    def step(self):
        """Mark the start of the next step (training iteration) for ``schedule``."""
        if not self.enabled:
            return
        self._exit_step()
        prev = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        now = self._action in _RECORDING
        if self._recording and (prev is ProfilerAction.RECORD_AND_SAVE or not now):
            self._stop_recording()
            if prev is ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if now and not self._recording:
            if self._recorder is not None:
                self._recorder.roots = []       # a new cycle, a new trace
            self._start_recording()
        self._enter_step()

    def events(self):
        """Every recorded event, parents before their children, in order of start."""
        if self._events is None:
            flat = []
            todo = list(reversed(self._recorder.roots if self._recorder else ()))
            while todo:
                evt = todo.pop()
                flat.append(evt)
                todo.extend(reversed(evt.cpu_children))
            self._events = EventList(flat, profile_memory=self.profile_memory,
                                     trace_meta=self._trace_meta())
        return self._events

    function_events = property(events)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, *args, **kwargs):
        return self.events().table(*args, **kwargs)

    def total_average(self):
        return self.events().total_average()

    @property
    def self_cpu_time_total(self):
        return self.events().self_cpu_time_total

    def export_chrome_trace(self, path):
        path = os.fspath(path)
        self.events().export_chrome_trace(path)
        return path

    def __str__(self):
        return str(self.events())

    # recording ----------------------------------------------------------------------------
    def _trace_meta(self):
        return {"pid": os.getpid(), "record_shapes": self.record_shapes,
                "profile_memory": self.profile_memory,
                "base_time_ns": self._recorder.base_time_ns if self._recorder else 0,
                "use_device": "cuda" if self._recorder is not None and self._recorder.cuda
                else None}

    def _wants_cuda(self):
        """Whether this profile times device work (checked when recording starts)."""
        return _cuda_activity(ProfilerActivity.CUDA in self.activities,
                              ProfilerActivity.CPU in self.activities)

    def _enter_step(self):
        if self._record_steps:
            self._step_rf = record_function(f"ProfilerStep#{self.step_num}")
            self._step_rf.__enter__()

    def _exit_step(self):
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None

    def _start_recording(self):
        global _current
        if _current is not None:
            raise RuntimeError("profile: another profiler is already recording; tracegrad records "
                               "with one profiler at a time (stop the other one first)")
        self._events = None
        cuda = self._wants_cuda()
        if self._recorder is None:
            self._recorder = Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                                      cuda)
        self._recorder.start()
        _current = self._recorder
        self._recording = True

    def _stop_recording(self):
        global _current
        _current = None
        self._recorder.stop()
        self._recording = False
        self._events = None


class record_function(contextlib.ContextDecorator):
    """``with record_function("name"):`` (or ``@record_function("name")``) records the block
    as one event; it costs one global read when no profiler records.

    ``device="cuda"`` (tracegrad's own keyword, for library code that launches kernels
    itself, such as a compiled function's CUDA tier): with CUDA activity the block is
    also timed on the device, by CUDA events recorded around it."""

    def __init__(self, name, args=None, *, device=None):
        self.name = name
        self.args = args
        self.device = device
        self._open = []         # one entry per active use (a decorator may recurse)

    def __enter__(self):
        rec = _current
        if rec is None:
            self._open.append(None)
        else:
            self._open.append((rec, rec.begin_annotation(self.name, sys._getframe(1),
                                                         self.device)))
        return self

    def __exit__(self, *exc):
        entry = self._open.pop() if self._open else None
        if entry is not None and entry[0] is _current:
            entry[0].end_annotation(entry[1])
        return False

