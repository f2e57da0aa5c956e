"""Plain values, as a guard keeps and compares them, and the guard on one value.

"Plain" values are the ones a trace can bake: ``None``, bools, numbers (NumPy scalars
too), strings, and tuples, lists and dicts of them, and small NumPy arrays (up to
``ARRAY_LIMIT`` elements, by content). ``freeze`` turns one into what a guard keeps: a list
or dict becomes a tagged copy taken when traced, so changing one in place is seen too.
Tensors are not plain: they are captured inputs, read afresh each call (see ``trace.py``).

A ``FreeGuard`` holds the value read from one place (a dict's key, a closure cell) and says
why the variant no longer fits when the place holds another; ``stale`` asks a variant's
guards in turn.
"""
import types

import numpy as np

from tracegrad.tensor import Tensor


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
    if t is np.ndarray and x.size <= ARRAY_LIMIT:      # a small array: by content (a copy)
        return (t, x.dtype.str, x.shape, x.tobytes())
    if t in (tuple, list, frozenset) and len(x) <= 64:
        items = tuple(freeze(e) for e in x)
        return _NOT_PLAIN if any(i is _NOT_PLAIN for i in items) else (t, items)
    if t is dict and len(x) <= 64:
        items = tuple((freeze(k), freeze(v)) for k, v in x.items())
        return _NOT_PLAIN if any(_NOT_PLAIN in i for i in items) else (t, items)
    return _NOT_PLAIN


# NumPy arrays read from outside with up to this many elements are guarded by content;
# a larger one is read as the constant it was when traced, and a warning says so
ARRAY_LIMIT = 4096


def plain(x):
    """Whether a trace bakes ``x`` as a constant (and a guard can compare it)."""
    return freeze(x) is not _NOT_PLAIN


class FreeGuard:
    """``what`` held ``value`` when traced; ``store[key]`` (a dict) or ``store`` (a closure
    cell, ``key`` None) is where it is read again. With ``test``, what held ``value`` is
    ``test(store[key])`` (a branch on an option the step reads afresh: ``momentum != 0``)."""
    __slots__ = ("what", "store", "key", "value", "frozen", "shown", "site", "test")

    def __init__(self, what, store, key, value, site, test=None):
        self.what, self.store, self.key, self.value, self.site = what, store, key, value, site
        self.frozen, self.shown = freeze(value), repr(value)   # a copy: lists change in place
        self.test = test

    def now(self):
        if self.key is None:
            try:
                return self.store.cell_contents
            except ValueError:      # an empty cell
                return _MISSING
        now = self.store.get(self.key, _MISSING)
        return now if self.test is None or now is _MISSING else self.test(now)

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


def by_identity(value):
    """Whether a place holding ``value`` is guarded by identity: an object no guard compares
    by value (a module, an optimizer, a function, a class, an enum member), but not a
    tensor (a captured input, checked apart), a Python module, or a container (its contents
    are guarded where they are read)."""
    return (value is not _MISSING and not plain(value) and not isinstance(
        value, (Tensor, types.ModuleType, np.ndarray, dict, list, tuple, set)))


class IdentityGuard(FreeGuard):
    """``what`` held the object ``value`` when traced, one no guard can compare by value (a
    module, an optimizer, a function, an enum member): the variant baked what the function
    did with it, so another object there retraces. Compared with ``is``."""
    __slots__ = ()

    def __init__(self, what, store, key, value, site):
        self.what, self.store, self.key, self.value, self.site = what, store, key, value, site
        self.test = None
        self.frozen, self.shown = None, type(value).__name__

    def changed(self):
        now = self.now()
        if now is self.value:
            return None
        shown = "<deleted>" if now is _MISSING else f"another {type(now).__name__}"
        return f"{self.what} was rebound: a {self.shown} -> {shown}"

    def describe(self):
        return (f"{self.what} is the same {self.shown}" +
                (f" (read in {self.site})" if self.site else ""))


def stale(guards):
    """The first reason a guard gives, or None."""
    for g in guards:
        why = g.changed()
        if why:
            return why
    return None


def _thaw(x):
    """A frozen value shown as the value it stands for."""
    if type(x) is tuple and len(x) == 2 and isinstance(x[0], type):
        t, v = x
        if t in (tuple, list, frozenset):
            return t(_thaw(e) for e in v)
        if t is dict:
            return {_thaw(k): _thaw(e) for k, e in v}
        if issubclass(t, np.generic):
            return t(v)
    return x
