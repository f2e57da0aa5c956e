"""Profiler events for compiled code: one flag check when no profiler is active."""
import contextlib

from tracegrad import profiler


def phase(fn_name, what, prefix="compiled"):
    """``compiled:<fn>:forward`` around generated code, ``compile:<fn>:trace`` around a
    compile phase; nothing unless a profiler is recording."""
    if not profiler._active():
        return contextlib.nullcontext()
    return profiler.record_function(f"{prefix}:{fn_name}:{what}")
