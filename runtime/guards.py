"""Guards on the Python values a trace read from outside the call's arguments.

A trace bakes every Python value it reads into the variant: ``x * SCALE`` becomes
``mul x 2.0``. So that a later call never gets a stale result, each plain value the
function can read from outside its arguments is recorded with the variant, and checked
before the variant runs; a changed one retraces (the reason names it):

- the globals its code reads (the code of nested functions and lambdas included);
- its closure cells;
- the same of the user's functions it reaches by name (a helper it calls, a user-defined
  submodule's ``forward``; see ``user_functions``);
- for a module, the public attributes of it and its submodules (``Dropout.p``,
  ``BatchNorm1d.eps``, a config field set on the module).

"Plain" values are the ones a trace can bake: ``None``, bools, numbers (NumPy scalars
too), strings, and tuples, lists and dicts of them; a list or dict is compared by a copy
taken when traced, so changing one in place retraces too. Tensors are captured inputs,
read afresh each call (see ``trace.py``).

A call whose result changes from call to call (``random.randint``, ``time.time``,
``os.environ``: ``impure_calls`` finds them in the function's code) cannot be guarded
that way; such a function runs eagerly, after one warning naming the call, rather than
replaying the first call's result. Not covered: functions reached only through
objects (``self.helper()`` of a plain object, a function stored in a list), and libraries.
"""
import dis
import os
import sys
import types

import numpy as np

from tracegrad.ops.core import INTERNAL

_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_MISSING = object()
_NOT_PLAIN = object()


def freeze(x):
    """``x`` as a value a guard keeps and compares (a list becomes a tagged tuple), or
    ``_NOT_PLAIN`` when a trace would not bake it."""
    t = type(x)
    if t in _PLAIN:
        return x
    if isinstance(x, np.generic):
        return (t, x.item())
    if t in (tuple, list, frozenset) and len(x) <= 64:
        items = tuple(freeze(e) for e in x)
        return _NOT_PLAIN if any(i is _NOT_PLAIN for i in items) else (t, items)
    if t is dict and len(x) <= 64:
        items = tuple((freeze(k), freeze(v)) for k, v in x.items())
        return _NOT_PLAIN if any(_NOT_PLAIN in i for i in items) else (t, items)
    return _NOT_PLAIN


def plain(x):
    """Whether a trace bakes ``x`` as a constant (and a guard can compare it)."""
    return freeze(x) is not _NOT_PLAIN


class FreeGuard:
    """``what`` held ``value`` when traced; ``store[key]`` (a dict) or ``store`` (a closure
    cell, ``key`` None) is where it is read again."""
    __slots__ = ("what", "store", "key", "value", "frozen", "shown", "site")

    def __init__(self, what, store, key, value, site):
        self.what, self.store, self.key, self.value, self.site = what, store, key, value, site
        self.frozen, self.shown = freeze(value), repr(value)   # a copy: lists change in place

    def now(self):
        if self.key is None:
            try:
                return self.store.cell_contents
            except ValueError:      # an empty cell
                return _MISSING
        return self.store.get(self.key, _MISSING)

    def changed(self):
        """Why the variant no longer fits, or None."""
        now = self.now()
        if now is self.value and type(now) in _PLAIN:
            return None
        frozen = _MISSING if now is _MISSING else freeze(now)
        if type(frozen) is type(self.frozen) and frozen == self.frozen:
            return None
        shown = "<deleted>" if now is _MISSING else repr(now)
        return f"{self.what} changed: {self.shown} -> {shown}"

    def describe(self):
        return f"{self.what} == {self.shown}" + (f" (read in {self.site})" if self.site else "")


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


def free_guards(fn, module=None):
    """Guards for the plain values ``fn`` (and the user's functions it reaches, see
    ``user_functions``) reads from globals and closures and, for a ``module``, for the
    public plain attributes of it and its submodules."""
    guards, seen = [], set()
    for f in user_functions(fn, module):
        code = f.__code__
        site = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
        scope = getattr(f, "__globals__", {})
        for name in sorted(_names_read(code)):
            value = scope.get(name, _MISSING)
            if value is not _MISSING and plain(value) and (id(scope), name) not in seen:
                seen.add((id(scope), name))
                guards.append(FreeGuard(f"the global {name}", scope, name, value, site))
        for name, cell in zip(code.co_freevars, f.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if plain(value) and id(cell) not in seen:
                seen.add(id(cell))
                guards.append(FreeGuard(f"the closure variable {name}", cell, None, value,
                                        site))
    if module is not None:
        for path, m in module.named_modules():
            for attr, value in vars(m).items():
                if not attr.startswith("_") and attr != "training" and plain(value):
                    name = f"{path}.{attr}" if path else attr
                    guards.append(FreeGuard(f"the attribute {name} of {type(m).__name__}",
                                            m.__dict__, attr, value, None))
    if "guards" in os.environ.get("TRACEGRAD_LOG", ""):
        for g in guards:
            print(f"tracegrad.compile: guard: {g.describe()}", file=sys.stderr)
    return guards


def _names_read(code):
    """The global names ``code`` and the code nested in it load."""
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


def stale(guards):
    """The first reason a guard gives, or None."""
    for g in guards:
        why = g.changed()
        if why:
            return why
    return None


# modules whose functions give a new result each call (``os``: only these attributes)
_IMPURE = {"random": None, "time": None, "secrets": None, "uuid": None,
           "os": {"environ", "getenv", "urandom", "getpid"}, "numpy.random": None}


def impure_calls(fn, module=None):
    """``["random.randint at model.py:12", ...]``: the reads of impure modules in the code
    of ``fn`` and of the user's functions it reaches (``user_functions``)."""
    return sorted({c for f in user_functions(fn, module) for c in _impure_in(f)})


def _impure_in(fn):
    """The impure reads in one function's code (nested code included)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    scope, found, stack = getattr(fn, "__globals__", {}), [], [code]
    cells = {}          # the closure's names, and what the code imports itself
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            cells[name] = cell.cell_contents
        except ValueError:
            pass
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
        chain, line, imported = [], c.co_firstlineno, None
        for ins in dis.get_instructions(c):
            line = ins.positions.lineno if ins.positions and ins.positions.lineno else line
            op = ins.opname
            if op == "IMPORT_NAME":         # import random (inside the function)
                imported = sys.modules.get(ins.argval.partition(".")[0])
                chain = []
                continue
            if op == "IMPORT_FROM" and isinstance(imported, types.ModuleType):
                imported = getattr(imported, ins.argval, None)
                continue
            if op.startswith("STORE") and imported is not None:
                cells[ins.argval] = imported
                imported = None
                continue
            if op == "LOAD_GLOBAL":
                chain = [(ins.argval, scope.get(ins.argval))]
            elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE") and ins.argval in cells:
                chain = [(ins.argval, cells[ins.argval])]
            elif op in ("LOAD_ATTR", "LOAD_METHOD") and chain:
                owner = chain[-1][1]
                chain.append((ins.argval, getattr(owner, ins.argval, None)
                              if isinstance(owner, types.ModuleType) else None))
            else:
                chain = []
                continue
            what = _impure_name(chain)
            if what:
                found.append(f"{what} at {os.path.basename(c.co_filename)}:{line}")
                chain = []
    return sorted(set(found))


def _impure_name(chain):
    """The dotted name when ``chain`` (loaded names and their objects) reaches into an impure
    module, or a function defined in one; else None."""
    names = [n for n, _ in chain]
    for i, (_, obj) in enumerate(chain):
        module = obj.__name__ if isinstance(obj, types.ModuleType) else None
        if module in _IMPURE:
            attrs = _IMPURE[module]
            nxt = names[i + 1] if i + 1 < len(names) else None
            if nxt is not None and (attrs is None or nxt in attrs):
                return ".".join(names[:i + 2])
        elif i == len(chain) - 1 and callable(obj) and not isinstance(obj, type) \
                and getattr(obj, "__module__", None) in _IMPURE and _IMPURE[obj.__module__] \
                is None:
            return f"{obj.__module__}.{names[i]}"      # from random import randint
    return None
