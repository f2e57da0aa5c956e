"""Guards on the Python values a trace read from outside the call's arguments.

A trace bakes every Python value it reads into the variant: ``x * SCALE`` becomes
``mul x 2.0``. So that a later call never gets a stale result, each plain value the
function can read from outside its arguments is recorded with the variant, and checked
before the variant runs; a changed one retraces (the reason names it):

- the globals its code reads (the code of nested functions and lambdas included);
- its closure cells;
- for a module, the public attributes of it and its submodules (``Dropout.p``,
  ``BatchNorm1d.eps``, a config field set on the module).

"Plain" values are the ones a trace can bake: ``None``, bools, numbers (NumPy scalars
too), strings, and tuples, lists and dicts of them; a list or dict is compared by a copy
taken when traced, so changing one in place retraces too. Tensors are captured inputs,
read afresh each call (see ``trace.py``). Not covered: globals read by other functions the traced one calls, and
impure calls such as ``random.randint``, whose results are baked as any other value.
"""
import os
import sys

import numpy as np

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


def free_guards(fn, module=None):
    """Guards for the plain values ``fn`` reads from its globals and closure and, for a
    ``module``, for the public plain attributes of it and its submodules."""
    guards = []
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is not None:
        site = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
        scope = getattr(fn, "__globals__", {})
        for name in sorted(_names_read(code)):
            value = scope.get(name, _MISSING)
            if value is not _MISSING and plain(value):
                guards.append(FreeGuard(f"the global {name}", scope, name, value, site))
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if plain(value):
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
