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
  ``BatchNorm1d.eps``, a config field set on the module);
- the attribute chains in the source (``transform.reads``) rooted at a global, a closure
  cell or a parameter: ``cfg.scale`` of a config object, ``self.cfg.p`` in a forward,
  ``self.scale`` in a compiled method of a plain class, a class attribute read through an
  instance, ``HP["lr"]`` with a constant key. A ``ChainGuard`` reads the chain again from
  the dicts that hold it (instance and class ``__dict__`` along the MRO, a module's,
  ``nn.Module``'s parameters, buffers and submodules); a property the user wrote is run, as
  the function runs it, but a chain that only ``__getattr__`` or a library's descriptor can
  answer is not guarded (``TRACEGRAD_LOG=guards`` lists it as such). A parameter root is
  the object of the traced call; the signature keys on its identity. A function without
  source (a lambda) has its chains read off its bytecode. ``getattr(cfg, "p")`` with a
  constant name is a chain too, and so is one rooted at a local assigned once from such a
  chain (``c = self.cfg; c.p``). A chain that ends at a method of the user's (``cfg.get()``)
  has that method followed, its first parameter being the object: its reads are guarded in
  turn. ``HP[k]`` with a key read from a global or a closure is read with the key's value
  (the key itself guarded). Not followed: a key that is a local, a local assigned twice;
- small NumPy arrays (up to ``ARRAY_LIMIT`` elements) read from globals and closures, by
  content; a larger one is read as the constant it was, with a warning saying so.

Each guard names the ``file:line`` of its first read in the source.

"Plain" values are the ones a trace can bake: ``None``, bools, numbers (NumPy scalars
too), strings, and tuples, lists and dicts of them; a list or dict is compared by a copy
taken when traced, so changing one in place retraces too. Tensors are captured inputs,
read afresh each call (see ``trace.py``).

Impure calls (``random.randint``, ``time.time``, ``os.environ[...]``, ``numpy.random``,
``secrets``, ``uuid``: ``transform.IMPURE``) written in the compiled function's own source
are routed by the front end through a helper that records each call (site, arguments,
result) on the trace. Before a variant is reused, ``Draws`` makes its recorded calls again,
lazily and in order, with the recorded arguments (draws are shared between the variants
tried in one call), and the variant fits only when every result is the same. The states of
``random`` and ``numpy.random`` are saved before the first draw: a retrace (or an eager
fallback) starts from them, so it draws what eager would, and a chosen variant that made
fewer calls than were drawn has them rewound and redrawn, so the generators end where eager
leaves them. A call whose result never repeats (``time.time()`` feeding a number) therefore
retraces every call until ``max_variants``, then the function runs eagerly with a warning
naming the call: slow, never stale. Sources without state (the clock, the environment) are
read once more when a call retraces. A recorded call whose arguments or result are not
plain, or that changed an argument in place (``random.shuffle``), cannot be checked: the
function runs eagerly from then on, after one warning naming it.

Impure calls the front end cannot route (in a helper reached by name, in a function
without source, a function of an impure module passed as a value) keep the conservative
rule: ``impure_calls`` lists them and the function runs eagerly, after one warning naming
the call. Not covered: functions reached only through objects (``self.helper()`` of a
plain object, a function stored in a list), and libraries.
"""
import dis
import inspect
import os
import random
import sys
import types
import warnings
from collections import Counter

import numpy as np

from tracegrad.ops.core import INTERNAL
from tracegrad.tensor import Tensor
from tracegrad.transform import impure_name, instrument, reads, \
    source_names

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


def _warn_large_array(what, value, where):
    warnings.warn(f"tracegrad.compile: {what} is a NumPy array of {value.size} elements, "
                  f"read at {where}: the trace keeps its values of now, and a later change "
                  "to it in place is not seen. Pass it as an argument (or make it a tensor) "
                  "to have each call read it.", RuntimeWarning, stacklevel=5)


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


def free_guards(fn, module=None, args=(), kwargs=None, traced=None, impure=()):
    """Guards for the plain values ``fn`` (and the user's functions it reaches, see
    ``user_functions``) reads from globals and closures, for the attribute chains in their
    source (``reads``) and, for a ``module``, for the public plain attributes of it and its
    submodules. ``args``/``kwargs``: the traced call's, for chains rooted at a parameter;
    ``traced`` and ``impure`` (the trace's data guards and impure calls) are only logged."""
    guards, seen = [], set()
    _unguarded.clear()
    tree = {id(m) for _, m in module.named_modules()} if module is not None else set()
    if module is not None:
        for path, m in module.named_modules():
            for attr, value in vars(m).items():
                if not attr.startswith("_") and attr != "training" and plain(value):
                    name = f"{path}.{attr}" if path else attr
                    seen.add((id(m.__dict__), attr))
                    guards.append(FreeGuard(f"the attribute {name} of {type(m).__name__}",
                                            m.__dict__, attr, value, None))
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


_unguarded = []     # chains skipped while building guards, for TRACEGRAD_LOG=guards


def _roots(f, fn, module, args, kwargs, root, kind):
    """The objects the chain's ``root`` stands for, each with a getter that reads it again
    (None: it is fixed). A parameter is fixed: the signature holds its identity."""
    if kind == "param":
        if f is getattr(fn, "__func__", fn):        # the compiled function: this call's
            target = getattr(fn, "__func__", fn)
            call = ((module,) + tuple(args)) if module is not None else tuple(args)
            if module is None and getattr(fn, "__self__", None) is not None:
                call = (fn.__self__,) + call        # a bound method: its self comes first
            try:
                bound = inspect.signature(target).bind(*call, **kwargs)
            except TypeError:
                return []
            value = bound.arguments.get(root, _MISSING)
            return [] if value is _MISSING else [(value, None)]
        names = list(inspect.signature(f).parameters)
        if module is not None and names and names[0] == root:   # self of a submodule
            return [(m, None) for _, m in module.named_modules() if type(m).forward is f]
        return []
    get = reads_getter(f, root)
    try:
        return [(get(), get)] if get is not None else []
    except Exception:       # noqa: BLE001 - unbound: nothing to guard
        return []


def reads_getter(f, root):
    names = source_names(f)
    if names is not None:
        return names.getter(root)
    code = getattr(f, "__code__", None)      # no source (a lambda): from the code object
    if code is None:
        return None
    if root in code.co_freevars:
        cell = f.__closure__[code.co_freevars.index(root)]
        return lambda: cell.cell_contents
    scope = f.__globals__
    return lambda: scope[root]


def code_chains(f):
    """``(first, chains)`` as ``transform.reads`` gives them, read off the bytecode of a
    function without source (a lambda): the attribute chains rooted at a global or a
    closure cell (``cfg.scale``), each at its line."""
    code = getattr(f, "__code__", None)
    if code is None:
        return None
    chains, stack, base = [], [code], os.path.basename(code.co_filename)
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
        root, steps, line = None, [], c.co_firstlineno

        def flush():
            if root is not None and steps:
                chains.append((root[0], root[1], tuple(steps), f"{base}:{line}"))
        for ins in dis.get_instructions(c):
            if ins.positions and ins.positions.lineno:
                line = ins.positions.lineno
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and root is not None:
                steps.append(("attr", ins.argval))
                continue
            flush()
            root, steps = None, []
            if ins.opname == "LOAD_GLOBAL":
                root = (ins.argval, "global")
            elif ins.opname == "LOAD_DEREF" and ins.argval in c.co_freevars:
                root = (ins.argval, "closure")
        flush()
    return {}, chains


def _chain_guards(f, fn, module, args, kwargs, chains, tree, seen, methods, self_obj=None):
    """Guards for ``f``'s attribute ``chains``; a chain that ends at a method of the user's
    (``cfg.get``) adds that method and its object to ``methods``, to be followed in turn.
    ``self_obj``: the object ``f``'s first parameter is (``f`` such a method), or None."""
    guards = []
    for root, kind, steps, where in chains:
        steps = _keyed(f, steps)
        if steps is None:
            continue            # a key from a local or a parameter: not read here
        roots = _roots(f, fn, module, args, kwargs, root, kind)
        if self_obj is not None and kind == "param" and root == _first_param(f):
            roots = [(self_obj, None)]
        for obj, get in roots:
            if plain(obj) or isinstance(obj, Tensor) or _library_module(obj):
                continue        # the signature or a whole-value guard has it; libraries aren't
            value, store, key, owner = obj, None, None, None
            for step in steps:
                owner = value
                method = _user_method(value, step)
                if method is not None:      # cfg.get: its reads are followed, not guarded here
                    methods.setdefault(method, value)
                    value = _MISSING
                    break
                value, store, key = _read(value, step)
                if value is _MISSING or value is _UNSAFE:
                    break
            shown = root + "".join(f".{k}" if s == "attr" else f"[{k!r}]" for s, k in steps)
            if value is _UNSAFE:
                _unguarded.append(f"{shown} at {where} (read through a property or "
                                  "__getattr__; a guard does not call those)")
                continue
            if value is _MISSING or not plain(value):
                continue
            if owner is not None and id(owner) in tree and not str(key).startswith("_"):
                continue        # a module attribute: guarded above (or in the signature)
            if store is not None and (id(store), key) in seen:
                continue
            if store is not None:
                seen.add((id(store), key))
            guards.append(ChainGuard(f"the attribute {shown}", obj, get, steps, value, where))
    return guards


def _keyed(f, steps):
    """``steps`` with each ``("item of", k)`` made ``("item", value of k)`` for a key ``k``
    read from a global or a closure cell (a plain one is guarded itself, so the chain is
    read with the key the trace saw), or None when a key is a local or a parameter."""
    if not any(s == "item of" for s, _ in steps):
        return steps
    out = []
    for step, key in steps:
        if step == "item of":
            names = source_names(f)
            if names is None or names.kind(key) not in ("global", "closure"):
                return None
            try:
                value = names.getter(key)()
            except Exception:       # noqa: BLE001 - unbound now: nothing to read
                return None
            if not plain(value) or isinstance(value, (list, dict)):
                return None
            step, key = "item", value
        out.append((step, key))
    return tuple(out)


def _user_method(obj, step):
    """The function of the user's method ``obj.name`` (``step`` an attribute), or None."""
    if step[0] != "attr" or isinstance(obj, (type, types.ModuleType, Tensor)):
        return None
    for k in type(obj).__mro__:
        f = k.__dict__.get(step[1])
        if f is not None:
            return f if isinstance(f, types.FunctionType) and _is_user_code(f) \
                and _first_param(f) is not None else None
    return None


def _first_param(f):
    code = f.__code__
    return code.co_varnames[0] if code.co_argcount else None


def _library_module(obj):
    if not isinstance(obj, types.ModuleType):
        return False
    path = getattr(obj, "__file__", None)
    if path is None:        # a built-in module, or one made at run time (a settings namespace)
        return obj.__name__ in sys.builtin_module_names
    return path.startswith(_NOT_USER) or "site-packages" in path


_UNSAFE = object()


def _read(obj, step):
    """``(value, store, key)``: ``obj.name`` or ``obj[key]`` read from the dict that holds
    it (an instance's ``__dict__``, a class's along the MRO, a module's, ``nn.Module``'s
    parameters/buffers/submodules), never running ``__getattr__`` or a library's descriptor
    (a property the user wrote runs, as the function would run it); the value is
    ``_MISSING`` when absent and ``_UNSAFE`` when only such code could produce it."""
    kind, name = step
    if kind == "item":
        t = type(obj)
        if t is dict:
            return obj.get(name, _MISSING), obj, name
        if t in (list, tuple) and type(name) is int:
            return (obj[name] if -len(obj) <= name < len(obj) else _MISSING), None, None
        return _UNSAFE, None, None
    t = type(obj)
    if t is types.ModuleType:
        d = obj.__dict__
        return d.get(name, _MISSING), d, name
    if isinstance(obj, type):           # a class: its attribute along its MRO
        for k in obj.__mro__:
            d = k.__dict__
            if name in d:
                v = d[name]
                return (_UNSAFE if hasattr(type(v), "__get__") else v), d, name
        return _MISSING, None, None
    found = _MISSING
    for k in t.__mro__:
        d = k.__dict__
        if name in d:
            found, holder = d[name], d
            break
    if found is not _MISSING:
        kt = type(found)
        if kt is types.MemberDescriptorType:        # __slots__
            try:
                return found.__get__(obj, t), None, None
            except AttributeError:
                return _MISSING, None, None
        if kt is property and _is_user_code(found.fget):
            # a property of the user's: read as the function does (eager runs it once a
            # call too), so a field behind it is guarded like a plain one
            try:
                return found.fget(obj), None, None
            except Exception:       # noqa: BLE001 - it fails now: the call retraces
                return _MISSING, None, None
        if hasattr(kt, "__set__") or hasattr(kt, "__delete__"):
            return _UNSAFE, None, None      # a library's property or another descriptor
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        d = None
    if d is not None and name in d:
        return d[name], d, name
    if found is not _MISSING:
        return (_UNSAFE if hasattr(type(found), "__get__") else found), holder, name
    if d is not None and type(d.get("_modules")) is dict:      # nn.Module's own stores
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name], s, name
    if hasattr(t, "__getattr__"):
        return _UNSAFE, None, None
    return _MISSING, None, None


class ChainGuard(FreeGuard):
    """An attribute chain (``cfg.scale``, ``self.cfg.p``) read again from its root: ``get``
    re-reads the root (a global, a closure cell), or ``root`` is fixed (a parameter, whose
    identity the signature holds). Reads go through ``_read`` (a user's property runs)."""
    __slots__ = ("root", "get", "steps")

    def __init__(self, what, root, get, steps, value, site):
        super().__init__(what, None, None, value, site)
        self.root, self.get, self.steps = root, get, steps

    def now(self):
        if self.get is None:
            obj = self.root
        else:
            try:
                obj = self.get()
            except Exception:       # noqa: BLE001 - the global was deleted
                return _MISSING
        for step in self.steps:
            obj = _read(obj, step)[0]
            if obj is _MISSING or obj is _UNSAFE:
                return _MISSING
        return obj


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


def impure_calls(fn, module=None):
    """``["random.randint at model.py:12", ...]``: the reads of impure modules in the code
    of ``fn`` and of the user's functions it reaches (``user_functions``) that the front end
    does not route through its helper (those are re-evaluated each call, see ``Draws``)."""
    found = []
    target = getattr(fn, "__func__", fn)
    for f in user_functions(fn, module):
        calls = _impure_in(f)
        if f is target and calls:
            instrumented = instrument(f)
            rewritten = Counter(str(s) for s in getattr(instrumented, "__tracegrad_sites__", ()))
            calls = list((Counter(calls) - rewritten).elements())
        found += calls
    return sorted(set(found))


def _impure_in(fn):
    """The impure reads in one function's code (nested code included), one per read."""
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
            what = impure_name(chain)
            if what:
                found.append(f"{what} at {os.path.basename(c.co_filename)}:{line}")
                chain = []
    return found




# re-evaluating impure calls ------------------------------------------------------------------

def prepare(records):
    """Give each recorded call (``transform.ImpureCall``) its ``key`` (site and frozen
    arguments) and ``frozen`` result; return the names of those that cannot be replayed:
    arguments or result not plain, or an argument changed in place."""
    bad = []
    for r in records:
        args = freeze((tuple(r.args), r.kwargs))
        r.key = (r.site, args)
        r.frozen = freeze(r.result)
        if r.mutated or args is _NOT_PLAIN or r.frozen is _NOT_PLAIN:
            bad.append(str(r.site))
    return sorted(set(bad))


def _stateful(fn):
    """``(get_state, set_state)`` of the generator ``fn`` draws from, or None (the clock,
    the environment: nothing to rewind)."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and owner is getattr(random, "_inst", None):
        return "random", random.getstate, random.setstate
    if getattr(fn, "__module__", None) == "random" and not isinstance(owner, random.Random):
        return "random", random.getstate, random.setstate
    if owner is not None and owner is getattr(np.random.mtrand, "_rand", None):
        return "numpy", np.random.get_state, np.random.set_state
    if isinstance(owner, (random.Random, np.random.RandomState)):      # a generator object
        return ("object", id(owner)), owner.getstate if isinstance(owner, random.Random) \
            else owner.get_state, owner.setstate if isinstance(owner, random.Random) \
            else owner.set_state
    if isinstance(owner, np.random.Generator):
        bits = owner.bit_generator
        return ("object", id(owner)), (lambda: bits.state), \
            (lambda state: setattr(bits, "state", state))
    return None


_RAISED = object()


class Draws:
    """One call's fresh results of the impure calls, drawn lazily and shared by the variants
    tried for the call. ``fit(records)`` draws the calls a variant recorded (with their
    recorded arguments), in order, and says why they differ, or None; ``settle`` leaves the
    generators as if exactly the chosen variant's calls had been made (as eager would);
    ``rewind`` puts them back to where they were before the first draw (before a retrace,
    so the trace draws what eager would)."""
    __slots__ = ("made", "saved")

    def __init__(self):
        self.made, self.saved = [], {}

    def _draw(self, r):
        fn = r.site.resolve()
        state = _stateful(fn)
        if state is not None and state[0] not in self.saved:
            self.saved[state[0]] = (state[2], state[1]())
        try:
            return freeze(fn(*r.args, **r.kwargs))
        except Exception:       # noqa: BLE001 - it raises now: the trace will show it
            return _RAISED

    def fit(self, records):
        made = self.made
        for k, r in enumerate(records):
            if k < len(made) and made[k][0] != r.key:
                self.rewind()           # another call here: draw along these calls afresh
                return self.fit(records)
            if k == len(made):
                made.append((r.key, self._draw(r)))
            got = made[k][1]
            if type(got) is not type(r.frozen) or got != r.frozen:
                now = "raises" if got is _RAISED else f"returned {_thaw(got)!r}"
                return f"{r.call_text()} at {r.site.where} {now}, not {r.result!r} as when traced"
        return None

    def settle(self, records):
        if len(self.made) <= len(records) or not self.saved:
            return
        for set_state, state in self.saved.values():
            set_state(state)
        for r in records:
            fn = r.site.resolve()
            if _stateful(fn) is not None:
                fn(*r.args, **r.kwargs)

    def rewind(self):
        for set_state, state in self.saved.values():
            set_state(state)
        self.made, self.saved = [], {}


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
