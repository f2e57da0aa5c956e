"""Which Python frames are public op functions, and the events made of them: an op is
reported under the name of the function the caller used (``Recorder`` walks the frames
from ``bind`` out to the caller; see ``record``'s docstring)."""
import inspect
import sys
import time
import types

from .events import FunctionEvent, type_name

_OP_MODULES = ("tracegrad.ops", "tracegrad.creation", "tracegrad.nn.functional")
_NOT_OP_MODULES = ("tracegrad.ops.core", "tracegrad.ops.rules", "tracegrad.ops.binding",
                   "tracegrad.ops.prim_node", "tracegrad.ops.inplace_views",
                   "tracegrad.ops.op_errors")
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


class FrameEvents:
    """The frame-tracking half of ``Recorder``: op-function frames opened, promoted and
    closed as events (``_walk`` finds them, ``_sync`` matches them to the open events)."""

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
