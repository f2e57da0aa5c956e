"""Python source from gast ASTs, and loading it so tracebacks and pdb show it.

A generated function is a list of statements, each a gast node with an
optional comment line above it (the user's ``file:line: source``). The AST is
built with gast, converted to the standard ``ast`` and unparsed one statement
at a time, so comments can sit between statements. ``load`` registers the
source with ``linecache`` under a unique file name (or writes it to a real
file under ``TRACEGRAD_DUMP``), then executes it: a traceback through the
generated code shows its lines.
"""
import ast
import itertools
import linecache
import os

import gast

_count = itertools.count()


def expr(source):
    """A gast expression node from Python source text."""
    return gast.parse(source, mode="eval").body


def name(id_, store=False):
    return gast.Name(id=id_, ctx=gast.Store() if store else gast.Load(), annotation=None,
                     type_comment=None)


def assign(target, value):
    return gast.Assign(targets=[name(target, store=True)], value=value, type_comment=None)


def release(names):
    """``del a, b``: the values are not needed any more."""
    return gast.Delete(targets=[gast.Name(id=n, ctx=gast.Del(), annotation=None,
                                          type_comment=None) for n in names])


def return_(names):
    """``return (a, b)``: always a tuple, so callers need not special-case one value."""
    return gast.Return(value=gast.Tuple(elts=[name(n) for n in names], ctx=gast.Load()))


def stmt(source):
    """A gast statement from Python source text."""
    return gast.parse(source).body[0]


def function(fname, params, body, doc=None):
    """Source of ``def fname(params):`` with ``body`` a list of (comment or None, stmt)."""
    lines = [f"def {fname}({', '.join(params)}):"]
    if doc:
        lines.append(f'    """{doc}"""')
    # one gast -> ast conversion for the whole body, then one unparse per statement
    converted = gast.gast_to_ast(gast.Module(body=[node for _, node in body], type_ignores=[]))
    ast.fix_missing_locations(converted)
    for (comment, _), node in zip(body, converted.body):
        if comment:
            lines.append(f"    # {comment}")
        for line in ast.unparse(node).splitlines():
            lines.append("    " + line)
    if len(lines) == 1:
        lines.append("    pass")
    return "\n".join(lines)


def load(source, label, env):
    """Execute ``source`` as a module; its functions' code points at ``source`` lines."""
    dump = os.environ.get("TRACEGRAD_DUMP")
    if dump:
        os.makedirs(dump, exist_ok=True)
        filename = os.path.abspath(os.path.join(dump, f"{label}.py"))
        with open(filename, "w") as f:
            f.write(source)
    else:
        filename = f"<tracegrad:{label}:{next(_count)}>"
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    namespace = dict(env)
    namespace["__name__"] = f"tracegrad_generated_{label}"
    exec(compile(source, filename, "exec"), namespace)
    return namespace, filename
