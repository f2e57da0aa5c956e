"""How the runtime brackets generated code and compile phases for the profiler.

``phase`` is a profiler event, and only one flag check when no profiler records.
``run_generated`` calls generated code with NumPy's floating-point warnings off,
as ``np.errstate(all="ignore")`` does, inside a ``compiled:<fn>:<what>`` event
while a profiler records.
"""
import contextlib

import numpy as np

from tracegrad import profiler

try:    # np.errstate(all="ignore") sets and resets this context variable; doing it here skips
    # making a context manager object per call (about 1 us of a compiled call's few dozen)
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
except ImportError:         # a NumPy without them: the public way
    _extobj_contextvar = None

_NOTHING = contextlib.nullcontext()     # stateless, so one serves every call (and thread)


def phase(fn_name, what, prefix="compiled", gpu=None):
    """``compiled:<fn>:forward`` around generated code, ``compile:<fn>:trace`` around a
    compile phase; nothing unless a profiler is recording. Generated code of a CUDA
    variant (``gpu``: its GPU's index) is also timed there when the profiler records CUDA."""
    if not profiler._active():
        return _NOTHING
    return profiler.record_function(f"{prefix}:{fn_name}:{what}",
                                    device=None if gpu is None else f"cuda:{gpu}")


def run_generated(fn, args, fn_name, what, gpu=None):
    """``fn(*args)`` with NumPy's floating-point warnings off, as event ``compiled:<fn>:<what>``
    while a profiler records."""
    if _extobj_contextvar is None or profiler._active():
        with np.errstate(all="ignore"), phase(fn_name, what, gpu=gpu):
            return fn(*args)
    token = _extobj_contextvar.set(_make_extobj(all="ignore"))
    try:
        return fn(*args)
    finally:
        _extobj_contextvar.reset(token)
