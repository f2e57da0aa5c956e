"""The plan of a C-like kernel: which loops a kernel's ops run in, and which values are kept.

``plan`` checks the kernel can be rendered (dtypes, sizes), coalesces the domain's axes
(``_coalesce``) and splits them into the outer loop and the rows; ``plan_loops`` assigns each
op to an inner loop (a *phase* of a per-row reduction) and keeps a value another phase reads
when computing it again costs ``STORE_COST`` simple ops or more. ``cstyle._Writer`` takes these
from ``Planning``.
"""
import math

from tracegrad.symbolic import ATOMS

from .c_language import Unsupported
from .kernel import Reduce, kernel_symbols, strides

STORE_COST = 8              # a value costing this many simple ops is kept, not recomputed
EXPENSIVE = frozenset({"exp", "log", "log1p", "expm1", "tanh", "sigmoid", "erf", "sin", "cos",
                       "pow", "pow_scalar", "sqrt", "rsqrt"})


class Planning:
    """The planning steps of a kernel's writer; ``render`` runs them first."""

    def plan(self):
        k = self.k
        for op in k.body:
            if op.dtype not in self.lang.types or isinstance(op, Reduce) \
                    and op.acc_dtype not in self.lang.types:
                raise Unsupported(f"{op.op} in {op.dtype.name}")
        for i in k.inputs:
            self.lang.ctype(i.dtype)
        domain = k.domain or (1,)
        self.symbols = kernel_symbols(k)    # a dynamic shape: sizes are arguments
        if self.symbols and not getattr(self.lang, "sized", False):
            raise Unsupported("symbolic sizes")
        if any(a in ATOMS for s in self.symbols_all(domain) for a in s):
            raise Unsupported("a size with a floor division or remainder")
        if math.prod(domain) == 0:
            raise Unsupported("an empty domain")      # NumPy's errors for empty reductions
        rowwise = [op for op in k.body if isinstance(op, Reduce) and not op.spans]
        axes = {op.axes for op in rowwise}
        if len(axes) > 1:
            raise Unsupported("per-row reductions over different axes")
        inner = set(next(iter(axes))) if axes else set()
        if inner and sorted(inner) != list(range(min(inner), len(domain))):
            raise Unsupported("a per-row reduction that keeps a later axis")
        # a reduction over axes of size 1 combines one element: a point op
        self.single = {op.name for op in rowwise} if inner and \
            math.prod(domain[a] for a in inner) == 1 else set()
        if self.single:
            inner = set()
        # index maps over the domain: inputs, every op's value, the reductions' results
        maps = {i.name: strides(i.value.shape, domain) if i.source is None else i.strides
                for i in k.inputs}
        for op in k.body:
            maps[op.name] = strides(_kept(op, len(domain)) if isinstance(op, Reduce)
                                    else op.shape, domain)
        groups = _coalesce(domain, list(maps.values()), inner)
        self.shape = [math.prod(domain[a] for a in g) for g in groups]
        self.maps = {n: tuple(s[g[-1]] for g in groups) for n, s in maps.items()}
        self.rowwise = bool(inner)
        if inner and (groups[-1] != sorted(inner) or self.shape[-1] == 1):
            raise Unsupported("per-row axes that do not coalesce into one")
        # levels: "row" values are the same along the inner loop (computed once a row)
        last = len(self.shape) - 1
        self.level = {}
        for n, s in self.maps.items():
            self.level[n] = "row" if self.rowwise and s[last] == 0 else "point"
        # phases: a per-row reduction's result is there after the loop that accumulates it
        phase, ready = {i.name: 0 for i in k.inputs}, {}
        for op in k.body:
            args = [phase[a] for a in op.operands()]
            if isinstance(op, Reduce) and op.name not in self.single:
                phase[op.name] = (args[0] + 1) if not op.spans else args[0]
                ready[op.name] = args[0]    # the loop it accumulates in
            else:
                phase[op.name] = max(args, default=0)
                if op.operands() and all(self.level[a] == "row" for a in op.operands()):
                    self.level[op.name] = "row"
        self.phase, self.acc_phase = phase, ready
        # a value the kernel computes only from per-row values is a per-row value
        for op in k.body:
            if isinstance(op, Reduce) and not op.spans and op.name not in self.single:
                self.level[op.name] = "row"

    def plan_loops(self):
        """What each inner loop does: ``self.loops[q] = (reductions, writes, needed)``, and
        ``self.stored``: point values a later loop of the same row needs that cost more to
        compute again than to keep, each kept in a per-thread row buffer by the first loop
        that computes it (W4's backward keeps the gelu gradient it needs twice), and
        ``self.read_back``: those an earlier loop wrote to an output, read from there (the
        thread that wrote a point reads it: no barrier)."""
        k, ops = self.k, {op.name: op for op in self.k.body}
        self.read_back = {}     # point values an earlier loop wrote to an output: read there
        self.phases = max([self.phase[op.name] for op in k.body if self.level[op.name] == "point"]
                          + [self.acc_phase.get(op.name, 0) for op in k.body
                             if isinstance(op, Reduce)] + [0])
        self.loops, self.stored, computed, written = {}, {}, {}, {}
        # kept, not computed again, whatever the row's length: a transcendental's vector and
        # scalar forms differ in the last bit, so a value computed twice may not equal
        # itself (and amax's == against it would fail)
        keep = self.rowwise and self.keeps_rows()
        for q in range(self.phases + 1):
            reds = [op for op in k.body if isinstance(op, Reduce) and op.name not in self.single
                    and self.acc_phase[op.name] == q and self.level[op.args[0]] == "point"]
            writes = [op for op in k.outputs if self.level[op.name] == "point"
                      and self.phase[op.name] == q]
            if not reds and not writes:
                continue
            targets = [r.args[0] for r in reds] + [w.name for w in writes]
            stop = {**self.stored, **self.read_back}
            need = self.closure(targets, ops, stop)
            # an output an earlier loop wrote is read back, not computed again (softmax's
            # exp: the sum's loop writes it, the division's loop reads it)
            while True:
                v = next((v for v in reversed(need) if v in written and v not in stop
                          and self.cost(v, ops, stop) > 1), None)
                if v is None:
                    break
                self.read_back[v] = written[v]
                stop[v] = written[v]
                need = self.closure(targets, ops, stop)
            while keep:
                v = next((v for v in reversed(need) if v in ops and v in computed
                          and v not in stop and self.cost(v, ops, stop) >= STORE_COST), None)
                if v is None:
                    break
                self.stored[v] = stop[v] = computed[v]
                need = self.closure(targets, ops, stop)
            for v in need:
                computed.setdefault(v, q)
            for w in writes:
                written.setdefault(w.name, q)
            self.loops[q] = (reds, writes, need)

    def keeps_rows(self):
        """Whether this kernel can keep a row's values from one loop to a later one."""
        return self.lang.row_buffers

    def cost(self, name, ops, stop):
        """What computing ``name`` again costs, in simple ops (a transcendental is 8)."""
        return sum(8 if ops[n].op in EXPENSIVE else 1
                   for n in self.closure([name], ops, stop) if n in ops and n not in stop)


def _kept(op, ndim):
    """The shape of a reduction's result with its reduced axes kept as 1s."""
    if op.keepdim:
        return op.value.shape
    kept = iter(op.value.shape)
    return tuple(1 if a in op.axes else next(kept) for a in range(ndim))


def _coalesce(domain, maps, inner):
    """Groups of adjacent domain axes that every index map walks as one (an axis of
    size 1 joins its neighbour), never joining a per-row axis with another."""
    groups = [[0]]
    for a in range(1, len(domain)):
        prev = groups[-1][-1]
        same_side = (a in inner) == (prev in inner)
        if same_side and all(s[prev] == s[a] * domain[a] for s in maps):
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups
