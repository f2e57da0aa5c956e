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

Functions without retrievable source (REPL lambdas, builtins, C functions)
are traced as they are: ``instrument`` returns None.
"""
import inspect
import textwrap
import types

import gast

from . import _hooks
from .tensor import Tensor

HELPER = "__tracegrad__"


class _Helper:
    """What the rewritten function calls (reached through a closure cell)."""

    @staticmethod
    def name(value, name):
        tracer = _hooks.tracer
        if tracer is None:
            return
        for t, n in _named(value, name):
            v = tracer.env.get(id(t))
            if v is not None and v[1].name is None:     # the first assignment names it
                tracer.names.setdefault(v[1], n)


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


def instrument(fn):
    """``fn`` rewritten as the module docstring says, or None when it has no source."""
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
    fdef.decorator_list = []
    namer = _Namer()
    namer._top = fdef
    namer.visit(fdef)
    free = list(fn.__code__.co_freevars)
    factory = gast.FunctionDef(
        name="__tracegrad_factory__",
        args=gast.arguments(args=[gast.Name(id=n, ctx=gast.Param(), annotation=None,
                                            type_comment=None) for n in [HELPER] + free],
                            posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                            kwarg=None, defaults=[]),
        body=[fdef, gast.Return(value=_load(fdef.name))], decorator_list=[], returns=None,
        type_comment=None, type_params=[])
    module = gast.Module(body=[factory], type_ignores=[])
    pyast = gast.gast_to_ast(module)
    import ast
    ast.fix_missing_locations(pyast)
    ast.increment_lineno(pyast, fn.__code__.co_firstlineno - 1)
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
    cells[HELPER] = types.CellType(_Helper)
    if any(n not in cells for n in inner.co_freevars):
        return None
    new = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[n] for n in inner.co_freevars))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new
