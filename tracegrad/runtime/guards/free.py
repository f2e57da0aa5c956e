"""Guards on the Python values a trace read from outside the call's arguments.

A trace bakes every Python value it reads into the variant: ``x * SCALE`` becomes
``mul x 2.0``. So that a later call never gets a stale result, each plain value the
function can read from outside its arguments is recorded with the variant, and checked
before the variant runs; a changed one retraces (the reason names it):

- the globals its code reads (the code of nested functions and lambdas included);
- its closure cells;
- the same of the user's functions it reaches by name (a helper it calls, a user-defined
  submodule's ``forward``; see ``user_functions``);
- for each module the function called, and each of a compiled module's tree: its mode,
  public attributes (``Dropout.p``, ``BatchNorm1d.eps``, a config field set on the
  module), children and hooks (``modules.py``);
- the attribute chains in the source rooted at a global, a closure cell or a parameter
  (``cfg.scale``, ``self.cfg.p``, ``HP["lr"]``; see ``chains.py``);
- small NumPy arrays (up to ``ARRAY_LIMIT`` elements) read from globals and closures, by
  content; a larger one is read as the constant it was, with a warning saying so.

Each guard names the ``file:line`` of its first read in the source. Which values are
plain (a trace can bake them, a guard compare them) and how they are kept is
``values.py``'s; which functions are the user's, ``user_code.py``'s.

Impure calls (``random``, ``time``, ...) are not guarded but made again before a variant
is reused (``impure.py``).
"""
import os
import sys
import warnings

import numpy as np

from tracegrad.transform import reads

from .chains import _chain_guards, _unguarded, code_chains
from .modules import module_guards
from .values import _MISSING, FreeGuard, IdentityGuard, by_identity, plain
from .user_code import _names_read, user_functions


def _warn_large_array(what, value, where):
    warnings.warn(f"tracegrad.compile: {what} is a NumPy array of {value.size} elements, "
                  f"read at {where}: the trace keeps its values of now, and a later change "
                  "to it in place is not seen. Pass it as an argument (or make it a tensor) "
                  "to have each call read it.", RuntimeWarning, stacklevel=5)


def free_guards(fn, module=None, args=(), kwargs=None, traced=None, impure=()):
    """Guards for the plain values ``fn`` (and the user's functions it reaches, see
    ``user_functions``) reads from globals and closures, for the attribute chains in their
    source (``reads``), and the state of the modules it called (``traced.modules``) and of a
    ``module``'s tree. ``args``/``kwargs``: the traced call's, for chains rooted at a
    parameter; ``traced``'s data guards and ``impure`` (its impure calls) are only logged."""
    guards, seen = [], set()
    _unguarded.clear()
    tree = {id(m) for _, m in module.named_modules()} if module is not None else set()
    for g in module_guards(module, getattr(traced, "modules", ())):
        guards.append(g)
        seen.update((id(g.module.__dict__), attr) for attr, *_ in g.attrs)
    methods, visited = {}, set()   # a user's method the function calls (cfg.get()) -> self
    todo = [(f, None) for f in user_functions(fn, module)]
    while todo:
        f, owner = todo.pop(0)
        code = f.__code__
        site = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
        found = reads(f) or code_chains(f)
        first = found[0] if found else {}
        scope = getattr(f, "__globals__", {})
        for name in sorted(_names_read(code)):
            value = scope.get(name, _MISSING)
            if value is not _MISSING and plain(value) and (id(scope), name) not in seen:
                seen.add((id(scope), name))
                guards.append(FreeGuard(f"the global {name}", scope, name, value,
                                        first.get(name, site)))
            elif type(value) is np.ndarray and (id(scope), name) not in seen:
                seen.add((id(scope), name))
                _warn_large_array(f"the global {name}", value, first.get(name, site))
            elif by_identity(value) and (id(scope), name) not in seen:
                seen.add((id(scope), name))
                guards.append(IdentityGuard(f"the global {name}", scope, name, value,
                                            first.get(name, site)))
        for name, cell in zip(code.co_freevars, f.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if plain(value) and id(cell) not in seen:
                seen.add(id(cell))
                guards.append(FreeGuard(f"the closure variable {name}", cell, None, value,
                                        first.get(name, site)))
            elif type(value) is np.ndarray and id(cell) not in seen:
                seen.add(id(cell))
                _warn_large_array(f"the closure variable {name}", value, first.get(name, site))
            elif by_identity(value) and id(cell) not in seen:
                seen.add(id(cell))
                guards.append(IdentityGuard(f"the closure variable {name}", cell, None, value,
                                            first.get(name, site)))
        if found:
            guards += _chain_guards(f, fn, module, args, kwargs or {}, found[1], tree, seen,
                                    methods, owner)
        for method, obj in list(methods.items()):      # followed once each, a few at most
            if method not in visited and len(visited) < 16:
                visited.add(method)
                todo.append((method, obj))
    if "guards" in os.environ.get("TRACEGRAD_LOG", ""):
        for g in guards:
            print(f"tracegrad.compile: guard: {g.describe()}", file=sys.stderr)
        for g in getattr(traced, "guards", ()):
            print(f"tracegrad.compile: guard: {g.describe()}", file=sys.stderr)
        for r in impure:
            print(f"tracegrad.compile: guard: {r.describe()}", file=sys.stderr)
        for text in _unguarded:
            print(f"tracegrad.compile: not guarded: {text}", file=sys.stderr)
        _unguarded.clear()
    return guards

