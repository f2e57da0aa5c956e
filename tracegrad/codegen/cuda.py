"""The CUDA language: the C renderer's walk over the kernel IR, as CUDA C kernels.

It shares the primitives' C expressions with the C language (``Primitive.cuda_template``
where a primitive overrides one) and the C walk's plan (coalesced axes, per-row phases,
the partials of reductions over the rows); it overrides the loops. A kernel takes one of
three forms, and ``Launch`` (what ``render`` returns beside the source) tells the launcher
how to run it:

- no reduction: a grid-stride loop, one thread an element;
- reductions over every element: the same loop, each thread accumulating in a register,
  then a block reduction (warp shuffles, then the warps through shared memory); each block
  writes its part;
- per-row reductions, or reductions over the rows that keep some axes: one block a row
  (grid-stride over the rows), the block's threads striding along the row, one loop a
  phase as in C, each per-row reduction a block reduction that every thread reads. A short
  row (32 elements or fewer, known) takes a group of 2-32 threads of a warp instead, its
  reductions shuffles within the group, where the kernel's reductions over the rows have
  few slots. Where a row's length is known and a thread takes at most ``REGISTER_ROWS`` of
  its elements, the loops are unrolled and a costly value a later loop needs is kept in
  registers (softmax's ``exp``, computed once).

Reductions over the rows (``Kernel.partials``) are computed in parts, one set a block (a
group, for short rows), in a buffer the launcher passes; ``<name>_combine`` folds the sets
in a fixed order into the results (a few slots: a block a slot, its threads taking every
``blockDim.x``-th set, then a block reduction; more: a block a tile of 32 slots, eight
lanes of sets, then the lanes in order), so a result does not depend on scheduling.
float32 sums accumulate in float64 (the ``Combiner``).
Indices are ``int`` where every size is known and under 2**31, else ``long long``; dynamic
sizes are ``const long long s0`` arguments after the arrays.
"""
import math

from tracegrad.symbolic import substitute

from .cstyle import Language, Unsupported, _C_KEYWORDS, _Writer, signature
from .kernel import Reduce

THREADS = 256           # threads a block (a row's block: fewer for a short row, 32 at least)
MAX_BLOCKS = 1024       # blocks a launch at most (grid-stride loops cover the rest): about
                        # what an H100's 132 SMs hold resident at 256 threads a block
INT_INDEX_LIMIT = 2 ** 31 - 2 ** 20     # elements a flat loop indexes with ``int``: the index
                                        # plus a grid's stride stays under 2**31
COMBINE_BY_BLOCK = 32   # result slots at most that the combine kernel gives a block each: a
                        # loss's one slot folded 1024 parts in turn, 60 us on an H200
WARP = 32
REGISTER_ROWS = 8       # a thread's elements of a row at most that a kernel keeps in registers
                        # from one loop to a later one (softmax's exp, computed once)

# names the CUDA loops use beside C's (a combine kernel's ``b``, ``total`` and ``blocks``
# never meet a user's name: it reads only arrays, named ``<name>_`` and ``<name>_parts``)
_CUDA_KEYWORDS = _C_KEYWORDS | frozenset("""e threadIdx blockIdx blockDim gridDim warpSize
isfinite t o0 live""".split())


class CUDA(Language):
    """The GPU target: the primitives' C expressions, rendered by the C walk as CUDA C."""
    sized = True            # a dynamic shape's sizes are arguments (``const long long s0``)
    row_buffers = False
    keywords = _CUDA_KEYWORDS

    def template(self, prim):
        return prim.cuda_template

    def render_kernel(self, kernel, site_comment=None):
        """Source of ``kernel``'s CUDA kernel(s) (raises ``Unsupported``)."""
        return self.render(kernel, site_comment)[0]

    def render(self, kernel, site_comment=None):
        """``(source, Launch)`` of ``kernel``: its ``__global__`` function, and
        ``<name>_combine`` when it has partials."""
        w = _CudaWriter(self, kernel, site_comment or (lambda s: None))
        return w.render(), w.launch


class Launch:
    """How the launcher runs one rendered kernel (the contract between ``render`` and
    ``cuda_launch.CudaKernel``).

    The kernel's arguments, in order: the inputs, the outputs, one parts buffer a partial
    (``partials``), then the size symbols as ``long long`` (``symbols``). It runs on
    ``grid(sizes)`` blocks of ``block(sizes)`` threads, a multiple of 32 (``sizes``: symbol
    -> int, ``{}`` for a static shape); its shared memory is static (no dynamic shared
    memory). ``kind`` is "elements" (``work`` elements, one thread each, grid-stride) or
    "rows" (``work`` rows of ``row`` elements, one block a row, grid-stride; with ``group``,
    a short row's group of threads a row, ``rows_per_block`` rows a block).

    ``partials``: per reduction over the rows, ``(count, acc dtype)``: the kernel writes
    ``count`` accumulators a part set, ``part_sets(sizes) * count`` in all, into a buffer of
    the acc dtype.
    Then ``combine`` (a kernel name) runs on ``combine_grid(sizes)`` blocks of ``THREADS``
    with the arguments: the parts buffers, the result arrays (the partials' shapes and
    dtypes), the number of part sets the first launch wrote (``part_sets``: one a block, or
    one a group of a short row), and the size symbols.
    """

    def __init__(self, name, kind, work, row, partials, symbols, combine, group=None):
        self.name, self.kind, self.work, self.row = name, kind, work, row
        self.partials, self.symbols, self.combine = tuple(partials), tuple(symbols), combine
        self.group = group

    @property
    def rows_per_block(self):
        """Rows a block runs at once: ``THREADS // group`` for short rows, else one."""
        return THREADS // self.group if self.group else 1

    def block(self, sizes):
        if self.kind == "rows" and not self.group:
            return row_threads(int(substitute(self.row, sizes)))
        return THREADS

    def grid(self, sizes):
        work = int(substitute(self.work, sizes))
        if self.kind == "rows":
            return max(1, min(-(-work // self.rows_per_block), MAX_BLOCKS))
        return max(1, min(-(-work // THREADS), MAX_BLOCKS))

    def part_sets(self, sizes):
        """How many sets of parts the kernel writes (the combine's ``blocks``): one a block,
        or one a row's group of threads."""
        return self.grid(sizes) * (self.rows_per_block if self.kind == "rows" else 1)

    @property
    def combine_by_block(self):
        """The combine kernel's layout (``render_combine``): a block a result slot, where
        every partial has at most ``COMBINE_BY_BLOCK`` slots of a known count."""
        return all(isinstance(n, int) and n <= COMBINE_BY_BLOCK for n, _ in self.partials)

    def counts(self, sizes):
        return [int(substitute(count, sizes)) for count, _ in self.partials]

    def combine_grid(self, sizes):
        slots = max(self.counts(sizes), default=1)
        if self.combine_by_block:
            return max(1, min(slots, MAX_BLOCKS))
        return max(1, min(-(-slots // WARP), MAX_BLOCKS))

    def __repr__(self):
        group = f" group={self.group}" if self.group else ""
        return (f"Launch({self.name}: {self.kind} work={self.work} row={self.row}{group} "
                f"partials={[str(c) for c, _ in self.partials]} combine={self.combine})")


def row_threads(n):
    """The threads of the block that runs a row of ``n`` elements: a multiple of 32, at
    least one warp, at most ``THREADS``."""
    return min(THREADS, max(WARP, -(-n // WARP) * WARP))


def row_group(n):
    """The threads a row of ``n`` (a static length) takes where a warp runs several rows
    (``n`` <= 32): the power of two at or above ``n``; None for longer rows, a block each."""
    if type(n) is not int or n > WARP:
        return None
    g = 1
    while g < n:
        g *= 2
    return g


class _CudaWriter(_Writer):
    """The walk for CUDA. An elementwise kernel::

        extern "C" __global__ void forward_fused0(const float *__restrict__ x_, ...) {
          for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < 12;
               e += gridDim.x * blockDim.x) {
            const int o = e / 3, j = e % 3;
            const float x = x_[o * 3 + j];
            ...

    A softmax over rows of 300, one block of 256 threads a row, two elements a thread::

        for (long long o = blockIdx.x; o < 4; o += gridDim.x) {
          const long long n = 300;
          float e_row[2];  // this thread's elements, in registers
          float m_acc = (-(float)INFINITY);
          #pragma unroll
          for (int i = 0; i < 2; i++) {
            const long long j = threadIdx.x + i * 256;
            if (j >= n) break;
            const float x = x_[o * 300 + j];
            m_acc = (m_acc > x || isnan(m_acc) ? m_acc : x);
          }
          const float m = (float)tg_block_maximum_float(m_acc, tg_red_float);
          ...         (the sum's loop keeps e = exp(x - m) in e_row[i]; the division's reads it)

    Rows of 10, a group of 16 threads a row (``t``, a thread's place in it), two rows a warp::

        for (long long o0 = blockIdx.x * 16 + threadIdx.x / 32 * 2; o0 < 6; ...) {
          const bool live = o0 + threadIdx.x % 32 / 16 < 6;
          ...
          const float m = (float)tg_group_maximum_float(m_acc, 16);
    """

    def render(self):
        self.plan()
        k, lang = self.k, self.lang
        self.reduced = set()        # (combiner ufunc, acc ctype) of the block reductions used
        ops = {op.name: op for op in k.body}
        params = [f"const {lang.ctype(i.dtype)} *__restrict__ {self.c(i.name)}_"
                  for i in k.inputs]
        params += [f"{lang.ctype(op.dtype)} *__restrict__ {self.c(op.name)}_"
                   for op in k.outputs]
        params += [f"{lang.ctype(p.acc_dtype)} *__restrict__ {self.c(p.name)}_parts"
                   for p in k.partials]
        params += [f"const long long {s}" for s in self.symbols]
        # reductions whose every element goes to one slot: a register a thread
        self.whole = {p.name for p in k.partials if not any(self.maps[p.name])}
        flat = not self.rowwise and len(self.whole) == len(k.partials)
        last = len(self.shape) - 1
        domain = ",".join(map(str, k.domain))
        self.group = self.threads = self.registers = None
        if flat:
            work, row, kind = math.prod(self.shape), None, "elements"
            how = "one thread an element"
        else:
            work, row, kind = math.prod(self.shape[:last]), self.shape[last], "rows"
            # short rows: a group of a warp a row, where each reduction over the rows has few
            # slots (a part set a group: many sets, which a block a slot combines well)
            if all(type(c) is int and c <= COMBINE_BY_BLOCK
                   for c in map(self.part_size, k.partials)):
                self.group = row_group(row)
            how = f"{self.group} threads a row" if self.group else "one block a row"
            if type(row) is int:    # a static row: its threads known, its values in registers
                self.threads = self.group or row_threads(row)
                if -(-row // self.threads) <= REGISTER_ROWS:
                    self.registers = -(-row // self.threads)
        self.plan_loops()
        combine = f"{k.name}_combine" if k.partials else None
        self.launch = Launch(k.name, kind, work, row,
                             [(self.part_size(p), p.acc_dtype.np) for p in k.partials],
                             self.symbols, combine, self.group)
        self.emit(f"// {k.label}: {k.op_names()}; one pass over [{domain}], {how}")
        self.open(signature(f'extern "C" __global__ void {k.name}', params))
        shared_at = len(self.lines)
        if flat:
            self.flat_loop(ops)
        else:
            self.row_loop(ops)
        self.close()
        self.lines[shared_at:shared_at] = [
            f"  __shared__ {t} tg_red_{t}[{WARP + 1}];  // a block reduction's warps, then its "
            f"result" for t in sorted({t for _, t in self.reduced})]
        if k.partials:
            self.emit("")
            self.render_combine()
        return "\n".join(self.lines)

    # the two loops -------------------------------------------------------------------------
    def flat_loop(self, ops):
        """One thread an element; reductions over every element in a register a thread."""
        lang = self.lang
        reds, writes, need = self.loops.get(0, ((), (), []))
        for r in reds:
            self.emit(f"{lang.ctype(r.acc_dtype)} {self.c(r.name)}_acc = {self.identity(r)};")
        shape = self.shape
        if self.int_index():
            idx, step = "int", "gridDim.x * blockDim.x"
            first = "blockIdx.x * blockDim.x + threadIdx.x"
        else:
            idx, step = "long long", "gridDim.x * (long long)blockDim.x"
            first = "blockIdx.x * (long long)blockDim.x + threadIdx.x"
        if len(shape) == 1:     # one axis: the element is the index
            self.open(f"for ({idx} j = {first}; j < {shape[0]}; j += {step})")
            self.base = {name: "0" for name in self.maps}
        else:
            self.open(f"for ({idx} e = {first}; e < {math.prod(shape)}; e += {step})")
            self.emit(f"const {idx} o = e / {shape[-1]}, j = e % {shape[-1]};")
            self.base = self.row_bases("o")
        self.stride = {name: s[-1] for name, s in self.maps.items()}
        self.points(need, ops)
        for w in writes:
            self.emit(f"{self.c(w.name)}_[{self.index(w.name)}] = {self.c(w.name)};")
        for r in reds:
            acc = f"{self.c(r.name)}_acc"
            self.emit(f"{acc} = {self.combine_expr(r, acc, self.cast(r.args[0], r.acc_dtype))};")
        self.close()
        for r in reds:
            acc = f"{self.c(r.name)}_acc"
            self.emit(f"{acc} = {self.block_reduce(r, acc)};")
            self.emit(f"if (threadIdx.x == 0) {self.c(r.name)}_parts[blockIdx.x] = {acc};")

    def int_index(self):
        """Whether the flat loop's indices are ``int``: static sizes, every array and the
        domain under ``INT_INDEX_LIMIT`` elements (32-bit index arithmetic: on an H200, W1's
        kernels ran 9-10% faster so than with ``long long``)."""
        if self.symbols:
            return False
        k = self.k
        sizes = [math.prod(self.shape)] + [math.prod(i.value.shape) for i in k.inputs] + [
            math.prod(op.shape) for op in k.outputs]
        return all(isinstance(n, int) for n in sizes) and max(sizes) < INT_INDEX_LIMIT

    def keeps_rows(self):
        return self.registers is not None

    @property
    def row_slot(self):
        return "i"      # a kept value's register: the loop's step, unrolled

    def row_loop(self, ops):
        """One block a row (or, for short rows, a group of ``self.group`` threads of a warp a
        row): a loop a phase, the row's threads striding along it."""
        k, lang, g = self.k, self.lang, self.group
        rows, last = math.prod(self.shape[:-1]), len(self.shape) - 1
        if g:
            per_block = THREADS // g
            self.emit(f"const int t = threadIdx.x % {g};  // this thread's place in its row")
            me, team, first = "t", str(g), f"blockIdx.x * {per_block} + threadIdx.x / {g}"
            self.row_store = "if (live && t == 0) "
        else:
            me, team, first = "threadIdx.x", "blockDim.x", "blockIdx.x"
            self.row_store = "if (threadIdx.x == 0) "
        self.me, self.team = me, team
        for p in k.partials:        # this block's (group's) part, set to the identity first
            n, count = self.c(p.name), self.part_size(p)
            self.emit(f"{lang.ctype(p.acc_dtype)} *{n}_part = {n}_parts + "
                      f"({first}) * (long long){count};")
            self.emit(f"for (long long i = {me}; i < {count}; i += {team}) "
                      f"{n}_part[i] = {self.identity(p)};")
        # a reduction of point values over every element: a register a thread, all rows long
        self.kept_acc = [p for p in k.partials if p.name in self.whole
                         and self.level[p.args[0]] == "point"]
        for p in self.kept_acc:
            self.emit(f"{lang.ctype(p.acc_dtype)} {self.c(p.name)}_acc = {self.identity(p)};")
        if k.partials:
            self.emit("__syncthreads();")
        if g:
            # a warp's groups step through the rows together (their shuffles need every
            # lane); a group past the last row reads that row and writes nothing
            warp_rows = WARP // g
            self.open(f"for (long long o0 = blockIdx.x * {per_block} + threadIdx.x / {WARP} * "
                      f"{warp_rows}; o0 < {rows}; o0 += gridDim.x * (long long){per_block})")
            self.emit(f"const bool live = o0 + threadIdx.x % {WARP} / {g} < {rows};")
            self.emit(f"const long long o = live ? o0 + threadIdx.x % {WARP} / {g} : {rows - 1};")
            self.emit(f"const long long n = live ? {self.shape[last]} : 0;")
        else:
            self.open(f"for (long long o = blockIdx.x; o < {rows}; o += gridDim.x)")
            self.emit(f"const long long n = {self.shape[last]};")
        for v in self.stored:       # kept from one loop to a later one
            self.emit(f"{lang.ctype(ops[v].dtype)} {self.c(v)}_row[{self.registers}];  "
                      f"// this thread's elements, in registers")
        self.base = self.row_bases("o")
        self.stride = {name: s[-1] for name, s in self.maps.items()}
        self.done = set()
        for q in range(self.phases + 1):
            self.row_values(ops, q)
            self.inner_loop(ops, q)
        self.row_values(ops, self.phases + 1)
        self.close()
        for p in self.kept_acc:
            acc, slot = f"{self.c(p.name)}_acc", f"{self.c(p.name)}_part[0]"
            self.emit(f"{acc} = {self.row_reduce(p, acc)};")
            self.emit(f"if ({me} == 0) {slot} = {self.combine_expr(p, slot, acc)};")

    def inner_loop(self, ops, q):
        """Loop ``q`` along the row: its threads accumulate the reductions of phase ``q``
        and write the outputs computed in it; each per-row reduction then is a block's (a
        group's)."""
        k, lang = self.k, self.lang
        if q not in self.loops:
            return
        reds, writes, need = self.loops[q]
        for name in need:       # per-row inputs the loop reads: once a row, before it
            if self.read_back.get(name, q) != q:
                continue
            for a in ops[name].operands() if name in ops else ():
                if self.level[a] == "row":
                    self.arg(a)
        # a register a thread for the row: per-row reductions, and reductions over the rows
        # into one slot a row; the rest go to their slots of the block's part (the slot of
        # point j is only ever that of the row's thread j % (its threads))
        row_acc = [r for r in reds if not r.spans
                   or self.stride[r.name] == 0 and r not in self.kept_acc]
        for r in row_acc:
            self.emit(f"{lang.ctype(r.acc_dtype)} {self.c(r.name)}_acc = {self.identity(r)};")
        if self.registers:      # a static count of steps, unrolled: kept values in registers
            self.emit("#pragma unroll")
            self.open(f"for (int i = 0; i < {self.registers}; i++)")
            self.emit(f"const long long j = {self.me} + i * {self.threads};")
            self.emit("if (j >= n) break;")
        else:
            self.open(f"for (long long j = {self.me}; j < n; j += {self.team})")
        self.points(need, ops, q)
        for w in writes:
            self.emit(f"{self.c(w.name)}_[{self.index(w.name)}] = {self.c(w.name)};")
        for r in reds:
            src = self.cast(r.args[0], r.acc_dtype)
            if r in row_acc or r in self.kept_acc:
                acc = f"{self.c(r.name)}_acc"
                self.emit(f"{acc} = {self.combine_expr(r, acc, src)};")
            else:
                slot = f"{self.c(r.name)}_part[{self.index(r.name)}]"
                self.emit(f"{slot} = {self.combine_expr(r, slot, src)};")
        self.close()
        for r in row_acc:
            acc, t = f"{self.c(r.name)}_acc", lang.ctype(r.dtype)
            if r.spans:
                slot = f"{self.c(r.name)}_part[{self.base[r.name]}]"
                self.emit(f"{acc} = {self.row_reduce(r, acc)};")
                self.emit(f"{self.row_store}{slot} = {self.combine_expr(r, slot, acc)};")
                continue
            self.emit(f"const {t} {self.c(r.name)} = ({t}){self.row_reduce(r, acc)};")
            self.done.add(r.name)
            if r in k.outputs:
                self.emit(f"{self.row_store}"
                          f"{self.c(r.name)}_[{self.base[r.name]}] = {self.c(r.name)};")

    # reductions ------------------------------------------------------------------------------
    def identity(self, r):
        return self.lang.literal(r.combiner.identity(r.dtype), r.acc_dtype)

    def block_reduce(self, r, acc):
        """The block's reduction of every thread's ``acc``, which each thread gets."""
        t = self.lang.ctype(r.acc_dtype)
        self.reduced.add((r.combiner.ufunc, t))
        return f"tg_block_{r.combiner.ufunc}_{t}({acc}, tg_red_{t})"

    def row_reduce(self, r, acc):
        """The reduction of ``acc`` over a row's threads: its block's, or its group's."""
        if not self.group:
            return self.block_reduce(r, acc)
        return f"tg_group_{r.combiner.ufunc}_{self.lang.ctype(r.acc_dtype)}({acc}, {self.group})"

    def render_combine(self):
        """``<name>_combine``: at most ``COMBINE_BY_BLOCK`` slots (known sizes), a block a
        slot, each thread folding every ``blockDim.x``-th part set in order, then the block
        reduction; more slots, a block a tile of 32 slots (a warp's, read coalesced), each of
        its ``THREADS / 32`` lanes folding every so many part sets in order, then the lanes
        folded in lane order. A fixed order either way, so results repeat bit for bit. (A
        thread a slot folding every set in turn, one load after another: on an H200 a ResNet
        batch norm kernel with five reductions of 512 slots over 4096 sets took 1.7 ms.)"""
        k, lang = self.k, self.lang
        params = [f"const {lang.ctype(p.acc_dtype)} *__restrict__ {self.c(p.name)}_parts"
                  for p in k.partials]
        params += [f"{lang.ctype(p.dtype)} *__restrict__ {self.c(p.name)}_" for p in k.partials]
        params += ["const long long blocks"] + [f"const long long {s}" for s in self.symbols]
        by_block = self.launch.combine_by_block
        lanes = THREADS // WARP
        self.emit(f"// {k.label}'s reductions over the rows: the blocks' parts, combined in "
                  + ("a fixed order, a block a slot" if by_block else
                     f"a fixed order, a block a tile of {WARP} slots"))
        self.open(signature(f'extern "C" __global__ void {k.name}_combine', params))
        for t in sorted({lang.ctype(p.acc_dtype) for p in k.partials}):
            if by_block:
                self.emit(f"__shared__ {t} tg_red_{t}[{WARP + 1}];  // the block reduction's")
            else:
                self.emit(f"__shared__ {t} tg_lanes_{t}[{lanes}][{WARP}];  // each lane's "
                          f"fold of the tile")
        for p in k.partials:
            n, count, t = self.c(p.name), self.part_size(p), lang.ctype(p.acc_dtype)
            part = f"{n}_parts[b * {count} + i]"
            if by_block:
                self.open(f"for (long long i = blockIdx.x; i < {count}; i += gridDim.x)")
                self.emit(f"{t} total = {self.identity(p)};")
                self.emit(f"for (long long b = threadIdx.x; b < blocks; b += blockDim.x) "
                          f"total = {self.combine_expr(p, 'total', part)};")
                self.emit(f"total = {self.block_reduce(p, 'total')};")
                self.emit(f"if (threadIdx.x == 0) {n}_[i] = ({lang.ctype(p.dtype)})total;")
                self.close()
                continue
            self.open(f"for (long long tile = blockIdx.x * {WARP}LL; tile < {count}; "
                      f"tile += gridDim.x * {WARP}LL)")
            self.emit(f"const long long i = tile + threadIdx.x % {WARP};")
            self.emit(f"{t} total = {self.identity(p)};")
            self.emit(f"if (i < {count}) for (long long b = threadIdx.x / {WARP}; b < blocks; "
                      f"b += {lanes}) total = {self.combine_expr(p, 'total', part)};")
            self.emit(f"tg_lanes_{t}[threadIdx.x / {WARP}][threadIdx.x % {WARP}] = total;")
            self.emit("__syncthreads();")
            self.open(f"if (threadIdx.x < {WARP} && i < {count})")
            self.emit(f"total = tg_lanes_{t}[0][threadIdx.x];")
            self.emit(f"for (int lane = 1; lane < {lanes}; lane++) total = "
                      f"{self.combine_expr(p, 'total', f'tg_lanes_{t}[lane][threadIdx.x]')};")
            self.emit(f"{n}_[i] = ({lang.ctype(p.dtype)})total;")
            self.close()
            self.emit("__syncthreads();")
            self.close()
        self.close()

    def part_size(self, p):
        shape = p.value.shape
        return math.prod(shape) if shape else 1


def declarations(kernels, lang=None):
    """The preamble one module's kernels share: infinity and NaN where NVRTC's built-ins
    leave them undefined, and the block reductions the kernels use, one a combiner and
    accumulator type (a warp's lanes by ``__shfl_down_sync``, then warp 0 over the warps'
    results; every thread gets the block's result)::

        __device__ double tg_block_add_double(double v, double *red) {
          const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
          for (int d = 16; d > 0; d /= 2) {
            const double x = __shfl_down_sync(0xffffffffu, v, d);
            v = v + x;
          }
          ...
    """
    lang = lang or CUDA()
    used = {}
    for k in kernels:
        for op in k.body:
            if isinstance(op, Reduce) and op.acc_dtype in lang.types:
                used.setdefault((op.combiner.ufunc, lang.ctype(op.acc_dtype)), op)
    lines = ["#ifndef INFINITY", "#define INFINITY __int_as_float(0x7f800000)", "#endif",
             "#ifndef NAN", "#define NAN __int_as_float(0x7fffffff)", "#endif", ""]
    for (ufunc, t), op in sorted(used.items()):
        ident = lang.literal(op.combiner.identity(op.dtype), op.acc_dtype)
        step = op.combiner.c.format(acc="v", x="x")
        lines += [
            f"// the block's {ufunc} of every thread's v, which every thread gets",
            f"__device__ {t} tg_block_{ufunc}_{t}({t} v, {t} *red) {{",
            f"  const int lane = threadIdx.x % {WARP}, warp = threadIdx.x / {WARP};",
            f"  for (int d = {WARP // 2}; d > 0; d /= 2) {{",
            f"    const {t} x = __shfl_down_sync(0xffffffffu, v, d);",
            f"    v = {step};",
            "  }",
            "  if (lane == 0) red[warp] = v;",
            "  __syncthreads();",
            "  if (warp == 0) {",
            f"    v = lane < blockDim.x / {WARP} ? red[lane] : {ident};",
            f"    for (int d = {WARP // 2}; d > 0; d /= 2) {{",
            f"      const {t} x = __shfl_down_sync(0xffffffffu, v, d);",
            f"      v = {step};",
            "    }",
            f"    if (lane == 0) red[{WARP}] = v;",
            "  }",
            "  __syncthreads();",
            f"  return red[{WARP}];",
            "}", "",
            f"// the {ufunc} of v over a group of `width` lanes (a power of two, aligned in its "
            "warp), which every lane of it gets",
            f"__device__ {t} tg_group_{ufunc}_{t}({t} v, int width) {{",
            "  for (int d = width / 2; d > 0; d /= 2) {",
            f"    const {t} x = __shfl_down_sync(0xffffffffu, v, d, width);",
            f"    v = {step};",
            "  }",
            "  return __shfl_sync(0xffffffffu, v, 0, width);",
            "}", ""]
    return "\n".join(lines)


__all__ = ["CUDA", "Launch", "Unsupported", "declarations", "THREADS", "MAX_BLOCKS"]
