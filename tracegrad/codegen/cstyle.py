"""C-like renderers of the kernel IR: one ``Language`` object per target.

A language holds the ``code_for_op`` table (each elementwise primitive's one C
expression, ``Primitive.c_template``, shared by C and CUDA) and ``render_kernel``,
one walk over a kernel's op list (``cuda.py`` holds the CUDA language, which
overrides only its loop). The C renderer writes one function per kernel::

    // fused0: mul add mul mul mul mul add mul tanh add mul sum
    void forward_fused0(const float *restrict x_, const float *restrict a_,
                        const float *restrict b_, float *restrict out_, int nt) {
      double *out_parts = ...;           // one partial sum per thread
      #pragma omp parallel num_threads(nt)
      {
        double *out_part = out_parts + omp_get_thread_num();
        #pragma omp for schedule(static)
        for (int64_t o = 0; o < 245; o++) {
          ...
          #pragma omp simd reduction(+:out_acc)
          for (int64_t j = 0; j < n; j++) {
            float x = x_[i0 + j];
            // w1.py:5: y = gelu_tanh(x*a + b)
            float c = x * a;
            ...
            out_acc = out_acc + y;
          }
          *out_part = *out_part + out_acc;
        }
      }
      ... the parts combine in thread order; out_[0] = (float)sum;
    }

Loops: the domain's axes are coalesced where every array's index map allows; the
outer loop runs over all axes but the last (or over blocks of a single axis) on
OpenMP threads, and the inner loop, contiguous, is ``omp simd``. A per-row reduction
(softmax's max and sum, layer norm's mean and variance) reduces the last axes: the
outer loop runs per row through *phases*, one inner loop a phase, each computing
what the next needs. Reductions over the rows accumulate per thread and combine in
thread order, so a result does not depend on scheduling. float32 sums accumulate in
float64 (the primitive's ``Combiner``). The C tier takes float32, float64 and bool;
a kernel with another dtype, or an op without a C form, raises ``Unsupported`` and
stays on the NumPy tier.

Here are the C language and the walk that writes a kernel (``_Writer``); the language objects
and the prelude (``declarations``) are ``c_language.py``'s, the loop plan ``c_plan.py``'s.
"""
import math

from tracegrad import dtypes
from tracegrad.symbolic import symbols_in

from .c_language import _C_KEYWORDS, Language, Unsupported, _int_literal, declarations, signature
from .c_plan import Planning
from .kernel import Literal, Reduce

# Elements of a kernel's domain from which its outer loop runs on several threads, from
# benchmarks/threads.py (W1's forward kernel, 2 cores, load 0.8; ms, 1 thread / 2 threads):
#   2**14 0.013/0.020   2**16 0.033/0.041   2**18 0.114/0.120   2**19 0.220/0.149
#   2**20 0.431/0.283   2**22 1.93/1.00
# Waking the sleeping second thread costs 10-15 us (OMP_WAIT_POLICY=passive, see tiers),
# so two threads win from 2**19 elements on.
PARALLEL_MIN = 1 << 19
BLOCK = 4096            # elements per outer iteration when the domain has one axis


class C(Language):
    """The CPU tier: a C11 function with OpenMP threads and ``omp simd`` inner loops."""
    sized = True        # a dynamic shape's sizes are arguments (``const int64_t s0``)

    def array_type(self, dtype):
        # a bool array is read and written as bytes (NumPy's bool is one byte, 0 or 1): gcc 12
        # vectorizes no loop that loads or stores ``_Bool`` next to floats (a relu's mask
        # made or used: 10x slower than NumPy), and does with ``uint8_t``
        return "uint8_t" if dtype is dtypes.bool else self.ctype(dtype)

    def render_kernel(self, kernel, site_comment=None):
        """Source of one C function for ``kernel`` (raises ``Unsupported``)."""
        return _Writer(self, kernel, site_comment or (lambda s: None)).render()


# the walk -----------------------------------------------------------------------------------

class _Writer(Planning):
    def __init__(self, lang, kernel, site_comment):
        self.lang, self.k, self.site_comment = lang, kernel, site_comment
        self.lines, self.depth = [], 0
        self.names = {}

    # names ----------------------------------------------------------------------------------
    def c(self, name):
        """The C identifier of an SSA name (the user's, unless C or the loops use it)."""
        if name not in self.names:
            keywords = self.lang.keywords
            base = name if name not in keywords and not name.startswith("__") else name + "_"
            while base in self.names.values():
                base += "_"
            self.names[name] = base
        return self.names[name]

    def emit(self, line=""):
        self.lines.append("  " * self.depth + line if line else "")

    def open(self, line):
        self.emit(f"{line} {{" if line else "{")
        self.depth += 1

    def close(self, tail=""):
        self.depth -= 1
        self.emit("}" + tail)

    # rendering ------------------------------------------------------------------------------
    def render(self):
        self.plan()
        self.plan_loops()
        k, lang = self.k, self.lang
        ops = {op.name: op for op in k.body}
        params = [f"const {lang.array_type(i.dtype)} *restrict {self.c(i.name)}_"
                  for i in k.inputs]
        params += [f"{lang.array_type(op.dtype)} *restrict {self.c(op.name)}_"
                   for op in k.outputs + k.partials]
        size = math.prod(k.domain or (1,))
        self.emit(f"// {k.label}: {k.op_names()}; one pass over "
                  f"[{','.join(map(str, k.domain))}]")
        params += [f"const int64_t {s}" for s in self.symbols]
        self.open(signature(f"void {k.name}", params + ["int nt"]))
        for p in k.partials:        # one accumulator set per thread, combined in order
            n, acc = self.c(p.name), lang.ctype(p.acc_dtype)
            count = self.part_size(p)
            self.emit(f"{acc} *{n}_parts = malloc(sizeof({acc}) * {count} * (size_t)nt);")
            self.emit(f"for (int64_t i = 0; i < {count} * (int64_t)nt; i++) "
                      f"{n}_parts[i] = {lang.literal(p.combiner.identity(p.dtype), p.acc_dtype)};")
        self.parallel = size >= PARALLEL_MIN or bool(self.symbols)
        if self.symbols:        # the size is known at the call: threads when it is large
            self.emit(f"#pragma omp parallel num_threads(nt) if({size} >= {PARALLEL_MIN})")
            self.open("")
        elif self.parallel:
            self.emit("#pragma omp parallel num_threads(nt)")
            self.open("")
        else:
            self.open(f"{{  // one thread: {size} elements, fewer than {PARALLEL_MIN}")
            self.lines[-1] = self.lines[-1][:-2]        # the comment carries the brace
        for p in k.partials:
            n = self.c(p.name)
            self.emit(f"{lang.ctype(p.acc_dtype)} *{n}_part = {n}_parts + "
                      f"{self.part_size(p)} * (int64_t)omp_get_thread_num();")
        for v in self.stored:       # a row's worth, kept from one loop to a later one
            t = lang.ctype(ops[v].dtype)
            self.emit(f"{t} *{self.c(v)}_row = malloc(sizeof({t}) * {self.shape[-1]});")
        self.outer_loop(ops)
        for v in self.stored:
            self.emit(f"free({self.c(v)}_row);")
        self.close()
        for p in k.partials:
            self.combine(p)
        self.close()
        return "\n".join(self.lines)

    @staticmethod
    def symbols_all(domain):
        """The monomials' atoms of each symbolic size in ``domain``."""
        return [m for n in domain if type(n) is not int for m, _ in n.poly.terms]

    def part_size(self, p):
        return max(1, math.prod(p.shape))

    def outer_loop(self, ops):
        shape, last = self.shape, len(self.shape) - 1
        blocks = len(shape) == 1 and not self.rowwise
        outer = (-(-shape[0] // BLOCK) if not symbols_in(shape[0])
                 else f"({shape[0]} + {BLOCK - 1}) / {BLOCK}") if blocks \
            else math.prod(shape[:last])
        if self.parallel:
            self.emit("#pragma omp for schedule(static)")
        self.open(f"for (int64_t o = 0; o < {outer}; o++)")
        # the offset of each array's row: the outer index split into the outer axes
        if blocks:
            self.emit(f"int64_t n = {shape[0]} - o * {BLOCK} < {BLOCK} ? "
                      f"{shape[0]} - o * {BLOCK} : {BLOCK};")
            self.base = {name: f"o * {BLOCK * s[0]}" if s[0] else "0"
                         for name, s in self.maps.items()}
        else:
            self.emit(f"const int64_t n = {shape[last]};")
            self.base = self.row_bases("o")
        self.stride = {name: s[-1] for name, s in self.maps.items()}
        self.done = set()       # per-row values computed so far in this outer iteration
        for q in range(self.phases + 1):
            self.row_values(ops, q)
            self.inner_loop(ops, q)
        self.row_values(ops, self.phases + 1)
        self.close()

    def row_bases(self, o):
        """Each array's offset of row ``o`` (the outer index split into the outer axes)."""
        shape, last = self.shape, len(self.shape) - 1
        idx, rest = [], o
        for a in range(last - 1, -1, -1):
            idx.append((a, f"({rest} % {shape[a]})" if a else rest))
            rest = f"({rest} / {shape[a]})"
        bases = {}
        for name, s in self.maps.items():
            terms = [f"{i} * {s[a]}" for a, i in idx if s[a]]
            bases[name] = " + ".join(terms) or "0"
        for i in self.k.inputs:     # a column slice read in its matrix: where its columns start
            if i.offset:
                bases[i.name] = f"{bases[i.name]} + {i.offset}" if bases[i.name] != "0" \
                    else str(i.offset)
        return bases

    def row_values(self, ops, q):
        """Per-row values whose inputs are there before loop ``q``, computed once a row."""
        for op in self.k.body:
            if self.level[op.name] != "row" or op.name in self.done or self.phase[op.name] > q:
                continue
            if isinstance(op, Reduce):
                continue            # finished by the loop that accumulates it
            self.value(op)
            self.done.add(op.name)
            if op in self.k.outputs:
                self.emit(f"{self.row_store}{self.c(op.name)}_[{self.base[op.name]}] = "
                          f"{self.c(op.name)};")
            for p in self.k.partials:
                if p.args[0] == op.name:
                    self.accumulate_into_part(p, self.c(op.name), store=self.row_store)

    def inner_loop(self, ops, q):
        """Loop ``q`` over the inner axis: accumulates the reductions of phase ``q`` and
        writes the outputs computed in it, computing each point value it needs."""
        k, lang = self.k, self.lang
        if q not in self.loops:
            return
        reds, writes, need = self.loops[q]
        for name in need:       # per-row inputs the loop reads: once a row, before it
            if name in self.stored and self.stored[name] != q \
                    or self.read_back.get(name, q) != q:
                continue
            for a in ops[name].operands() if name in ops else ():
                if self.level[a] == "row":
                    self.arg(a)
        scalar = [r for r in reds if not r.spans or self.stride[r.name] == 0]
        for r in scalar:
            self.emit(f"{lang.ctype(r.acc_dtype)} {self.c(r.name)}_acc = "
                      f"{lang.literal(r.combiner.identity(r.dtype), r.acc_dtype)};")
        clauses = "".join(f" reduction({self.reduction_op(r)}:{self.c(r.name)}_acc)"
                          for r in scalar)
        arrays = [i.dtype for i in k.inputs] + [op.dtype for op in k.outputs]
        if dtypes.bool in arrays and any(r.acc_dtype is dtypes.float64 for r in reds):
            # a byte mask beside a double sum (``where`` then ``sum``): gcc 12 vectorizes
            # the loop only when told how many elements a step takes (12x faster)
            clauses = " simdlen(8)" + clauses
        self.emit(f"#pragma omp simd{clauses}")
        self.open("for (int64_t j = 0; j < n; j++)")
        self.points(need, ops, q)
        for w in writes:
            self.emit(f"{self.c(w.name)}_[{self.index(w.name)}] = {self.c(w.name)};")
        for r in reds:
            src = self.cast(r.args[0], r.acc_dtype)
            if r in scalar:
                acc = self.c(r.name) + "_acc"
                self.emit(f"{acc} = {self.combine_expr(r, acc, src)};")
            else:       # each j its own slot of the thread's partial
                slot = f"{self.c(r.name)}_part[{self.index(r.name)}]"
                self.emit(f"{slot} = {self.combine_expr(r, slot, src)};")
        self.close()
        for r in scalar:
            if r.spans:
                self.accumulate_into_part(r, f"{self.c(r.name)}_acc", raw=True)
            else:
                self.emit(f"const {lang.ctype(r.dtype)} {self.c(r.name)} = "
                          f"({lang.ctype(r.dtype)}){self.c(r.name)}_acc;")
                self.done.add(r.name)
                if r in k.outputs:
                    self.emit(f"{self.c(r.name)}_[{self.base[r.name]}] = {self.c(r.name)};")

    def points(self, need, ops, q=0):
        """The statements of loop ``q`` computing ``need`` at point ``j``: inputs read,
        values kept by an earlier loop read back, the rest computed (and kept, when a later
        loop reads them), with the user's line above each line's first statement."""
        prev, lang = None, self.lang
        for name in need:
            op = ops.get(name)
            if self.read_back.get(name, q) != q:    # an output an earlier loop wrote
                self.emit(f"const {lang.ctype(op.dtype)} {self.c(name)} = "
                          f"{self.c(name)}_[{self.index(name)}];")
                continue
            if name in self.stored and self.stored[name] != q:     # kept by an earlier loop
                self.emit(f"const {lang.ctype(op.dtype)} {self.c(name)} = "
                          f"{self.c(name)}_row[{self.row_slot}];")
                continue
            if op is None:      # an input read at this point
                self.emit(f"const {lang.ctype(self.input(name).dtype)} {self.c(name)} = "
                          f"{self.c(name)}_[{self.index(name)}];")
                continue
            comment = self.site_comment(op.site) if op.site and op.site != prev else None
            if comment:     # a trailing backslash would continue the comment onto the code
                self.emit("// " + comment.rstrip(" \\"))
            prev = op.site or prev
            self.value(op)
            if self.stored.get(name) == q:
                self.emit(f"{self.c(name)}_row[{self.row_slot}] = {self.c(name)};")

    def closure(self, names, ops, stop=()):
        """Point values (and inputs read per point) that ``names`` need, in body order;
        values in ``stop`` are read from their row buffers, not computed."""
        want, stack = set(), list(names)
        while stack:
            n = stack.pop()
            if n in want or self.level.get(n) == "row":
                continue
            want.add(n)
            if n in ops and n not in stop:
                stack.extend(ops[n].operands())
        order = [i.name for i in self.k.inputs] + [op.name for op in self.k.body]
        return [n for n in order if n in want]

    def value(self, op):
        ctype = self.lang.ctype(op.dtype)
        if op.name in self.single:      # one element: the identity combined with it
            x = self.cast(op.args[0], op.acc_dtype)
            start = self.lang.literal(op.combiner.identity(op.dtype), op.acc_dtype)
            self.emit(f"const {ctype} {self.c(op.name)} = "
                      f"({ctype}){self.combine_expr(op, start, x)};")
            return
        args = [self.arg(a) for a in op.args]
        self.emit(f"const {ctype} {self.c(op.name)} = {self.lang.code_for_op(op, args)};")

    def arg(self, a):
        if type(a) is Literal:
            return self.lang.literal(a.value, a.dtype)
        inp = self.input(a)
        if inp is not None and self.level[a] == "row" and a not in self.done:
            # a per-row input: read once a row, where first needed
            self.emit(f"const {self.lang.ctype(inp.dtype)} {self.c(a)} = "
                      f"{self.c(a)}_[{self.base[a]}];")
            self.done.add(a)
        return self.c(a)

    def input(self, name):
        return next((i for i in self.k.inputs if i.name == name), None)

    def index(self, name):
        s = self.stride[name]
        base = self.base[name]
        point = "j" if s == 1 else f"j * {s}" if s else ""
        return " + ".join(p for p in (base if base != "0" else "", point) if p) or "0"

    def cast(self, name, dtype):
        return self.cast_expr(self.c(name), dtype)

    def reduction_op(self, r):
        return {"add": "+", "multiply": "*"}.get(r.combiner.ufunc) or \
            f"tg_{r.combiner.ufunc}_{self.lang.ctype(r.acc_dtype)}"

    def combine_expr(self, r, acc, x):
        return r.combiner.c.format(acc=acc, x=x)

    # what a per-row value's store starts with: CUDA computes it in every thread of the
    # row's block, and one thread stores it
    row_store = ""
    row_slot = "j"      # where point j's kept value is in its row buffer (CUDA: a register's)

    def accumulate_into_part(self, p, value, raw=False, store=""):
        slot = f"{self.c(p.name)}_part[{self.base[p.name]}]"
        x = value if raw else self.cast_expr(value, p.acc_dtype)
        self.emit(f"{store}{slot} = {self.combine_expr(p, slot, x)};")

    def cast_expr(self, expr, dtype):
        return f"({self.lang.ctype(dtype)}){expr}"

    def combine(self, p):
        """After the threads: combine their parts in thread order into the result."""
        n, acc = self.c(p.name), self.lang.ctype(p.acc_dtype)
        count = self.part_size(p)
        self.open(f"for (int64_t i = 0; i < {count}; i++)")
        self.emit(f"{acc} total = {n}_parts[i];")
        self.emit(f"for (int t = 1; t < nt; t++) total = "
                  f"{self.combine_expr(p, 'total', f'{n}_parts[t * {count} + i]')};")
        self.emit(f"{n}_[i] = ({self.lang.ctype(p.dtype)})total;")
        self.close()
        self.emit(f"free({n}_parts);")


__all__ = ["C", "Language", "Unsupported", "declarations", "PARALLEL_MIN", "signature",
           "_C_KEYWORDS", "_int_literal"]
