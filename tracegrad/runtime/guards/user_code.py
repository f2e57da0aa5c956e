"""Which functions are the user's, and the functions of the user's a function reaches.

Guards read the globals, closures and attribute chains of the compiled function and of the
user's functions it can reach by name (``user_functions``); the impure calls in them are
looked for the same way. tracegrad's own code (``ops.core.INTERNAL``), the standard library
and installed packages are never followed: a value they read is not the user's to change.
"""
import dis
import os
import sys
import types

import numpy as np

from tracegrad.ops.core import INTERNAL


def user_functions(fn, module=None, depth=4):
    """``fn`` and the user's functions it can reach by name: the functions its globals and
    closure cells hold, theirs in turn (``depth`` levels), and for a ``module`` the
    ``forward`` of every submodule the user wrote. tracegrad's own code, the standard
    library and installed packages are not followed."""
    found, stack = [], [(getattr(fn, "__func__", fn), 0)]
    if module is not None:
        stack += [(type(m).forward, 1) for _, m in module.named_modules()
                  if _is_user_code(getattr(type(m), "forward", None))]
    seen = set()
    while stack:
        f, d = stack.pop()
        code = getattr(f, "__code__", None)
        if code is None or id(code) in seen:
            continue
        seen.add(id(code))
        found.append(f)
        if d >= depth:
            continue
        scope = getattr(f, "__globals__", {})
        reached = [scope.get(name) for name in _names_read(code)]
        for cell in getattr(f, "__closure__", None) or ():
            try:
                reached.append(cell.cell_contents)
            except ValueError:
                pass
        stack += [(g, d + 1) for g in reached if isinstance(g, types.FunctionType)
                  and _is_user_code(g)]
    return found


# tracegrad's own code (ops.core.INTERNAL), the standard library and installed packages
_NOT_USER = tuple(INTERNAL) + (os.path.dirname(os.__file__), sys.base_prefix,
                               os.path.dirname(np.__file__))


def _is_user_code(f):
    code = getattr(f, "__code__", None)
    if code is None:
        return False
    path = code.co_filename
    return not path.startswith(_NOT_USER) and "site-packages" not in path


def _names_read(code):
    """The global names ``code`` and the code nested in it load (``co_names`` also holds
    attribute names: ``w.data`` is not the global ``data``)."""
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(i.argval for i in dis.get_instructions(c) if i.opname in _LOADS)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})

