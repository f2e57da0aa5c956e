"""Captured tensors: the tensors a function reads from outside its arguments (a module's
parameters and buffers, globals, closure cells), where each was found, and whether a variant
still fits them.

A variant keeps each captured tensor with a getter for its source and its metadata; before a
reuse ``_stale`` checks the source still holds the same object with the same metadata, and
that the free guards' values still hold (``guards``).
"""
import inspect
import operator

from numpy import ndarray

from .guards import stale
from .guards.modules import ModuleGuard
from .signatures import _on_gpu


def _is_module(fn):
    return hasattr(fn, "named_parameters") and hasattr(type(fn), "forward") and callable(fn)


def _param_names(fn, skip_self):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    names = []
    for p in params[1:] if skip_self else params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names


def _meta(t):
    d = t._data
    return (d.shape, t.dtype, ndarray if type(d) is ndarray else _on_gpu(d), t._requires_grad)


def _source_of(t, module, fn):
    """(name, getter) for where the function found the captured tensor ``t``."""
    if module is not None:
        for kind in ("named_parameters", "named_buffers"):
            for name, p in getattr(module, kind)():
                if p is t:
                    get = operator.attrgetter(name)
                    return (name, lambda get=get: get(module))
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is not None and fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                if cell.cell_contents is t:
                    return (name, lambda cell=cell: cell.cell_contents)
            except ValueError:
                pass
    g = getattr(fn, "__globals__", {})
    for name, val in g.items():
        if val is t:
            return (name, lambda name=name: g.get(name))
    return ("a tensor reached through an object", None)


def _captured_name(t, module, fn):
    """The name a captured tensor's value is built with: where it was found (``0.weight``
    becomes ``_0_weight``), or None."""
    name = _source_of(t, module, fn)[0]
    return name.replace(".", "_") if name and " " not in name else None


def _stale(v):
    """Why variant ``v`` no longer fits what it read besides the arguments, or None."""
    return _captured_changed(v) or stale(v.free)


def _captured_changed(v):
    for t, meta, (name, get) in zip(v.captured, v.captured_meta, v.sources):
        if get is not None and get() is not t:
            return f"the captured tensor {name} was replaced by another object"
        if _meta(t) != meta:
            return f"the captured tensor {name} changed shape, dtype, device or requires_grad"
    return None


def _unwritten(guards, keys):
    """``guards`` less those on the state that replayed stores write (``counter``,
    ``cfg.steps``, ``self.calls``): the graph never reads it, and it changes every call."""
    if not keys:
        return guards
    names = set()
    for k in keys:
        names |= {f"the global {k}", f"the closure variable {k}", f"the attribute {k}"}
    attrs = {f"the attribute {k.partition('.')[2]} of " for k in keys if "." in k}

    def unwritten(what):
        return what in names or any(what.startswith(a) for a in attrs)
    kept = []
    for g in guards:
        if type(g) is ModuleGuard:      # one guard for many attributes: drops those
            g.drop(unwritten)
            kept.append(g)
        elif not unwritten(g.what):
            kept.append(g)
    return kept
