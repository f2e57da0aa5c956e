"""The front end: rewrite the user's function with gast before tracing.

After every assignment to a plain name (``h = ...``, ``a, b = ...``,
``h += ...``, ``for h in ...``) the rewrite inserts a call that gives the
assigned tensor's IR value that name, so the IR and the generated code say
``hidden`` and ``d_hidden`` rather than ``t7``. Line numbers and the file name
are kept, so each recorded node knows the user's ``file:line``; guards are
recorded where ``bool()``, ``item()``, ``int()`` or ``float()`` run on a traced
tensor (``Tensor`` reports them to the active tracer), at the line the frame
shows.

Before::                              After::

    def f(x, w):                          def f(x, w):
        h = x @ w                             h = x @ w
        return h.sum()                        __tracegrad__.name(h, 'h')
                                              return h.sum()

Calls whose result changes from call to call (``random.randint(4, 6)``, ``time.time()``,
``os.environ["X"]``: the modules in ``IMPURE``) are routed through the helper too::

    for i in range(random.randint(4, 6)):   for i in range(__tracegrad__.impure(0, random.randint)(4, 6)):

While a trace runs, the helper makes the call and records it (site, arguments, result) on
the tracer; the runtime draws the same calls again before it reuses a variant (see
``runtime/impure.py``). ``reads`` finds, in the same source, where each free name is first
read and the attribute chains (``cfg.scale``, ``self.cfg.p``, ``HP["lr"]``) the runtime
guards.

Functions without retrievable source (REPL lambdas, builtins, C functions)
are traced as they are: ``instrument`` returns None.
"""
import functools
import importlib
import inspect
import random
import os
import sys
import textwrap
import types

import gast
import numpy as np

from . import _hooks
from .stores import StoreMarker
from .tensor import Tensor

HELPER = "__tracegrad__"


class _Helper:
    """What the rewritten function calls (reached through a closure cell); ``sites``: its
    impure call sites (``ImpureSite``), by index."""

    def __init__(self, sites, stores=()):
        self.sites, self.stores = sites, stores

    def store(self, index, objs, args):
        """Before a write to outside state (``stores.py``), with the objects it writes to and
        the locals it reads: a trace records the store, for the variant to make again after
        each run with that run's tensors; one it cannot replay (the function reads the state
        it writes, or passes tensors inside containers) stops the recording here, and the
        store and the rest of the call run eagerly."""
        tracer = _hooks.tracer
        if tracer is None or getattr(tracer, "symbolic", True) or (
                objs and all(isinstance(o, Tensor) for o in objs)):
            return      # not tracing, or a tensor written in place: the trace records that
        site = self.stores[index]
        why = None
        if site.replay is None or site.conflict:
            why = f"writes to {site}, and the function reads {site.conflict or 'it'} too"
        elif any(_holds_tensor(a) for a in args
                 if not isinstance(a, Tensor) and not any(a is o for o in objs)):
            why = f"writes to {site} a container of tensors"
        if why is not None:     # state made on a first call stops that call only
            tracer.abandon(why, for_good="again")
        else:
            tracer.replay_store(str(site), site.replay, args, site.keys)

    def impure(self, index, fn):
        """``fn``, which records each call on the active tracer (a plain call otherwise)."""
        tracer = _hooks.tracer
        calls = getattr(tracer, "impure", None) if tracer is not None else None
        if calls is None:
            return fn
        site = self.sites[index]

        def recorded(*args, **kwargs):
            before = _shallow(args, kwargs)
            result = fn(*args, **kwargs)
            try:
                mutated = bool(before != _shallow(args, kwargs))
            except Exception:       # noqa: BLE001 - an argument that cannot be compared
                mutated = True
            calls.append(ImpureCall(site, args, kwargs, result, mutated))
            return result
        return recorded

    @staticmethod
    def name(value, name):
        tracer = _hooks.tracer
        if tracer is None:
            return
        for t, n in _named(value, name):
            v = tracer.env.get(id(t))
            if v is not None and v[1].name is None:     # the first assignment names it
                tracer.names.setdefault(v[1], n)


def _holds_tensor(x, depth=0):
    if isinstance(x, Tensor):
        return True
    if depth < 3 and isinstance(x, (list, tuple, set, frozenset)):
        return any(_holds_tensor(e, depth + 1) for e in x)
    if depth < 3 and isinstance(x, dict):
        return any(_holds_tensor(e, depth + 1) for e in x.values())
    return False


def _shallow(args, kwargs):
    """Top-level copies of the containers among the arguments: a call that changes one in
    place (``random.shuffle(xs)``) is told apart by comparing before and after."""
    def copy(a):
        return list(a) if type(a) is list else dict(a) if type(a) is dict else a
    return [copy(a) for a in args], {k: copy(a) for k, a in kwargs.items()}


# modules whose functions give a new result each call (``os``: only these attributes)
IMPURE = {"random": None, "time": None, "secrets": None, "uuid": None,
          "os": {"environ", "getenv", "urandom", "getpid"}, "numpy.random": None}


# generator objects whose methods draw: a call of one is impure, as random.random() is
GENERATORS = (random.Random, np.random.Generator, np.random.RandomState)


def impure_name(chain):
    """The dotted name when ``chain`` (loaded names and their objects) reaches into an impure
    module, or a function defined in one; else None."""
    names = [n for n, _ in chain]
    for i, (_, obj) in enumerate(chain):
        if isinstance(obj, GENERATORS) and i + 1 < len(names):
            return ".".join(names[:i + 2])      # rng.random(): a generator object's draw
        module = obj.__name__ if isinstance(obj, types.ModuleType) else None
        if module in IMPURE:
            attrs = IMPURE[module]
            nxt = names[i + 1] if i + 1 < len(names) else None
            if nxt is not None and (attrs is None or nxt in attrs):
                return ".".join(names[:i + 2])
        elif i == len(chain) - 1 and callable(obj) and not isinstance(obj, type) \
                and getattr(obj, "__module__", None) in IMPURE and IMPURE[obj.__module__] \
                is None:
            return f"{obj.__module__}.{names[i]}"      # from random import randint
    return None


class ImpureSite:
    """One impure call in the source: ``name`` (``random.randint``), ``where`` (file:line),
    and ``resolve()``, which evaluates the called expression again (``random.randint``
    as the function's globals hold it now, a monkeypatched ``time.time`` included)."""
    __slots__ = ("name", "where", "resolve")

    def __init__(self, name, where, resolve):
        self.name, self.where, self.resolve = name, where, resolve

    def __str__(self):
        return f"{self.name} at {self.where}"


class ImpureCall:
    """A call the trace made at ``site``: its arguments, its result, and whether it changed
    an argument in place. The runtime adds ``key`` and ``frozen`` (see runtime/impure.py)."""
    __slots__ = ("site", "args", "kwargs", "result", "mutated", "key", "frozen")

    def __init__(self, site, args, kwargs, result, mutated):
        self.site, self.args, self.kwargs, self.result = site, args, kwargs, result
        self.mutated, self.key, self.frozen = mutated, None, None

    def call_text(self):
        args = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.site.name}({', '.join(args)})"

    def describe(self):
        return (f"{self.call_text()} at {self.site.where} returned {self.result!r} when traced "
                "(called again before each reuse)")


def _named(value, name):
    if isinstance(value, Tensor):
        yield value, name
    elif isinstance(value, (tuple, list)) and len(value) <= 16:
        for i, x in enumerate(value):
            if isinstance(x, Tensor):
                yield x, f"{name}_{i}"


class _Namer(gast.NodeTransformer):
    """Append ``__tracegrad__.name(x, 'x')`` after each assignment to a name."""

    def _after(self, node, targets):
        calls = []
        for t in targets:
            for n in _target_names(t):
                calls.append(gast.Expr(value=gast.Call(
                    func=gast.Attribute(value=_load(HELPER), attr="name", ctx=gast.Load()),
                    args=[_load(n), gast.Constant(value=n, kind=None)], keywords=[])))
        for c in calls:
            gast.copy_location(c, node)
            gast.copy_location(c.value, node)
        return calls

    def visit_Assign(self, node):
        return [node] + self._after(node, node.targets)

    def visit_AugAssign(self, node):
        return [node] + self._after(node, [node.target])

    def visit_AnnAssign(self, node):
        return [node] + (self._after(node, [node.target]) if node.value is not None else [])

    def visit_For(self, node):
        self.generic_visit(node)
        node.body = self._after(node, [node.target]) + node.body
        return node

    def visit_FunctionDef(self, node):    # nested functions are left alone
        return node if getattr(self, "_top", None) is not node else self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return node


def _load(n):
    return gast.Name(id=n, ctx=gast.Load(), annotation=None, type_comment=None)


def _target_names(t):
    if isinstance(t, gast.Name):
        return [t.id]
    if isinstance(t, (gast.Tuple, gast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    if isinstance(t, gast.Starred):
        return _target_names(t.value)
    return []


def _parse(fn):
    """(function definition, file name, line offset) of ``fn``'s source, or None."""
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>":
        return None
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        tree = gast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, gast.FunctionDef) or fdef.name != fn.__name__:
        return None
    return fdef, filename, fn.__code__.co_firstlineno - 1


class _Names:
    """What the names in one function's source stand for: its parameters, the names it
    assigns (anywhere, nested scopes included), those its nested functions and lambdas take
    as parameters, and what its ``import`` statements bind (name -> (module, attribute))."""

    def __init__(self, fn, fdef):
        self.fn = fn
        self.params = _arg_names(fdef.args)
        self.stored, self.inner, self.imports = set(), set(), {}
        for node in gast.walk(fdef):
            if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
                self.stored.add(node.id)
            elif isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)) \
                    and node is not fdef:
                self.inner |= _arg_names(node.args)
                if not isinstance(node, gast.Lambda):
                    self.stored.add(node.name)
            elif isinstance(node, gast.Import):
                for a in node.names:
                    local = a.asname or a.name.partition(".")[0]
                    self.imports[local] = (a.name if a.asname else local, None)
            elif isinstance(node, gast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.imports[a.asname or a.name] = (node.module, a.name)
        self.cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))

    def kind(self, name):
        """How a root name is read again: "param", "closure", "global", "import", or None
        (a local variable, or a parameter the function assigns)."""
        if name in self.inner:
            return None
        if name in self.imports:
            return "import"
        if name in self.stored:
            return None
        if name in self.params:
            return "param"
        if name in self.cells:
            return "closure"
        return "global"

    def getter(self, name):
        """A function that reads the root ``name`` again (None for a parameter or local)."""
        kind = self.kind(name)
        if kind == "import":
            module, attr = self.imports[name]
            if attr is None:
                return lambda: _module(module)
            return lambda: getattr(_module(module), attr)
        if kind == "closure":
            cell = self.cells[name]
            return lambda: cell.cell_contents
        if kind == "global":
            scope = self.fn.__globals__
            builtins = scope.get("__builtins__", {})
            builtins = getattr(builtins, "__dict__", builtins)
            return lambda: scope[name] if name in scope else builtins[name]
        return None


def _arg_names(args):
    every = args.posonlyargs + args.args + args.kwonlyargs + [
        a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.id for a in every if isinstance(a, gast.Name)}


_SAFE_IMPORTS = {m.partition(".")[0] for m in IMPURE}


def _module(name):
    module = sys.modules.get(name)
    if module is None and name.partition(".")[0] in _SAFE_IMPORTS:
        module = importlib.import_module(name)
    return module


def _aliases(fdef, names):
    """``{local: (root, kind, steps)}`` for each local the function assigns once, at its top
    level, from an attribute chain of a name read from outside (``c = self.cfg``), so that
    chains rooted at the local are read as chains of that root."""
    count = {}
    for node in gast.walk(fdef):
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
            count[node.id] = count.get(node.id, 0) + 1
    out = {}
    for stmt in fdef.body:
        if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], gast.Name) and count[stmt.targets[0].id] == 1:
            c = _chain(stmt.value) if not isinstance(stmt.value, gast.Name) else \
                (stmt.value, ())
            if c is not None and names.kind(c[0].id) is not None:
                out[stmt.targets[0].id] = (c[0].id, names.kind(c[0].id), c[1])
    return out


def _chain(node):
    """``(root Name node, steps)`` for ``a.b["k"].c`` (steps ``("attr", "b")``,
    ``("item", "k")``, ...; ``("item of", "k")`` for ``a[k]``, keyed by the variable ``k``),
    or None when the expression is not such a chain."""
    steps = []
    while True:
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) \
                and node.func.id == "getattr" and len(node.args) == 2 and not node.keywords \
                and isinstance(node.args[1], gast.Constant) and type(node.args[1].value) is str:
            steps.append(("attr", node.args[1].value))      # getattr(cfg, "scale")
            node = node.args[0]
            continue
        if isinstance(node, gast.Attribute):
            steps.append(("attr", node.attr))
        elif isinstance(node, gast.Subscript) and isinstance(node.slice, gast.Constant) \
                and type(node.slice.value) in (str, int):
            steps.append(("item", node.slice.value))
        elif isinstance(node, gast.Subscript) and isinstance(node.slice, gast.Name):
            steps.append(("item of", node.slice.id))     # TABLE[key]: the key's value then
        else:
            break
        node = node.value
    if not isinstance(node, gast.Name) or not steps:
        return None
    return node, tuple(reversed(steps))


class _ImpureRewriter(gast.NodeTransformer):
    """Route each impure call through ``__tracegrad__.impure(index, f)``; ``sites``
    collects an ``ImpureSite`` per rewritten call."""

    def __init__(self, names, filename, offset):
        self.names, self.filename, self.offset, self.sites = names, filename, offset, []

    def _site(self, func, extra=()):
        """The site when ``func`` (an expression) names an impure function, else None."""
        c = _chain(func) if isinstance(func, gast.Attribute) else (
            (func, ()) if isinstance(func, gast.Name) else None)
        if c is None or any(kind != "attr" for kind, _ in c[1]):
            return None
        root, steps = c
        get = self.names.getter(root.id)
        if get is None:
            return None
        try:
            obj = get()
        except Exception:       # noqa: BLE001 - not bound yet: not a module we know
            return None
        chain = [(root.id, obj)]
        for _, attr in steps:
            owner = chain[-1][1]
            chain.append((attr, getattr(owner, attr, None)
                          if isinstance(owner, types.ModuleType) else None))
        name = impure_name(chain)
        if name is None:
            return None
        attrs = [a for _, a in steps] + list(extra)

        def resolve(get=get, attrs=tuple(attrs)):
            obj = get()
            for a in attrs:
                obj = getattr(obj, a)
            return obj
        where = f"{os.path.basename(self.filename)}:{root.lineno + self.offset}"
        self.sites.append(ImpureSite(name, where, resolve))
        return len(self.sites) - 1

    def _wrap(self, index, func, node):
        call = gast.Call(func=gast.Attribute(value=_load(HELPER), attr="impure", ctx=gast.Load()),
                         args=[gast.Constant(value=index, kind=None), func], keywords=[])
        gast.copy_location(call, node)
        gast.copy_location(call.func, node)
        return call

    def visit_Call(self, node):
        self.generic_visit(node)
        index = self._site(node.func)
        if index is not None:
            node.func = self._wrap(index, node.func, node)
        return node

    def visit_Subscript(self, node):       # os.environ["HOME"]
        self.generic_visit(node)
        if not isinstance(node.ctx, gast.Load):
            return node
        index = self._site(node.value, extra=("__getitem__",))
        if index is None:
            return node
        getitem = gast.Attribute(value=node.value, attr="__getitem__", ctx=gast.Load())
        gast.copy_location(getitem, node)
        call = gast.Call(func=self._wrap(index, getitem, node), args=[node.slice], keywords=[])
        return gast.copy_location(call, node)


@functools.lru_cache(maxsize=256)
def source_names(fn):
    """``_Names`` of ``fn``'s source, or None without source."""
    parsed = _parse(fn)
    return _Names(fn, parsed[0]) if parsed is not None else None


@functools.lru_cache(maxsize=256)
def reads(fn):
    """What ``fn``'s source reads from outside: ``(first, chains)``. ``first`` maps each name
    it loads to the ``file:line`` of its first read; ``chains`` lists ``(root, kind, steps,
    where)`` for every longest attribute chain in it (``cfg.scale``: root ``cfg``, steps
    ``(("attr", "scale"),)``), ``kind`` as ``_Names.kind`` says. None without source."""
    parsed = _parse(fn)
    if parsed is None:
        return None
    fdef, filename, offset = parsed
    names = _Names(fn, fdef)
    base = os.path.basename(filename)
    first, chains = {}, []

    def at(node):
        return f"{base}:{node.lineno + offset}"

    def name_read(node):
        if node.id not in first or int(first[node.id].rpartition(":")[2]) > node.lineno + offset:
            first[node.id] = at(node)

    aliases = _aliases(fdef, names)

    def visit(node):
        if isinstance(node, (gast.Attribute, gast.Subscript, gast.Call)) and \
                isinstance(getattr(node, "ctx", gast.Load()), gast.Load):
            c = _chain(node)
            if c is not None:
                root, steps = c
                name_read(root)
                kind, rid = names.kind(root.id), root.id
                if kind is None and rid in aliases:     # c = self.cfg; c.p: self.cfg.p
                    rid, kind, head = aliases[rid]
                    steps = head + steps
                if kind is not None:
                    chains.append((rid, kind, steps, at(root)))
                return
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load):
            name_read(node)
        for child in gast.iter_child_nodes(node):
            visit(child)
    for stmt in fdef.body:
        visit(stmt)
    return first, chains


@functools.lru_cache(maxsize=256)
def instrument(fn):
    """``fn`` rewritten as the module docstring says, or None when it has no source. The
    result's ``__tracegrad_sites__`` lists its impure call sites (``ImpureSite``)."""
    parsed = _parse(fn)
    if parsed is None:
        return None
    fdef, filename, offset = parsed
    fdef.decorator_list = []
    namer = _Namer()
    namer._top = fdef
    namer.visit(fdef)
    names = _Names(fn, fdef)
    marker = StoreMarker(names, fdef, filename, offset, HELPER)
    marker.visit(fdef)
    rewriter = _ImpureRewriter(names, filename, offset)
    rewriter.visit(fdef)
    free = list(fn.__code__.co_freevars)
    factory = gast.FunctionDef(
        name="__tracegrad_factory__",
        args=gast.arguments(args=[gast.Name(id=n, ctx=gast.Param(), annotation=None,
                                            type_comment=None) for n in [HELPER] + free],
                            posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                            kwarg=None, defaults=[]),
        body=[fdef] + marker.replays + [gast.Return(value=_load(fdef.name))],
        decorator_list=[], returns=None,
        type_comment=None, type_params=[])
    module = gast.Module(body=[factory], type_ignores=[])
    pyast = gast.gast_to_ast(module)
    import ast
    ast.fix_missing_locations(pyast)
    ast.increment_lineno(pyast, offset)
    try:
        code = compile(pyast, filename, "exec")
    except SyntaxError:
        return None
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next((c for c in factory_code.co_consts if isinstance(c, types.CodeType)
                  and c.co_name == fn.__name__), None)
    if inner is None:
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells[HELPER] = types.CellType(_Helper(rewriter.sites, marker.sites))
    if any(n not in cells for n in inner.co_freevars):
        return None
    new = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[n] for n in inner.co_freevars))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__tracegrad_sites__ = rewriter.sites
    for site, replay in zip(marker.sites, marker.replays):   # each store, over its locals
        code = next((c for c in factory_code.co_consts if isinstance(c, types.CodeType)
                     and c.co_name == replay.name), None)
        if code is not None and all(n in cells for n in code.co_freevars):
            site.replay = types.FunctionType(code, fn.__globals__, replay.name, None,
                                             tuple(cells[n] for n in code.co_freevars))
    return new
