"""The profiler's recorder: builds the event tree from op calls, backward nodes and blocks.

``Recorder.start()`` installs ``on_bind`` as the bind hook and ``on_node`` as
the engine's node hook; ``stop()`` removes them and closes what is still
open. Events are kept per thread as a stack of open events; a finished event
hangs under the event open above it (its ``cpu_parent``).

An op is named after the public function the caller used (``frames``). ``_walk`` reads
the Python frames from ``bind`` out to the caller and keeps those of public
op functions (``_op_codes``); ``_sync`` then closes the events of functions
that have returned and opens events for those newly entered. The innermost
new function is opened lazily: the op it calls is named after it, and only
if it makes a second call is it turned into an enclosing event
(``_promote``), so that the common one-call function costs one event. A
function event left with one op child is merged with it when it closes.

With ``cuda`` (CUDA activity on a GPU), an op that touches a cuda tensor, and a
``record_function(name, device="cuda")`` block (a compiled function's kernels),
get two CUDA events recorded around them; ``stop()`` waits for the device, reads
the elapsed times into ``device_ns`` and totals them up the tree. Ops on CPU
tensors record no CUDA event.
"""
import itertools
import os
import sys
import threading
import time

import numpy as np

from .. import _hooks
from ..autograd import engine
from ..device import loaded_cupy
from .events import FunctionEvent
from .frames import FrameEvents, _clock, _describe, _op_codes

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _library_dirs():
    """Where tracegrad's own code lives (the package, its code generator and runtime)."""
    return (_PKG_DIR + os.sep,)


def _user_stack(f, library):
    out = []
    while f is not None:
        code = f.f_code
        if not code.co_filename.startswith(library):
            out.append(f"{code.co_filename}({f.f_lineno}): {code.co_name}")
        f = f.f_back
    return out


def _index_of(device):
    """The GPU index of a device ("cuda:N" or a device object), None for plain "cuda"."""
    text = str(device)
    return int(text.split(":", 1)[1]) if ":" in text else None


class _ThreadState:
    __slots__ = ("stack", "roots", "tid", "lazy")

    def __init__(self):
        self.stack = []         # open events, outermost first
        self.roots = []         # finished events without a parent
        self.tid = threading.get_native_id()
        # The last op event, named after the op function that made it, while that function
        # may still make more calls: (event, frame, primitive name, shapes, types) or None.
        self.lazy = None


class Recorder(FrameEvents):
    """The events of one profile; ``start``/``stop`` may alternate (a ``schedule``'s cycles)."""

    def __init__(self, record_shapes=False, profile_memory=False, with_stack=False, cuda=False):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.cuda = cuda        # time device work with CUDA events (a GPU is present)
        self._timed = []        # events whose CUDA events are still to be read
        self._refs = {}         # GPU index -> (CUDA event, host ns) recorded together at its
        #                         first timed event: the offset that puts its times on the
        #                         host clock (an event pair is timed on one GPU only)
        self.roots = []         # finished top-level events of all threads, by start
        self.t0 = None          # perf_counter_ns at the first start: times count from here
        self.base_time_ns = 0   # the wall clock then, for the trace
        self._threads = {}
        self._ids = itertools.count(1)
        self._codes = self._kinds = {}
        self._library = ()
        self._hook_cm = None

    def start(self):
        self._codes = _op_codes()
        self._library = _library_dirs()
        self._kinds = {}        # code -> 2: op function, 1: other tracegrad code, 0: foreign
        if self.t0 is None:
            self.t0 = _clock()
            self.base_time_ns = time.time_ns()
        self._threads = {}
        self._refs = {}
        self._hook_cm = _hooks.bind_hook_installed(self.on_bind, all_threads=True)
        self._hook_cm.__enter__()
        engine.node_hook = self.on_node

    def stop(self):
        engine.node_hook = None
        self._hook_cm.__exit__(None, None, None)
        self._hook_cm = None
        end = _clock() - self.t0
        for st in list(self._threads.values()):
            st.lazy = None
            self._close_above(st, None, end)
        if self.cuda:
            self._read_device_times()
        for st in list(self._threads.values()):
            if self.cuda:
                for root in st.roots:
                    self._device_totals(root)
            self.roots.extend(st.roots)
            st.roots = []
        self.roots.sort(key=lambda e: e.start_ns)

    # device time ----------------------------------------------------------------------------
    def _cuda_begin(self, evt, index=None):
        """A CUDA event before ``evt``'s work on GPU ``index`` (None: the current one)."""
        cp = loaded_cupy()
        if index is None:
            index = cp.cuda.runtime.getDevice()
        with cp.cuda.Device(index):
            if index not in self._refs:
                ref = cp.cuda.Event()
                ref.record()
                self._refs[index] = (ref, _clock() - self.t0)
            start = cp.cuda.Event()
            start.record()
        evt.cuda_events = (start, None)
        evt.device_index = index

    def _cuda_end(self, evt):
        cp = loaded_cupy()
        with cp.cuda.Device(evt.device_index):
            end = cp.cuda.Event()
            end.record()
        evt.cuda_events = (evt.cuda_events[0], end)
        self._timed.append(evt)

    def _read_device_times(self):
        """Wait for the devices, then read every pending pair of CUDA events."""
        if not self._timed:
            return
        cp = loaded_cupy()
        last = {evt.device_index: evt for evt in self._timed}
        for evt in last.values():
            evt.cuda_events[1].synchronize()
        elapsed = cp.cuda.get_elapsed_time
        for evt in self._timed:
            start, end = evt.cuda_events
            ref, ref_host = self._refs[evt.device_index]
            evt.device_ns = int(elapsed(start, end) * 1e6)
            evt.device_start_ns = ref_host + int(elapsed(ref, start) * 1e6)
            evt.cuda_events = None
        self._timed = []

    def _device_totals(self, evt):
        """Fill ``evt``'s device totals from its measurement, else from its children."""
        evt.cuda_events = None      # a block still open at stop() has no end: unmeasured
        kids = 0
        for c in evt.cpu_children:
            kids += self._device_totals(c)
        total = evt.device_ns if evt.device_ns is not None else kids
        evt._device_total_ns = total
        evt._self_device_ns = max(total - kids, 0)
        return total

    @staticmethod
    def _on_gpu(args, params):
        """The GPU an op runs on (the first cuda tensor's, as its same-device check makes
        it), or None for a CPU op."""
        for a in args:
            data = getattr(a, "_data", None)
            if data is not None and type(data) is not np.ndarray:
                return data.device.id
        dev = params.get("device")     # a copy to a GPU
        return dev.index if dev is not None and getattr(dev, "type", None) == "cuda" else None

    def _state(self):
        ident = threading.get_ident()
        st = self._threads.get(ident)
        if st is None:
            st = self._threads[ident] = _ThreadState()
        return st

    def on_bind(self, prim, args, params, inner):
        st = self._state()
        chain, user = self._walk(st, sys._getframe(1))
        frame = self._sync(st, chain, lazy=True)
        name = prim.name
        evt = FunctionEvent(next(self._ids), name if frame is None else self._name_of(frame),
                            "op", st.tid)
        if self.record_shapes:
            shapes, types_ = _describe(args)
            evt.input_shapes, evt.input_types = (
                (shapes, types_) if frame is None else _describe(self._frame_args(frame)))
        if self.with_stack:
            evt.stack = _user_stack(user, self._library)
        st.stack.append(evt)
        t0 = self.t0
        out = None
        gpu = self._on_gpu(args, params) if self.cuda else None
        timed = gpu is not None
        if timed:
            self._cuda_begin(evt, gpu)
        evt.start_ns = _clock() - t0
        try:
            out = inner(prim, args, params)
            return out
        finally:            # an op that raises is recorded too, as PyTorch does
            evt.end_ns = _clock() - t0
            if timed:
                self._cuda_end(evt)
            self._close_above(st, evt, evt.end_ns)
            st.stack.pop()
            if self.profile_memory:
                data = getattr(out, "_data", None)
                if data is not None and out._base is None:
                    if type(data) is np.ndarray:
                        evt.self_cpu_memory_usage = data.nbytes
                    else:
                        evt.self_device_memory_usage = data.nbytes
            self._finish(st, evt)
            if frame is not None:
                st.lazy = (evt, frame, name) + ((shapes, types_) if self.record_shapes else
                                                 (None, None))

    def on_node(self, node, grads, *rest):
        st = self._state()
        chain, user = self._walk(st, sys._getframe(1))
        self._sync(st, chain)
        evt = FunctionEvent(next(self._ids), node.name(), "node", st.tid)
        evt.frame = sys._getframe(0)    # the ops of the node's derivative run below this frame
        if self.record_shapes:
            evt.input_shapes, evt.input_types = _describe(grads)
        if self.with_stack:
            evt.stack = _user_stack(user, self._library)
        st.stack.append(evt)
        t0 = self.t0
        evt.start_ns = _clock() - t0
        try:
            return engine._run_node(node, grads, *rest)
        finally:
            evt.end_ns = _clock() - t0
            self._close_above(st, evt, evt.end_ns)
            st.stack.pop()
            self._finish(st, evt)

    def begin_annotation(self, name, caller, device=None):
        st = self._state()
        chain, _ = self._walk(st, caller)
        self._sync(st, chain)
        evt = FunctionEvent(next(self._ids), name, "annotation", st.tid)
        evt.frame = caller              # the block's ops run below the frame that opened it
        if self.record_shapes:
            evt.input_shapes, evt.input_types = [], []
        st.stack.append(evt)
        if self.cuda and device is not None and str(device).startswith("cuda"):
            # kernels launched by library code, not through ops ("cuda": the current GPU)
            self._cuda_begin(evt, _index_of(device))
        evt.start_ns = _clock() - self.t0
        return evt

    def end_annotation(self, evt):
        end = _clock() - self.t0
        st = self._state()
        if not any(e is evt for e in st.stack):
            return          # closed already: the profiler stopped inside the block
        st.lazy = None
        self._close_above(st, evt, end)
        st.stack.pop()
        evt.end_ns = end
        if evt.cuda_events is not None:
            self._cuda_end(evt)
        self._finish(st, evt)

    # the event tree -----------------------------------------------------------------------
    def _finish(self, st, evt):
        """``evt`` has been popped: total its children and hang it under the open parent."""
        evt.frame = None
        kids = evt.cpu_children
        if kids:
            evt._child_ns = sum(c.end_ns - c.start_ns for c in kids)
            evt.cpu_memory_usage = evt.self_cpu_memory_usage + sum(c.cpu_memory_usage
                                                                   for c in kids)
            evt.device_memory_usage = evt.self_device_memory_usage + sum(
                c.device_memory_usage for c in kids)
        else:
            evt.cpu_memory_usage = evt.self_cpu_memory_usage
            evt.device_memory_usage = evt.self_device_memory_usage
        if st.stack:
            evt.cpu_parent = st.stack[-1]
            st.stack[-1].cpu_children.append(evt)
        else:
            st.roots.append(evt)

    def _close_above(self, st, evt, end):
        """Close the events opened after ``evt`` (all of them for None): op-function frames
        end with their last child, anything else left open ends at ``end``."""
        stack = st.stack
        while stack and stack[-1] is not evt:
            top = stack[-1]
            if top.kind == "frame":
                self._close_frame(st)
            else:
                stack.pop()
                top.end_ns = end
                self._finish(st, top)
