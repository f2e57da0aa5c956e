"""The profiler's recorder: builds the event tree from op calls, backward nodes and blocks.

``Recorder.start()`` installs ``on_bind`` as the bind hook and ``on_node`` as
the engine's node hook; ``stop()`` removes them and closes what is still
open. Events are kept per thread as a stack of open events; a finished event
hangs under the event open above it (its ``cpu_parent``).

An op is named after the public function the caller used. ``_walk`` reads
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
import inspect
import itertools
import os
import sys
import threading
import time
import types

import numpy as np

from .. import _hooks
from ..autograd import engine
from ..device import loaded_cupy
from .events import FunctionEvent, type_name

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OP_MODULES = ("tracegrad.ops", "tracegrad.creation", "tracegrad.nn.functional")
_NOT_OP_MODULES = ("tracegrad.ops.core", "tracegrad.ops.rules")
_TENSOR_METHODS = ("to", "cpu", "cuda", "type", "float", "double", "half", "long", "int", "bool")
_clock = time.perf_counter_ns


_codes_cache = (None, None)


def _op_codes():
    """Code object of each public op function -> the name it is reported under (None: the
    ``name`` argument of ``core.inplace``). Looked up when recording starts, so that modules
    imported later (nn.functional) count; rebuilt only when those modules change."""
    global _codes_cache
    from ..ops import core
    from ..tensor import Tensor
    mods = [(name, mod) for name, mod in list(sys.modules.items())
            if mod is not None and name.startswith(_OP_MODULES) and name not in _NOT_OP_MODULES]
    key = tuple((name, id(mod)) for name, mod in mods)
    if _codes_cache[0] == key:
        return _codes_cache[1]
    names = {}
    for modname, mod in mods:
        for attr, fn in list(vars(mod).items()):
            if type(fn) is types.FunctionType and fn.__module__ == modname \
                    and not attr.startswith("_"):
                # a composite under a decorator (declare.backward_name) runs as its own code
                names.setdefault(_inner(fn).__code__, set()).add(fn.__name__)
    for attr in _TENSOR_METHODS:
        fn = Tensor.__dict__.get(attr)
        if type(fn) is types.FunctionType:
            names.setdefault(_inner(fn).__code__, set()).add(attr)
    # A code object behind several ops (a factory's inner function) names none of them: its
    # frames are passed over and the primitive's own name is reported.
    codes = {code: n.pop() for code, n in names.items() if len(n) == 1}
    for attr in ("inplace", "_inplace"):
        fn = getattr(core, attr, None)
        if fn is not None:
            codes[fn.__code__] = None
    _codes_cache = (key, codes)
    return codes


def _inner(fn):
    """The function a ``functools.wraps`` decorator wraps, else ``fn``."""
    while type(getattr(fn, "__wrapped__", None)) is types.FunctionType:
        fn = fn.__wrapped__
    return fn


def _describe(values):
    """PyTorch's "Input Dims" and "Input type": a shape per tensor, [] for anything else."""
    shapes, types_ = [], []
    for v in values:
        data = getattr(v, "_data", None)
        shapes.append(list(data.shape) if data is not None and hasattr(data, "shape") else [])
        types_.append(type_name(v))
    return shapes, types_


def _library_dirs():
    """Where tracegrad's own code lives: the package, and ``tracegrad.codegen`` and
    ``tracegrad.runtime`` (kept beside it, see pyproject.toml) once they are imported."""
    dirs = [_PKG_DIR + os.sep]
    for name in ("tracegrad.codegen", "tracegrad.runtime"):
        mod = sys.modules.get(name)
        dirs += [os.path.abspath(d) + os.sep for d in getattr(mod, "__path__", ())]
    return tuple(dirs)


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


class Recorder:
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

    def _close_frame(self, st):
        evt = st.stack.pop()
        evt.kind = "op"
        kids = evt.cpu_children
        if len(kids) == 1 and kids[0].kind == "op":
            # A public function that made one op call is that op, under the function's name.
            only = kids[0]
            evt.start_ns, evt.end_ns = only.start_ns, only.end_ns
            evt.self_cpu_memory_usage = only.self_cpu_memory_usage
            evt.self_device_memory_usage = only.self_device_memory_usage
            if only.cuda_events is not None:    # the measurement goes with the merged event
                evt.cuda_events, evt.device_index = only.cuda_events, only.device_index
                self._timed[self._timed.index(only)] = evt
            evt.cpu_children = only.cpu_children
            for c in evt.cpu_children:
                c.cpu_parent = evt
            if evt.stack is None:
                evt.stack = only.stack
        elif kids:
            evt.end_ns = kids[-1].end_ns
        self._finish(st, evt)

    def _frame_args(self, frame):
        """The arguments an op function was called with, for its "Input Shapes"."""
        code = frame.f_code
        loc = frame.f_locals
        if self._codes[code] is None:      # core.inplace(prim, name, target, *others)
            return [loc.get("target")] + list(loc.get("others", ()))
        n = code.co_argcount + code.co_kwonlyargcount
        values = [loc.get(v) for v in code.co_varnames[:n]]
        if code.co_flags & inspect.CO_VARARGS:     # reshape(input, *shape)
            values.extend(loc.get(code.co_varnames[n], ()))
        return values

    def _name_of(self, frame):
        name = self._codes[frame.f_code]
        if name is None:        # core.inplace: the method's name is its ``name`` argument
            name = frame.f_locals.get("name") or frame.f_code.co_name
        return name

    def _walk(self, st, f):
        """The public op frames from ``f`` out to the user's code, outermost first, and the
        frame the walk stopped at. Frames outside the innermost open block or backward node
        are not looked at: their events are open below it already."""
        stop = None
        for evt in reversed(st.stack):
            if evt.kind != "frame":
                stop = evt.frame
                break
        kinds = self._kinds
        chain = []
        while f is not None and f is not stop:
            code = f.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = (2 if code in self._codes else
                                      1 if code.co_filename.startswith(self._library) else 0)
            if kind == 2:
                chain.append(f)
            elif kind == 0:
                break
            f = f.f_back
        chain.reverse()
        return chain, f

    def _sync(self, st, chain, lazy=False):
        """Match the open op-function events to ``chain``: close those whose function has
        returned, open those newly entered. With ``lazy``, the innermost new frame is not
        opened but returned: the op about to run is named after it, and becomes its first
        child only if it makes another call (``_promote``)."""
        stack = st.stack
        k = len(stack)
        while k and stack[k - 1].kind == "frame":
            k -= 1
        j = 0
        while j < len(stack) - k and j < len(chain) and stack[k + j].frame is chain[j]:
            j += 1
        while len(stack) > k + j:
            self._close_frame(st)
        pending = st.lazy
        if pending is not None:
            st.lazy = None
            if j < len(chain) and chain[j] is pending[1] and self._promote(st, pending):
                j += 1
        last = len(chain) - 1 if lazy else len(chain)
        if j < last:
            now = _clock() - self.t0
            for frame in chain[j:last]:
                evt = FunctionEvent(next(self._ids), self._name_of(frame), "frame", st.tid, now)
                evt.frame = frame
                if self.record_shapes:
                    evt.input_shapes, evt.input_types = _describe(self._frame_args(frame))
                stack.append(evt)
        return chain[-1] if lazy and j < len(chain) else None

    def _promote(self, st, pending):
        """The function that made the last op call made another: it becomes an open event
        with that op (under the primitive's name again) as its first child."""
        op, frame, prim_name, shapes, types_ = pending
        parent = op.cpu_parent
        siblings = parent.cpu_children if parent is not None else st.roots
        if not siblings or siblings[-1] is not op:
            return False        # not where it was left (cannot happen while frames nest)
        siblings.pop()          # it hangs under the new event now, which is open
        evt = FunctionEvent(next(self._ids), op.name, "frame", st.tid, op.start_ns)
        evt.frame = frame
        evt.input_shapes, evt.input_types, evt.stack = op.input_shapes, op.input_types, op.stack
        op.name, op.input_shapes, op.input_types = prim_name, shapes, types_
        op.cpu_parent = evt
        evt.cpu_children.append(op)
        st.stack.append(evt)
        return True
