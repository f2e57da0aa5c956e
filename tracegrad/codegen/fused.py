"""The NumPy renderer of the kernel IR: a kernel function of ufunc calls into buffers.

Each op of a ``kernel.Kernel`` becomes the ufunc call(s) of its primitive's
``np_out`` form, writing into a buffer (``np.multiply({self}, {other},
out={out})``), so no op allocates; the IR's casts and typed literals mean the
ufuncs compute in the dtypes the avals say. Values that die inside the group share scratch buffers (an op may
write over an input it is the last to read). The kernel takes the group's
inputs, the arrays its outputs go to, and its scratch buffers, and returns the
partial results of reductions that span every row::

    def forward_fused0(x, a, b, e, ws):
        \"\"\"fused0: mul add tanh mul sum, one pass over [1000], at once.\"\"\"
        buf0, = ws.forward_fused0[0]
        # model.py:3: y = torch.tanh(x * a + b)
        c = np.multiply(x, a, out=buf0)
        d = np.add(c, b, out=buf0)
        np.tanh(d, out=e)
        ...
        return (out,)

For a small domain the kernel runs once on whole arrays with scratch buffers
from the variant's workspace. Past ``CHUNK_MIN`` elements its entry hands
``<name>_chunk`` to ``support.run_chunks``, which calls it on slices of
``step`` rows (so a chain of ops streams through the cache instead of making
one pass over memory per op), spread over threads, each with scratch of its
own; partial results combine over chunks in a fixed order.
"""
import math
import os

import numpy as np

from tracegrad.parallel import max_threads
from tracegrad.symbolic import symbols_in

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
THREADS = max_threads()     # buffer sets a chunked kernel keeps; get_num_threads() run
REUSED_BYTES = 1 << 20      # outputs this large reuse earlier calls' arrays (support.Outputs)


class Scratch:
    """Scratch buffers of one kernel: taken and given back while the kernel is written, so
    values whose lives do not overlap share a buffer of their shape and dtype."""

    def __init__(self, namer):
        self.specs, self.free, self.namer = [], {}, namer
        self.key_of = {}        # buffer name -> (shape, dtype)

    def take(self, shape, dtype):
        key = (tuple(shape), np.dtype(dtype))
        if self.free.get(key):
            return self.free[key].pop()
        name = f"buf{len(self.specs)}"
        if name in self.namer.used:         # a user's variable of that name
            name = self.namer.fresh(name)
        self.specs.append((name, key[0], key[1]))
        self.key_of[name] = key
        return name

    def give(self, name):
        key = self.key_of.get(name)
        if key is not None:
            self.free.setdefault(key, []).append(name)


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


def sliced(v, group, inside=None):
    """Whether a kernel gets ``v`` in slices of rows when the group runs in chunks: every
    loop value does; an input does when its rows line up with the domain's. ``inside``:
    the set of the loop's values, where the caller asks for many ``v``."""
    domain = group.domain
    if v in (inside if inside is not None else {n.out for n in group.loop}):
        return True
    return bool(domain) and v.ndim == len(domain) and v.shape[0] == domain[0]


def emit_kernel(em, kernel, namer, site_comment):
    """Source of the NumPy tier of ``kernel`` (a ``kernel.Kernel``) and its ``Plan``.

    The entry ``kernel.name(inputs..., outputs..., ws)`` returns the partial results; a
    chunked kernel's entry hands ``<name>_chunk`` to ``run_chunks``."""
    group = kernel.group
    # chunks keep a CPU's caches warm; on a GPU the kernel runs once over the whole domain
    chunks = plan_chunks(group.domain) if em.device == "cpu" else None
    loop = kernel.body
    partials = {op.name for op in kernel.partials}
    outputs = {op.name for op in kernel.outputs}
    inside = {n.out for n in group.loop}
    rows = {i.name for i in kernel.inputs if sliced(i.value, group, inside)} | {
        op.name for op in loop}
    if chunks and symbols_in(group.domain[0]) and not rows & (
            {i.name for i in kernel.inputs} | outputs):
        chunks = None       # no array passed in rows to read their number from

    def shape_in(name, shape):     # the shape a kernel sees: ``step`` rows in place of all
        # (a value over fewer dims or one row, as a learning rate cast, stays as it is)
        if not (chunks and name in rows and len(shape) == len(group.domain)
                and shape[0] == group.domain[0]):
            return tuple(shape)
        return (chunks[0],) + tuple(shape[1:])
    last = {}
    for i, op in enumerate(loop):
        for a in op.operands():
            last[a] = i
    scratch, buffer_of, holders = Scratch(namer), {}, {}    # value -> buffer; buffer -> values
    body, prev_site = [], None

    def release(i, op):
        for a in dict.fromkeys(op.operands()):     # in order: the same code every run
            if last.get(a) == i and a in buffer_of:
                buf = buffer_of.pop(a)
                holders[buf] -= 1
                if not holders[buf]:
                    scratch.give(buf)
    for i, op in enumerate(loop):
        want = (shape_in(op.name, op.shape), op.dtype.np)
        if op.name in partials:
            stmts = [f"{op.name} = {em.expression(op, lambda a: _arg(em, a))}"]
            release(i, op)
        else:
            target = op.name if op.name in outputs else None
            stmts, buf = _compute(em, op, target, want, scratch, lambda: release(i, op))
            if buf == "alias":      # the same array as its input: its buffer lives on
                buf = buffer_of.get(op.args[0])
            if buf is not None:
                buffer_of[op.name] = buf
                holders[buf] = holders.get(buf, 0) + 1
            release(i, op)      # (again, for an alias: only once it holds the buffer too)
        comment = site_comment(op.site) if op.site and op.site != prev_site else None
        prev_site = op.site or prev_site
        body.extend((comment if k == 0 else None, py.stmt(s)) for k, s in enumerate(stmts))
    place = {}
    for k, op in enumerate(loop):
        place.setdefault(op.name, k)
    body.append((None, py.return_(sorted(partials, key=place.__getitem__))))
    for i in reversed(kernel.inputs):       # passed the matrix a column slice is taken of
        if i.source is not None:
            body.insert(0, (None, py.stmt(
                f"{i.name} = {i.name}[:, {i.offset}:{i.offset + i.value.shape[1]}]")))
    ins = [i.name for i in kernel.inputs] + [op.name for op in kernel.outputs]
    bufs = [s[0] for s in scratch.specs]
    where = f"in chunks of {chunks[0]} rows" if chunks else "at once"
    doc = (f"{kernel.label}: {kernel.op_names()}; one pass over "
           f"[{','.join(map(str, group.domain))}], {where}.")
    if chunks:
        flags = tuple(n in rows for n in ins)
        # a dynamic domain's rows are read from the first array passed in rows
        nrows = group.domain[0] if not symbols_in(group.domain[0]) else \
            f"{ins[flags.index(True)]}.shape[0]"
        trim = tuple(len(s) == len(group.domain) and s[0] == chunks[0]
                     for _, s, _ in scratch.specs)
        combine = tuple(op.combiner.ufunc for op in kernel.partials)
        chunk = py.function(f"{kernel.name}_chunk", ins + bufs, body, doc)
        entry = py.function(kernel.name, ins + ["ws"], [(None, py.stmt(
            f"return run_chunks({kernel.name}_chunk, ({', '.join(ins)}{',' * (len(ins) == 1)}),"
            f" ws.{kernel.name}, rows={nrows}, step={chunks[0]}, sliced={flags!r},"
            f" trim={trim!r}, combine={combine!r})"))], f"{kernel.label} on the NumPy tier.")
        src = chunk + "\n\n\n" + entry
    else:
        if bufs:
            body.insert(0, (None, py.stmt(f"{', '.join(bufs)}, = ws.{kernel.name}[0]")))
        src = py.function(kernel.name, ins + ["ws"], body, doc)
    return src, Plan(kernel, scratch.specs, chunks)


class Plan:
    """What the driver needs of an emitted kernel: its scratch (one set per thread when
    chunked) and its chunking (``(step, threads)`` or None)."""

    def __init__(self, kernel, scratch, chunks):
        self.kernel, self.scratch, self.chunks = kernel, scratch, chunks


# Where CuPy's call differs from NumPy's (as a real GPU showed), a CUDA variant's module
# calls the primitive's implementation, which takes care of it (CuPy's float remainder and
# floor_divide are not exact, its clip ignores a NaN bound), or computes without out=
# (CuPy's min(out=) hands out to CUB as the dtype).
ON_DEVICE_VIA_IMPL = frozenset({"remainder", "div_rounding", "clamp"})
ON_DEVICE_NO_OUT = ON_DEVICE_VIA_IMPL | {"amin"}


def _arg(em, a):
    return a if type(a) is str else em.scalar(a.value)


def _compute(em, op, target, want, scratch, release):
    """``(statements, buffer)`` computing ``op`` into ``target`` (an array the caller
    passed) or, when None, into a scratch buffer; ``buffer`` is the scratch buffer the
    value lives in, None when it has none, or "alias" when it is its input's array.
    ``release()`` gives back the buffers of operands that die here."""
    prim = op.prim
    form = prim.np_out
    if em.device != "cpu" and prim.name in ON_DEVICE_NO_OUT:
        form = None
    if form is None and prim.np_template == "{self}":        # an identity
        if target:
            return [f"np.copyto({target}, {op.args[0]})"], None
        return [f"{op.name} = {op.args[0]}"], "alias"
    slots = {k: em.param(v, for_template=True) for k, v in op.params.items()}
    slots.update(zip(prim.args, (_arg(em, a) for a in op.args)))
    several = isinstance(form, tuple) or callable(form)
    if not several and form is not None:
        release()               # a single ufunc may write over an operand it reads
    buf = target or scratch.take(*want)
    if several:
        release()               # after taking: the steps must not write over an operand
    if form is None:            # no ufunc form: computed as it is, then stored
        stmts = [f"np.copyto({buf}, {em.expression(op, lambda a: _arg(em, a))}, "
                 f"casting='unsafe')"]
    elif callable(form):
        stmts = list(form(**dict(zip(prim.args, (_arg(em, a) for a in op.args))),
                          **op.params, out=buf))
    else:
        stmts = [f.format(**slots, out=buf) for f in (form if several else (form,))]
    if target:
        return stmts, None
    if len(stmts) == 1 and not stmts[0].startswith("np.copyto"):
        stmts[0] = f"{op.name} = {stmts[0]}"    # a ufunc returns its out= array
    else:
        stmts.append(f"{op.name} = {buf}")
    return stmts, buf


def emit_call(em, plan, namer, ws, label, slot_of=None, returned=()):
    """Statements of the calling function that run a kernel: ``[(comment or None,
    statement source)]``. ``ws`` names the workspace; ``slot_of``: output value -> its
    workspace slot (memplan), else the output gets a fresh array, or (a large one the
    function returns, among ``returned``) an earlier call's (``_reused``)."""
    kernel = plan.kernel
    g = kernel.group
    sites = sorted({os.path.basename(n.site) for n in g.nodes if n.site})
    comment = f"{label} ({g.kind}): {kernel.op_names()}" + (
        f"  [{', '.join(sites)}]" if sites else "")
    out = []
    for op in kernel.outputs:
        slot = (slot_of or {}).get(op.value)
        if slot:
            out.append(f"{op.name} = {ws}.{slot}")
        elif op.value in returned and _reused(em, op):
            out.append(f"{op.name} = _outputs.take({op.name!r}, {op.value.shape!r}, "
                       f"{em.scalar(op.dtype)})")
        else:
            out.append(f"{op.name} = np.empty({op.value.shape!r}, dtype={em.scalar(op.dtype)})")
    args = [i.arg for i in kernel.inputs] + [op.name for op in kernel.outputs] + [ws]
    lhs = "".join(f"{op.name}, " for op in kernel.partials)
    out.append(f"{lhs}= {kernel.name}({', '.join(args)})" if lhs else
               f"{kernel.name}({', '.join(args)})")
    return [(comment if k == 0 else None, s) for k, s in enumerate(out)]


def _reused(em, op):
    """Whether output ``op`` of a group comes from ``support.Outputs`` (arrays of earlier calls
    reused; only for what the function returns: a value that dies inside it is freed there,
    and memory kept for each such site would add up to more than the function ever holds
    at once): on the CPU (CuPy's memory pool reuses GPU memory already), of a known shape, and
    at least ``REUSED_BYTES`` (smaller ones come from memory the process already has)."""
    shape = op.value.shape
    return (em.device == "cpu" and all(type(d) is int for d in shape)
            and math.prod(shape) * np.dtype(op.dtype.np).itemsize >= REUSED_BYTES)


def workspace_spec(plan):
    """``(copies, [(shape, dtype)])`` of a kernel's scratch in the workspace."""
    copies = plan.chunks[1] if plan.chunks else 1
    return copies, [(shape, dtype) for _, shape, dtype in plan.scratch]
