"""Interposition points for tracing and profiling.

The eager hot path pays one ``None`` check: ``bind`` reads ``bind_hook`` and,
when a tracer or profiler is active, hands the call to it. Hooks stack: each
receives ``inner``, the next one down (the plain eager ``bind`` at the bottom),
and must call it to get the result tensor.

    def hook(prim, args, params, inner):
        out = inner(prim, args, params)
        ...                       # record, time, ...
        return out

    with bind_hook_installed(hook):
        ...
"""
import contextlib

bind_hook = None        # callable(prim, args, params) -> Tensor, or None
tracer = None           # the active ``trace.Tracer`` while a compiled function is traced


@contextlib.contextmanager
def bind_hook_installed(hook):
    """Install ``hook`` above any active ones for the duration of the block."""
    global bind_hook
    from .ops.core import apply_plain      # here: ops imports this module
    below = bind_hook or apply_plain
    prev = bind_hook
    bind_hook = lambda prim, args, params: hook(prim, args, params, below)  # noqa: E731
    try:
        yield
    finally:
        bind_hook = prev
