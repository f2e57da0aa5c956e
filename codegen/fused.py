"""A fused group to NumPy: a kernel function of ufunc calls that write into buffers.

Each op of the group becomes ufunc calls with ``out=``: a template such as
``{0} * (1 - {1} * {1})`` is lowered to one call per operator, so no op
allocates. Values that die inside the group share scratch buffers (an op may
write over an input it is the last to read). The kernel takes the group's
inputs, the arrays its outputs go to, and its scratch buffers, and returns the
partial results of reductions that span every row::

    def forward_fused0(x, a, b, e, buf0, buf1):
        \"\"\"fused0: mul add tanh mul sum, one pass over [10000000].\"\"\"
        # model.py:3: y = torch.tanh(x * a + b)
        c = np.multiply(x, a, out=buf0)
        d = np.add(c, b, out=buf0)
        np.tanh(d, out=e)
        ...
        return (out,)

For a small domain the function calls the kernel once on whole arrays with
scratch buffers from the variant's workspace. Past ``CHUNK_MIN`` elements it
hands the kernel to ``support.run_chunks``, which calls it on slices of
``step`` rows (so a chain of ops streams through the cache instead of making
one pass over memory per op), spread over threads, each with scratch of its
own; partial results combine over chunks in a fixed order.
"""
import ast
import math
import os

import numpy as np

from tracegrad.ir import Value
from tracegrad.passes.fuse import spans_rows
from tracegrad.passes.memplan import written

from . import python as py

# Chunking, measured with benchmarks/chunking.py on the project's 2-core machines (W1's forward
# group: 12 elementwise ops and a sum over float32 vectors; ms, with chunks of 2**17):
#   elements   2**18  2**19  2**20  2**21  2**22  2**23  2**24
#   plain      0.46   1.28   5.05   10.4   16.1   35.2   104.5
#   chunks     0.52   1.17   2.45   4.53   8.90   17.4   55.3
# Plain is as fast up to 2**18 (a pass over the arrays still fits the caches); from 2**19 on
# chunks win, by 2x at 2**20 and up. Chunks of 2**12 to 2**19 elements at 2**23: 82, 60, 43,
# 41, 39, 35, 36, 35 ms: below 2**15 the per-chunk Python overhead dominates; 2**17 float32
# elements (512 KiB a buffer) is past the knee and still inside the 32 MiB L3.
CHUNK_MIN = 1 << 19         # elements in the domain from which a group runs in chunks
CHUNK_ELEMS = 1 << 17       # elements per chunk
THREADS = os.cpu_count() or 1

_BINARY = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
           ast.FloorDiv: "floor_divide", ast.Mod: "remainder", ast.Pow: "power",
           ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor",
           ast.LShift: "left_shift", ast.RShift: "right_shift"}
_UNARY = {ast.USub: "negative", ast.UAdd: "positive", ast.Invert: "invert",
          ast.Not: "logical_not"}
_COMPARE = {ast.Eq: "equal", ast.NotEq: "not_equal", ast.Lt: "less", ast.LtE: "less_equal",
            ast.Gt: "greater", ast.GtE: "greater_equal"}


class NotLowerable(Exception):
    """The expression has a part that is not a ufunc call; it is computed as it is."""


class Scratch:
    """Scratch buffers of one kernel: taken and given back while the kernel is written, so
    values whose lives do not overlap share a buffer of their shape and dtype."""

    def __init__(self, namer):
        self.specs, self.free, self.namer = [], {}, namer

    def take(self, shape, dtype):
        key = (tuple(shape), np.dtype(dtype))
        if self.free.get(key):
            return self.free[key].pop()
        name = f"buf{len(self.specs)}"
        if name in self.namer.used:         # a user's variable of that name
            name = self.namer.fresh(name)
        self.specs.append((name, key[0], key[1]))
        return name

    def give(self, name):
        for n, shape, dtype in self.specs:
            if n == name:
                self.free.setdefault((shape, dtype), []).append(name)


def lower(source, arrays, target, want, scratch):
    """Statements computing ``source`` into the buffer ``target`` by ufunc calls.

    ``arrays``: name -> (shape, dtype) of the array operands. Temporaries come from
    ``scratch`` and go back to it. Raises ``NotLowerable`` when a part is not a ufunc call
    or NumPy would not give ``want``, the target's (shape, dtype).
    """
    tree = ast.parse(source, mode="eval").body
    stmts, temps = [], []

    def visit(node, out=None):
        if isinstance(node, ast.Name) and node.id in arrays:
            if out is not None:
                raise NotLowerable(source)     # a bare name: a copy, done by the caller
            return node.id, arrays[node.id]
        scalar = _scalar(node)
        if scalar is not None:
            if out is not None:
                raise NotLowerable(source)
            return scalar, None
        ufunc, operands = _ufunc_of(node)
        parts = [visit(o) for o in operands]
        shapes = [p[1][0] for p in parts if p[1] is not None]
        if not shapes:
            raise NotLowerable(source)
        shape = np.broadcast_shapes(*shapes)
        dtype = _probe(ufunc, parts)
        for p in parts:             # a temporary read only here may take this result
            if p[0] in temps:
                scratch.give(p[0])
                temps.remove(p[0])
        if out is None:
            out = scratch.take(shape, dtype)
            temps.append(out)
        elif (shape, dtype) != (tuple(want[0]), np.dtype(want[1])):
            raise NotLowerable(source)
        stmts.append(f"np.{ufunc}({', '.join(p[0] for p in parts)}, out={out})")
        return out, (shape, dtype)
    try:
        visit(tree, target)
    finally:
        for t in temps:
            scratch.give(t)
    return stmts


def _scalar(node):
    """Source of a Python scalar operand, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return ast.unparse(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and _scalar(node.operand) is not None:
        return ast.unparse(node)
    if isinstance(node, ast.Attribute) and ast.unparse(node) in ("np.nan", "np.inf", "np.pi"):
        return ast.unparse(node)
    return None


def _ufunc_of(node):
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)], [node.left, node.right]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)], [node.operand]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])], [node.left, node.comparators[0]]
    if isinstance(node, ast.Call) and not node.keywords and isinstance(node.func, ast.Attribute) \
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "np" \
            and isinstance(getattr(np, node.func.attr, None), np.ufunc):
        return node.func.attr, node.args
    raise NotLowerable(ast.unparse(node))


def _probe(ufunc, parts):
    """The dtype NumPy gives ``ufunc`` over these operands (scalars stay Python scalars)."""
    args = [eval(src, {"np": np}) if info is None
            else np.zeros((1,) * len(info[0]), info[1]) for src, info in parts]
    with np.errstate(all="ignore"):
        return np.asarray(getattr(np, ufunc)(*args)).dtype


# one kernel -------------------------------------------------------------------------------

class Kernel:
    """What the calling function needs to know about an emitted kernel."""

    def __init__(self, name, group, outputs, partials, scratch, chunks):
        self.name, self.group = name, group
        self.outputs = outputs          # loop values written into arrays the caller passes
        self.partials = partials        # values it returns: reductions over every row
        self.scratch = scratch          # [(name, shape, dtype)]; one set per thread
        self.chunks = chunks            # (step, threads), or None: called once


def plan_chunks(domain):
    """``(step, threads)`` when a group over ``domain`` runs in chunks of rows, else None."""
    size = math.prod(domain)
    if not domain or size < CHUNK_MIN or domain[0] < 2:
        return None
    step = max(1, CHUNK_ELEMS // max(size // domain[0], 1))
    if step >= domain[0]:
        return None
    return step, max(1, min(THREADS, -(-domain[0] // step)))


def sliced(v, group):
    """Whether a kernel gets ``v`` in slices of rows when the group runs in chunks: every
    loop value does; an input does when its rows line up with the domain's."""
    domain = group.domain
    if any(n.out is v for n in group.loop):
        return True
    return bool(domain) and v.ndim == len(domain) and v.shape[0] == domain[0]


def emit_kernel(em, group, name, label, namer, site_comment):
    """Source of the kernel of ``group`` and its ``Kernel`` description."""
    chunks = plan_chunks(group.domain)
    loop = group.loop
    partials = [n.out for n in loop if spans_rows(n)]
    outputs = written(group)

    def shape_in(v):        # the shape a kernel sees: ``step`` rows in place of all
        return (chunks[0],) + v.shape[1:] if chunks and sliced(v, group) else v.shape
    arrays = {namer(v): (shape_in(v), v.dtype.np) for v in group.inputs + tuple(outputs)}
    last = {}
    for i, n in enumerate(loop):
        for v in n.values():
            last[v] = i
    scratch, buffer_of, holders = Scratch(namer), {}, {}    # value -> buffer; buffer -> values
    body, prev_site = [], None
    for i, n in enumerate(loop):
        if n.out in partials:
            stmts = [f"{namer(n.out)} = {_source(em, n, namer)}"]
        else:
            want = (shape_in(n.out), n.out.dtype.np)
            target = namer(n.out) if n.out in outputs else None
            stmts, buf = _compute(em, n, namer, arrays, want, target, scratch)
            if buf == "alias":      # the same array as its input: its buffer lives on
                buf = buffer_of.get(n.inputs[0])
            if buf is not None:
                buffer_of[n.out] = buf
                holders[buf] = holders.get(buf, 0) + 1
        arrays[namer(n.out)] = (shape_in(n.out), n.out.dtype.np)
        comment = site_comment(n.site) if n.site != prev_site else None
        prev_site = n.site
        body.extend((comment if k == 0 else None, py.stmt(s)) for k, s in enumerate(stmts))
        for v in set(n.values()):
            if last.get(v) == i and v in buffer_of:
                buf = buffer_of.pop(v)
                holders[buf] -= 1
                if not holders[buf]:
                    scratch.give(buf)
    body.append((None, py.return_([namer(v) for v in partials])))
    params = ([namer(v) for v in group.inputs] + [namer(v) for v in outputs]
              + [s[0] for s in scratch.specs])
    ops = " ".join(n.op for n in group.nodes)
    where = f"in chunks of {chunks[0]} rows on {chunks[1]} thread(s)" if chunks else "at once"
    doc = f"{label}: {ops}; one pass over [{','.join(map(str, group.domain))}], {where}."
    src = py.function(name, params, body, doc)
    return src, Kernel(name, group, outputs, partials, scratch.specs, chunks)


def _source(em, n, namer):
    return em.expression(n, lambda v: namer(v) if type(v) is Value else em.scalar(v))


def _compute(em, n, namer, arrays, want, target, scratch):
    """``(statements, buffer)`` computing loop node ``n`` into ``target`` (an array the
    caller passed) or, when None, into a scratch buffer; ``buffer`` is the scratch buffer
    the value lives in, None when it has none, or "alias" when it is its input's array."""
    out, src = namer(n.out), _source(em, n, namer)
    if n.prim.kind == "reduction":      # its template is one NumPy call: give it out=
        buf = target or scratch.take(*want)
        call = f"{src[:-1]}, out={buf})"
        return [call if target else f"{out} = {call}"], None if target else buf
    cast = em.needs_cast(n, src, {namer(v): v.aval for v in n.values()})
    if not cast and src in arrays and not target:   # an identity: the input's array
        return [f"{out} = {src}"], "alias"
    if not cast:
        buf = target or scratch.take(*want)
        try:
            stmts = lower(src, arrays, buf, want, scratch)
        except NotLowerable:
            if not target:
                scratch.give(buf)
        else:
            if target:
                return stmts, None
            stmts[-1] = f"{out} = {stmts[-1]}"
            return stmts, buf
    if cast:
        src = f"({src}).astype({em.scalar(n.out.aval.dtype)})"
    return [f"np.copyto({out}, {src}, casting='unsafe')" if target else f"{out} = {src}"], None


def emit_call(em, kernel, namer, ws, label, slot_of=None):
    """Statements of the calling function that run ``kernel``: ``[(comment or None,
    statement source)]``. ``ws`` names the workspace; ``slot_of``: output value -> its
    workspace slot (memplan), else the output gets a fresh array."""
    g = kernel.group
    sites = sorted({os.path.basename(n.site) for n in g.nodes if n.site})
    comment = f"{label} ({g.kind}): {' '.join(n.op for n in g.nodes)}" + (
        f"  [{', '.join(sites)}]" if sites else "")
    out = []
    for v in kernel.outputs:
        slot = (slot_of or {}).get(v)
        out.append(f"{namer(v)} = {ws}.{slot}" if slot else
                   f"{namer(v)} = np.empty({v.shape!r}, dtype={em.scalar(v.dtype)})")
    args = [namer(v) for v in g.inputs] + [namer(v) for v in kernel.outputs]
    lhs = "".join(f"{namer(v)}, " for v in kernel.partials)
    lhs = f"{lhs}= " if lhs else ""
    if kernel.chunks:
        step, _ = kernel.chunks
        flags = tuple(sliced(v, g) for v in g.inputs + tuple(kernel.outputs))
        trim = tuple(len(s) == len(g.domain) and s[0] == step for _, s, _ in kernel.scratch)
        combine = tuple(next(n.op for n in g.loop if n.out is v) for v in kernel.partials)
        out.append(f"{lhs}run_chunks({kernel.name}, ({', '.join(args)}{',' * (len(args) == 1)}),"
                   f" {ws}.{kernel.name}, rows={g.domain[0]}, step={step}, sliced={flags!r},"
                   f" trim={trim!r}, combine={combine!r})")
    else:
        out.append(f"{lhs}{kernel.name}({', '.join(args + [f'*{ws}.{kernel.name}[0]'])})")
    return [(comment if k == 0 else None, s) for k, s in enumerate(out)]


def workspace_spec(kernel):
    """``(copies, [(shape, dtype)])`` of a kernel's scratch in the workspace."""
    copies = kernel.chunks[1] if kernel.chunks else 1
    return copies, [(shape, dtype) for _, shape, dtype in kernel.scratch]
