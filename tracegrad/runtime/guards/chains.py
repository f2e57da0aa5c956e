"""Guards on attribute chains: ``cfg.scale``, ``self.cfg.p``, ``HP["lr"]``.

``transform.reads`` finds the chains in a function's source, rooted at a global, a closure
cell or a parameter: ``cfg.scale`` of a config object, ``self.cfg.p`` in a forward,
``self.scale`` in a compiled method of a plain class, a class attribute read through an
instance, ``HP["lr"]`` with a constant key. A function without source (a lambda) has its
chains read off its bytecode (``code_chains``). ``getattr(cfg, "p")`` with a constant name is
a chain too, and so is one rooted at a local assigned once from such a chain
(``c = self.cfg; c.p``).

A ``ChainGuard`` reads the chain again from the dicts that hold it (instance and class
``__dict__`` along the MRO, a module's, ``nn.Module``'s parameters, buffers and
submodules; ``_read``); a property the user wrote is run, as the function runs it, but a
chain that only ``__getattr__`` or a library's descriptor can answer is not guarded
(``TRACEGRAD_LOG=guards`` lists it as such). A parameter root is the object of the traced
call; the signature keys on its identity. A chain that ends at a method of the user's
(``cfg.get()``) has that method followed, its first parameter being the object: its reads
are guarded in turn. ``HP[k]`` with a key read from a global or a closure is read with the
key's value (the key itself guarded). Not followed: a key that is a local, a local assigned
twice.
"""
import dis
import inspect
import os
import sys
import types

from tracegrad.tensor import Tensor
from tracegrad.transform import source_names

from .values import _MISSING, FreeGuard, IdentityGuard, by_identity, plain
from .user_code import _NOT_USER, _is_user_code

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
            last, done = obj, 0     # the last object read, after how many steps
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
                last, done = value, done + 1
            prefix = tuple(steps[:done])
            if 0 < done < len(steps) and by_identity(last) and \
                    not isinstance(last, types.MethodType) and (id(obj), prefix) not in seen:
                # the chain went on past an object (box["opt"].step()): that object, by
                # identity (a method read from it is made anew at each read)
                seen.add((id(obj), prefix))
                guards.append(IdentityChainGuard(f"the attribute {_shown(root, prefix)}",
                                                 obj, get, prefix, last, where))
            shown = _shown(root, steps)
            if value is _UNSAFE:
                _unguarded.append(f"{shown} at {where} (read through a property or "
                                  "__getattr__; a guard does not call those)")
                continue
            if value is _MISSING or not (plain(value) or by_identity(value)) or \
                    isinstance(value, types.MethodType):
                continue
            if owner is not None and id(owner) in tree and not str(key).startswith("_"):
                continue        # a module attribute: guarded above (or in the signature)
            if store is not None and (id(store), key) in seen:
                continue
            if store is not None:
                seen.add((id(store), key))
            kind_ = ChainGuard if plain(value) else IdentityChainGuard
            guards.append(kind_(f"the attribute {shown}", obj, get, steps, value, where))
    return guards


def _shown(root, steps):
    """A chain as the source reads: ``cfg.scale``, ``HP['lr']``."""
    return root + "".join(f".{k}" if s == "attr" else f"[{k!r}]" for s, k in steps)


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


class IdentityChainGuard(ChainGuard):
    """A chain that ends at an object (``box["opt"]``, ``self.model``): compared by identity,
    as ``IdentityGuard``."""
    __slots__ = ()

    def __init__(self, what, root, get, steps, value, site):
        super().__init__(what, root, get, steps, value, site)
        self.shown = type(value).__name__

    changed = IdentityGuard.changed
    describe = IdentityGuard.describe
