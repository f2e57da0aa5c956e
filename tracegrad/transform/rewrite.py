"""The rewrite itself: ``instrument`` names each assigned value and routes each impure
call through ``__tracegrad__``; ``reads`` lists what a function reads from outside."""
import ast
import functools
import os
import types

import gast

from ..stores import StoreMarker
from .helper import HELPER, _Helper
from .impure import ImpureSite, impure_name
from .source import _aliases, _chain, _load, _Names, _parse, _target_names


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
