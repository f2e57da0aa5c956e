"""``mark_dynamic`` and ``mark_static``: a user's say on which dims a compiled function keeps
symbolic.

A mark lives as long as its tensor. ``marks_of(t)`` is what the runtime reads
(``runtime/dynamic.py``): ``{dim: "dynamic" | "static"}``. A dim out of range is an error
naming the call, and then nothing is marked.
"""
import weakref

# id(tensor) -> (a weak reference to it, {dim: "dynamic" | "static"}); by id, not a
# WeakKeyDictionary, because a tensor's == is elementwise
MARKS = {}


def marks_of(t):
    """``{dim: "dynamic" | "static"}`` set on ``t`` by ``mark_dynamic``/``mark_static``."""
    entry = MARKS.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


def _mark(t, dims, how):
    dims = list(dims)
    for d in dims:          # every dim checked before any is marked
        if not -t.ndim <= d < t.ndim:
            from ..ops.core import op_error
            raise op_error(f"mark_{how}", f"Dimension out of range (expected to be in range of "
                                          f"[{-t.ndim}, {t.ndim - 1}], but got {d})", IndexError)
    entry = MARKS.get(id(t))
    if entry is None or entry[0]() is not t:
        key = id(t)
        entry = MARKS[key] = (weakref.ref(t, lambda _, key=key: MARKS.pop(key, None)), {})
    for d in dims:
        entry[1][d % t.ndim] = how


def mark_dynamic(t, index):
    """Compile ``t``'s dim ``index`` (an int or a list) with a symbolic size from the first
    call of a compiled function on it, as PyTorch's ``torch._dynamo.mark_dynamic``."""
    _mark(t, [index] if isinstance(index, int) else index, "dynamic")


def mark_static(t, index=None):
    """Always specialise ``t``'s dim ``index`` (every dim when None), even under
    ``dynamic=True``."""
    dims = range(t.ndim) if index is None else [index] if isinstance(index, int) else index
    _mark(t, dims, "static")
