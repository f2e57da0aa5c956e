"""Errors that name the op and the user's source line (STYLE.md, "Errors").

``op_error(op, message)`` builds the error every primitive raises; ``user_frame`` finds the
innermost frame outside tracegrad (the package, its code generator and runtime, and the
modules it generates), which guards, profiler events and error messages point at.
"""
import linecache
import os
import sys

from ..tensor import Tensor

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Frames from these places are tracegrad's own: the package (its code generator and runtime
# included), and the modules it generates.
INTERNAL = (_PKG_DIR + os.sep, "<tracegrad:")


def user_frame():
    """The innermost frame outside tracegrad (the user's code), or None."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(INTERNAL):
        f = f.f_back
    return f


def user_site():
    """``file:line: source`` of the innermost frame outside tracegrad, or ''."""
    f = user_frame()
    if f is None:
        return ""
    src = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}" + (f": {src}" if src else "")


def op_error(op, message, exc_type=RuntimeError):
    """An error that names the op and the user's source line."""
    site = user_site()
    return exc_type(f"{op}: {message}" + (f"\n  (at {site})" if site else ""))


def _explain_failure(prim, args, params, exc):
    """Turn a failure inside an implementation into an error naming the op."""
    if isinstance(exc, (TypeError, IndexError)) and str(exc).startswith(prim.name + ":"):
        return exc
    from ..device import mixed_devices      # a CPU op handed a cuda tensor fails in NumPy
    mixed = mixed_devices([a for a in args if isinstance(a, Tensor)])
    if mixed:
        return op_error(prim.name, mixed)
    try:
        prim.shape_dtype(*args, **params)       # the rules raise PyTorch's wording
    except (RuntimeError, IndexError, TypeError, ValueError) as rule_exc:
        msg = str(rule_exc)
        return op_error(prim.name, msg, type(rule_exc) if not isinstance(rule_exc, ValueError)
                        else RuntimeError)
    etype = exc if isinstance(exc, type) else type(exc)
    etype = etype if etype in (IndexError, TypeError) else RuntimeError
    return op_error(prim.name, str(exc), etype)
