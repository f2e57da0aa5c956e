"""Python source for generated modules, and loading it so tracebacks and pdb show it.

A generated function is a list of statements, each the canonical text of one Python
statement (what ``ast.unparse`` writes) with an optional comment line above it (the
user's ``file:line: source``). Statements come from templates as text; ``stmt`` and
``assign`` make that text canonical without parsing each statement: the text's names
and decimal ints are replaced by numbered placeholders, and the canonical form of
that *shape* is parsed and unparsed once and kept (unparsing writes a name as it is
and an int as its value, wherever they stand), so an unrolled loop's ten thousand
``t9 = np.add(t6, xs[3], out=buf0)`` cost one parse. ``parses`` counts the parses
made; ``CHECK`` compares every statement with its own parse. ``load`` registers the
source with ``linecache`` under a unique file name (or writes it to a real file under
``TRACEGRAD_DUMP``), then executes it: a traceback through the generated code shows
its lines. A function whose frame nearly fills one of CPython's frame-stack chunks gets its
value stack grown past one (``_own_chunk``), so that the calls it makes find room.
"""
import ast
import itertools
import keyword
import linecache
import os
import re
import types

_count = itertools.count()
CHECK = False       # tests switch this on: each statement is also parsed on its own, to compare
parses = 0          # statements parsed so far (one per distinct shape)

# tokens: a string literal, a hex, octal or binary int, a float (group 1: kept as they
# are); a decimal int (group 2: an int placeholder, so that a loop's indices share a shape);
# a name (group 3: a name placeholder)
_TOKEN = re.compile(r"""([rRbBuUfF]{0,2}(?:'[^'\\\n]*(?:\\.[^'\\\n]*)*'"""
                    r"""|"[^"\\\n]*(?:\\.[^"\\\n]*)*")"""
                    r"""|0[xXoObB][\da-fA-F_]+|(?:\d[\d_]*\.[\d_]*|\.\d[\d_]*|\d[\d_]*(?=[eEjJ]))"""
                    r"""(?:[eE][+-]?\d+)?[jJ]?)|(\d[\d_]*)|([^\W\d]\w*)""")
_NAME, _INT = "_Q_{}_", "73737{:04d}"      # placeholders; unparse writes both as they are
_HOLE = re.compile(r"_Q_(\d+)_|(?<![\w.])73737(\d{4})(?![\w.])")
_KEEP = frozenset(keyword.kwlist)
_shapes = {}        # shape text -> its canonical text as a format string, holes as {0}, {1}...
_SHAPES_KEPT = 50_000


def _canonical(source):
    """``ast.unparse`` of the first statement of ``source``, counted."""
    global parses
    parses += 1
    return _unparsed(source)


def _unparsed(source):
    return ast.unparse(ast.parse(source).body[0])


def canonical(source):
    """The canonical text of the statement ``source`` (as ``_canonical``), parsing only a
    shape not seen before."""
    if "_Q_" in source or "73737" in source or "'''" in source or '"""' in source:
        return _canonical(source)       # would clash with the placeholders: parsed as it is
    fills, index = [], {}

    def hole(m):
        word, number = m[3], m[2]
        if word is not None:
            if word in _KEEP:
                return word
            key, text, form = word, word, _NAME
        elif number is not None:        # an int: unparse writes its value
            text = str(int(number.replace("_", "")))
            key, form = ("int", text), _INT
        else:
            return m[0]
        k = index.get(key)
        if k is None:
            k = index[key] = len(fills)
            fills.append(text)
        return form.format(k)
    shape = _TOKEN.sub(hole, source)
    form = _shapes.get(shape)
    if form is None:
        if len(fills) > 9999:
            return _canonical(source)
        try:
            parts = _HOLE.split(_canonical(shape))
        except SyntaxError:     # a token the pattern does not know: parsed as it is
            return _canonical(source)
        # split gives text, name hole, int hole, text, ...: one of each pair of holes is set
        out = [parts[0].replace("{", "{{").replace("}", "}}")]
        for i in range(1, len(parts), 3):
            out.append("{" + str(int(parts[i] if parts[i] is not None else parts[i + 1])) + "}")
            out.append(parts[i + 2].replace("{", "{{").replace("}", "}}"))
        form = _shapes[shape] = "".join(out)
        if len(_shapes) > _SHAPES_KEPT:
            _shapes.clear()
    out = form.format(*fills)
    if CHECK and out != _unparsed(source):
        raise AssertionError(f"canonical text of {source!r}: {out!r}")
    return out


def expr(source):
    """An expression (its text; ``assign`` makes the statement canonical)."""
    return source


def assign(target, value):
    """``target = value``, ``value`` from ``expr``."""
    return canonical(f"{target} = {value}")


def release(names):
    """``del a, b``: the values are not needed any more."""
    return f"del {', '.join(names)}"


def return_(names):
    """``return (a, b)``: always a tuple, so callers need not special-case one value."""
    return f"return ({', '.join(names)}{',' if len(names) == 1 else ''})"


def stmt(source):
    """The canonical text of the statement ``source``."""
    return canonical(source)


def function(fname, params, body, doc=None):
    """Source of ``def fname(params):`` with ``body`` a list of (comment or None, stmt)."""
    lines = [f"def {fname}({', '.join(params)}):"]
    if doc:
        lines.append(f'    """{doc}"""')
    for comment, text in body:
        if comment:
            lines.append(f"    # {comment}")
        lines.extend("    " + line for line in text.split("\n"))
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
    for value in list(namespace.values()):
        if type(value) is types.FunctionType and value.__code__.co_filename == filename:
            value.__code__ = _own_chunk(value.__code__)
    return namespace, filename


# CPython (3.11 on) keeps frames on a per-thread stack of 16 KiB chunks of 8-byte slots. A
# frame that fits in the chunk in use goes there; one that does not gets a new chunk with at
# least 1000 slots free after it. A generated function of a few thousand values has a frame
# of nearly a chunk: where it fits, it can leave a few slots free, and then every Python call
# it makes (a C kernel's wrapper, a NumPy function) maps a new chunk and unmaps it on return:
# mmap, a page fault and munmap, some 5 us each, hundreds of times a call (lstm_lm's whole
# step: 1853 locals, 125 of these a step).
CHUNK_SLOTS = 16 * 1024 // 8
BIG_FRAME = CHUNK_SLOTS // 4


def _own_chunk(code):
    """``code`` with its value stack grown, unused, so that a frame of over ``BIG_FRAME``
    slots is larger than a chunk: each call then gets a chunk of its own with room left for
    the calls it makes (no effect on what it computes)."""
    slots = code.co_nlocals + len(code.co_cellvars) + len(code.co_freevars) + code.co_stacksize
    if slots <= BIG_FRAME or slots > CHUNK_SLOTS:
        return code
    return code.replace(co_stacksize=code.co_stacksize + CHUNK_SLOTS - slots + 1)
