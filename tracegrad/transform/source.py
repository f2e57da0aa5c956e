"""A function's source, parsed with gast: what its names stand for (``_Names``: parameters,
locals, closure cells, globals, imports) and the attribute chains it reads (``_chain``)."""
import functools
import importlib
import inspect
import sys
import textwrap
import types

import gast

from .impure import IMPURE


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


@functools.lru_cache(maxsize=256)
def source_names(fn):
    """``_Names`` of ``fn``'s source, or None without source."""
    parsed = _parse(fn)
    return _Names(fn, parsed[0]) if parsed is not None else None
