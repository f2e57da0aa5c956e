"""Interposition points for tracing and profiling, per thread (as grad mode is).

The eager hot path pays one ``None`` check: ``bind`` reads ``state.bind_hook`` and,
when a tracer or profiler is active in this thread, hands the call to it. Hooks stack:
each receives ``inner``, the next one down (the plain eager ``bind`` at the bottom), and
must call it to get the result tensor.

    def hook(prim, args, params, inner):
        out = inner(prim, args, params)
        ...                       # record, time, ...
        return out

    with bind_hook_installed(hook):
        ...

``_hooks.tracer`` (the ``trace.Tracer`` recording this thread's ops while a compiled
function is traced) and ``_hooks.bind_hook`` read and write this thread's state: a trace
in one thread never sees, or records, another thread's eager work. A profiler records
every thread: its hook is installed with ``all_threads=True``, as the default a thread
without a hook of its own uses.
"""
import contextlib
import sys
import threading
import types


class _State(threading.local):
    bind_hook = None        # callable(prim, args, params) -> Tensor, or None
    tracer = None           # the active ``trace.Tracer`` of this thread, or None
    draw_hook = None        # a random draw inside vmap (``_vmap``): callable, or None


state = _State()


class Census:
    """How many of something (hooks, modes) are active now, in any thread. The hot path
    reads ``n`` (a slot: several times faster than a thread-local attribute) and reads the
    thread's own state only where ``n`` is not 0."""
    __slots__ = ("n", "_lock")

    def __init__(self):
        self.n, self._lock = 0, threading.Lock()

    def add(self, k):
        with self._lock:
            self.n += k


# The plain eager ``bind`` (``ops.binding.apply_plain``), at the bottom of every stack of
# hooks. ``ops.binding`` sets it when it is imported: the op layer sits above this module.
apply_plain = None

INSTALLED = Census()    # bind hooks installed now: while none is, ``bind`` goes straight on
TRACING = Census()      # tracers active now: while none is, ``Tensor.shape`` reads the array


@contextlib.contextmanager
def bind_hook_installed(hook, all_threads=False):
    """Install ``hook`` above the active ones for the duration of the block: in this thread,
    or (``all_threads``) as every thread's default."""
    below = (_State.bind_hook if all_threads else state.bind_hook) or apply_plain
    installed = lambda prim, args, params: hook(prim, args, params, below)  # noqa: E731
    if all_threads:     # the class's default: a staticmethod, or threads would bind it
        prev = _State.__dict__["bind_hook"]
        _State.bind_hook = staticmethod(installed)
        INSTALLED.add(1)
        try:
            yield
        finally:
            _State.bind_hook = prev
            INSTALLED.add(-1)
    else:
        with suspended(bind_hook=installed):
            yield


@contextlib.contextmanager
def suspended(**values):
    """This thread's ``bind_hook``/``tracer`` set to ``values`` inside the block, and given
    back after (a value the thread inherited stays inherited, not pinned)."""
    own = {k: state.__dict__[k] for k in values if k in state.__dict__}
    for k, v in values.items():
        setattr(state, k, v)
    hooks, tracing = values.get("bind_hook") is not None, values.get("tracer") is not None
    INSTALLED.add(hooks)
    TRACING.add(tracing)
    try:
        yield
    finally:
        INSTALLED.add(-hooks)
        TRACING.add(-tracing)
        for k in values:
            if k in own:
                setattr(state, k, own[k])
            else:       # (a tracer that stopped recording may have handed it back already)
                state.__dict__.pop(k, None)


class _Module(types.ModuleType):
    """``_hooks.tracer`` and ``_hooks.bind_hook`` are this thread's, read-only: they are set
    through ``suspended`` and ``bind_hook_installed``, which keep the census."""

    tracer = property(lambda self: state.tracer)
    bind_hook = property(lambda self: state.bind_hook)


sys.modules[__name__].__class__ = _Module
