"""Which dims a compiled function traces with symbolic sizes, and when to trust such a trace.

``dynamic=None`` (the default) is PyTorch's automatic dynamic: a call whose tensors differ
from an earlier variant's only in some sizes makes those dims dynamic, and the retrace
gives a variant for every size (``DynamicDims.grow``). ``dynamic=True`` makes every dim
dynamic from the first call, ``dynamic=False`` none; ``mark_dynamic``/``mark_static`` on a
tensor override both for its dims. Sizes 0 and 1 are always specialised.

A dynamic trace is trusted for other sizes only once a trace at a second size agrees
with it (``DynamicDims.check_generic``): the graph evaluated at the other trace's sizes
must be that trace's graph, op for op, shape for shape, constant for constant. This
catches what symbolic sizes cannot see (a size turned into a plain number by ``int()``,
``range()`` or NumPy and baked into the graph). Under automatic dynamic the earlier
static variant is the second size; otherwise the variant serves only its own sizes until
a call of another size has been traced and compared. Sizes go from one trace to the other
through the dims they are read from, never by the symbols' names.

Several dims, of one input or across inputs, are dynamic at once. Dims of equal sizes
share a symbol (duck sizing: ``x: [B, T]`` and ``y: [B, T, C]`` read one ``B``), unless an
earlier traced call had them differ. When a trace stops with ``symbolic.Specialize``
(``DynamicDims.specialize``), what it relied on decides: two sizes equal (``s0 == s1``)
ties their dims to one symbol; a size equal to a constant (``s1 == 2``: a slice of length
1 that broadcasts) pins those dims static for calls of that size only, as PyTorch's guard
does; a size used as a number, or traces at two sizes that disagree, make those dims
static for good.

A dynamic backward reads its sizes from its inputs' dims; sizes that no saved value has
as a dim come in a carrier input (``size_carrier``).
"""
import numpy as np

from tracegrad import dtypes
from tracegrad.ir import Const, Graph, Value
from tracegrad.ops.core import Aval
from tracegrad.symbolic import (
    _OPS, ATOMS, MARKS, ShapeEnv, Specialize, SymInt, base_symbols, marks_of, symbols_in,
)


class DynamicDims:
    """The dynamic dims of one compiled function (see the module docstring)."""

    def __init__(self, mode):
        self.mode = mode            # None (automatic), True, False
        self.dyn = {}               # argument tensor index -> dims made dynamic
        self.static = set()         # (tensor index, dim): specialised for good
        self.pins = {}              # (tensor index, dim) -> sizes a trace needed as constants
        self.ties = set()           # {dim, dim}: dims a trace needed equal share one symbol
        self.history = []           # the argument shapes of the calls traced, latest last

    def dims(self, tensors):
        """``{tensor index: dims}`` traced symbolic for a call on ``tensors``."""
        out = {}
        pins = self.pins
        for ti, t in enumerate(tensors):
            dims = set(self.dyn.get(ti, ()))
            if self.mode is True:
                dims.update(range(t.ndim))
            elif self.mode is False:
                dims.clear()
            marks = marks_of(t) if MARKS else None
            if marks:
                dims |= {d for d, m in marks.items() if m == "dynamic"}
                dims -= {d for d, m in marks.items() if m == "static"}
            if dims:
                shape = t._data.shape
                dims = {d for d in dims if d < len(shape) and shape[d] >= 2
                        and (ti, d) not in self.static
                        and not (pins and shape[d] in pins.get((ti, d), ()))}
            if dims:
                out[ti] = frozenset(dims)
        return out

    def key(self, sig, tensors):
        """The call signature ``sig`` with the dynamic dims' sizes left out (None)."""
        return _mask(sig, self.dims(tensors))

    def shape_env(self, tensors):
        """The ``ShapeEnv`` of a trace of a call on ``tensors``: dims of equal sizes share a
        symbol (duck sizing) unless an earlier traced call had them differ, or a trace
        needed them equal (``ties``)."""
        self.history = self.history[-15:] + [[t._data.shape for t in tensors]]
        return ShapeEnv(same=self._same)

    def _same(self, dim, others):
        if any(frozenset((dim, o)) in self.ties for o in others):
            return True
        return not any(_size(shapes, dim) != _size(shapes, o) for shapes in self.history
                       for o in others)

    def grow(self, raw, key, variants, paths):
        """Automatic dynamic: the dims whose size alone differs from the latest variant of the
        same mode are made dynamic; returns the reason in words, or None."""
        prior = next((v for v in reversed(variants) if v.signature[1:] == key[1:]
                      and getattr(v, "raw_sig", None) is not None), None)
        if prior is None:
            return None
        changes = _size_changes(prior.raw_sig, raw) - self.static
        changes = {(ti, d) for ti, d in changes if d not in self.dyn.get(ti, ())}
        if not changes:
            return None
        for ti, d in sorted(changes):
            self.dyn.setdefault(ti, set()).add(d)
        where = ", ".join(f"dim {d} of {paths[ti] if ti < len(paths) else f'tensor {ti}'}"
                          for ti, d in sorted(changes))
        return f"sizes changed ({where}): traced with symbolic sizes from now on"

    def specialize(self, exc, sym_dims, paths):
        """What a trace that stopped with ``exc`` changes; the reason in words. A trace that
        relied on two sizes being equal is made again with one symbol for both (``ties``);
        one that relied on a size being a constant (``s1 == 2``, a slice ``x[1:]`` of length
        1 broadcasting) with those dims static for calls of these sizes only (``pins``),
        as PyTorch's does; anything else (a size used as a number, traces at two sizes that
        differ) makes the dims behind ``exc.symbols`` static for good."""
        def words(dims):
            return ", ".join(f"dim {d} of {paths[ti] if ti < len(paths) else f'tensor {ti}'}"
                             for ti, d in dims) or "no dim"
        if exc.equal is not None:
            symbols = base_symbols(exc.equal)
            pair = _difference_of_two(exc.equal)
            if pair is not None:
                a, b = ([(ti, d) for ti, d, z in sym_dims if str(z) == s] for s in pair)
                new = {frozenset((x, y)) for x in a for y in b} - self.ties
                if new:
                    self.ties |= new
                    return f"{words(sorted(a + b))} traced with one size: {exc.why}"
            pins = sorted((ti, d, int(z)) for ti, d, z in sym_dims
                          if base_symbols(z.poly) & symbols)
            new = [(ti, d, n) for ti, d, n in pins if n not in self.pins.get((ti, d), ())]
            if new:
                for ti, d, n in new:
                    self.pins.setdefault((ti, d), set()).add(n)
                return (f"{words([(ti, d) for ti, d, _ in new])} specialised for calls of "
                        f"these sizes: {exc.why}")
        dims = sorted({(ti, d) for ti, d, size in sym_dims
                       if base_symbols(size.poly) & exc.symbols})
        for ti, d in dims:
            self.static.add((ti, d))
            if ti in self.dyn:
                self.dyn[ti].discard(d)
        return f"{words(dims)} specialised: {exc.why}"

    def check_generic(self, traced, key, variants, dims, fits=lambda v: True):
        """Compare the dynamic ``traced`` with a trace at another size. Returns the variant
        this trace confirms (to be reused as it is), or None; raises ``Specialize`` when
        the two disagree. A trace with nothing to compare with stays unverified
        (``traced.verified`` False): its variant serves only its own sizes for now.

        Two traces name their symbols each in its own order (and duck sizing may give dims
        one symbol in one trace and two in the other), so sizes go from one to the other
        through the dims they are read from, never by the symbols' names."""
        symbols = {str(size) for _, _, size in traced.sym_dims}
        shapes = [t._data.shape for t in traced.arg_tensors]
        hints = {str(size): int(size) for _, _, size in traced.sym_dims}
        for v in reversed(variants):
            if v.signature[1:] != key[1:] or getattr(v, "raw_sig", None) is None \
                    or not fits(v):
                continue
            if v.signature == key and v.sizes is not None and not v.sizes.verified and \
                    [id(t) for t in v.captured] == [id(t) for t in traced.captured]:
                # this call's sizes in the unverified variant's symbols: where they fit it,
                # that variant is reused once this trace agrees with it
                here = _values_at(shapes, v.sym_dims)
                if here is not None and _holds(v.sizes.relations, here):
                    why = equivalent(v.traced_graph, here, traced.graph, None)
                    if why:
                        raise Specialize(symbols, f"a trace at another size differs ({why})")
                    v.sizes.verified = True
                    return v
            if tuple(_mask(v.raw_sig, dims)) != key[0]:
                continue
            # an earlier trace (static, or dynamic at its own sizes) this one covers: this
            # graph at that call's sizes must be that graph
            seen = _sizes_at(v.raw_sig, traced.sym_dims)
            if seen is None or seen == hints or not _holds(traced.shape_env.relations, seen):
                continue
            why = equivalent(traced.graph, seen, v.traced_graph, None)
            if why:
                raise Specialize(symbols, f"a trace at another size differs ({why})")
            traced.verified = True
            return None
        traced.verified = False
        return None


def _size(shapes, dim):
    ti, d = dim
    return shapes[ti][d] if ti < len(shapes) and d < len(shapes[ti]) else None


def _difference_of_two(d):
    """``(a, b)`` when the expression ``d`` is ``a - b`` for two size symbols, else None."""
    if len(d.terms) != 2:
        return None
    (m1, c1), (m2, c2) = d.terms
    if len(m1) != 1 or len(m2) != 1 or {c1, c2} != {1, -1} or m1[0] in ATOMS or m2[0] in ATOMS:
        return None
    return m1[0], m2[0]


def _mask(sig, dims):
    """``sig`` with the sizes of ``dims`` ({tensor index: dims}) left out (None)."""
    if not dims:
        return sig
    out, ti = [], 0
    for e in sig:
        if type(e) is tuple and e and e[0] == "T":
            d = dims.get(ti)
            if d:
                e = ("T", tuple(None if i in d else n for i, n in enumerate(e[1]))) + e[2:]
            ti += 1
        out.append(e)
    return out


def _holds(relations, values):
    """Whether the trace's size relations hold at ``values`` (symbol -> int)."""
    return all(_OPS[op](d.evaluate(values)) == expected for d, op, expected in relations)


def _size_changes(old, new):
    """``{(tensor index, dim)}`` where two signatures differ only in sizes (>= 2 in both),
    or the empty set when they differ otherwise."""
    if len(old) != len(new):
        return set()
    out, ti = set(), 0
    for a, b in zip(old, new):
        if type(b) is tuple and b and b[0] == "T":
            if not (type(a) is tuple and a and a[0] == "T") or a[2:] != b[2:] \
                    or len(a[1]) != len(b[1]):
                return set()
            for d, (m, n) in enumerate(zip(a[1], b[1])):
                if m != n:
                    if m is None or m < 2 or n < 2:
                        return set()
                    out.add((ti, d))
            ti += 1
        elif a != b:
            return set()
    return out


def _values_at(shapes, sym_dims):
    """The values of the symbols of ``sym_dims`` in a call of tensors of ``shapes``, or None
    when dims of one symbol differ there (or are missing)."""
    values = {}
    for ti, d, size in sym_dims:
        if ti >= len(shapes) or d >= len(shapes[ti]):
            return None
        n = shapes[ti][d]
        if values.setdefault(str(size), n) != n or n < 2:
            return None
    return values


def _sizes_at(raw, sym_dims):
    """The symbols' values in the call ``raw`` describes, or None when its dims of one symbol
    differ (the traces are not comparable)."""
    shapes = [e[1] for e in raw if type(e) is tuple and e and e[0] == "T"]
    values = {}
    for ti, d, size in sym_dims:
        if ti >= len(shapes) or d >= len(shapes[ti]) or shapes[ti][d] is None:
            return None
        n = shapes[ti][d]
        if values.setdefault(str(size), n) != n:
            return None
    return values


def equivalent(ga, va, gb, vb):
    """Why graph ``ga`` with its sizes at ``va`` (symbol -> int) is not graph ``gb`` with
    its sizes at ``vb`` (None: their hints), or None when they are the same computation."""
    def at(x, values):
        if type(x) is SymInt:
            return int(x) if values is None else x.poly.evaluate(values)
        if type(x) in (tuple, list):
            return tuple(at(y, values) for y in x)
        if type(x) is dict:
            return {k: at(y, values) for k, y in x.items()}
        return x

    if len(ga.nodes) != len(gb.nodes) or len(ga.inputs) != len(gb.inputs) \
            or len(ga.outputs) != len(gb.outputs):
        return "a different number of ops"
    pos_a = {v: i for i, v in enumerate(list(ga.inputs) + [n.out for n in ga.nodes])}
    pos_b = {v: i for i, v in enumerate(list(gb.inputs) + [n.out for n in gb.nodes])}

    def same_value(x, y):
        if type(x) is Value or type(y) is Value:
            return type(x) is type(y) and pos_a.get(x) == pos_b.get(y)
        return _same(at(x, va), at(y, vb))

    for v, w in zip(ga.inputs, gb.inputs):
        if at(v.aval.shape, va) != at(w.aval.shape, vb) or v.aval.dtype is not w.aval.dtype:
            return "an input of another shape"
    for n, m in zip(ga.nodes, gb.nodes):
        site = f" at {n.site}" if n.site else ""
        if n.op != m.op or len(n.inputs) != len(m.inputs) or set(n.params) != set(m.params):
            return f"{n.op} against {m.op}{site}"
        if not all(same_value(x, y) for x, y in zip(n.inputs, m.inputs)):
            return f"the operands of {n.op}{site}"
        if not all(_same(at(n.params[k], va), at(m.params[k], vb)) for k in n.params):
            return f"the parameters of {n.op}{site}"
        if at(n.out.aval.shape, va) != at(m.out.aval.shape, vb):
            return f"the shape of {n.op}{site}"
    if not all(same_value(x, y) for x, y in zip(ga.outputs, gb.outputs)):
        return "the outputs"
    return None


def _same(x, y):
    if isinstance(x, Const) or isinstance(y, Const):
        return isinstance(x, Const) and isinstance(y, Const) and x == y
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return np.array_equal(x, y)
    if type(x) in (tuple, list) and type(y) in (tuple, list):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    try:
        return bool(x == y) and type(x) is type(y) or x is y
    except Exception:        # noqa: BLE001 - objects that do not compare: by identity
        return x is y


# the sizes a dynamic backward reads -------------------------------------------------------

def size_carrier(bwd, n_residuals, sym_dims):
    """A dynamic backward reads its sizes from its inputs' dims (``s0 = h.shape[0]``); a
    size no saved value has as a dim (the count of ``x.mean()``, the parts a ``cat`` or a
    ``reshape`` joined) comes in a *carrier*: one more input after the residuals, an int8
    array of those sizes with every stride 0 (no memory). Returns ``(backward graph,
    [(argument index, dim)])`` with the carrier added, or ``(bwd, None)`` when none is needed.
    """
    used = set()
    for v in bwd.inputs:
        used |= symbols_in(v.aval.shape)
    for n in bwd.nodes:
        used |= symbols_in(n.out.aval.shape) | symbols_in(list(n.inputs)) | symbols_in(n.params)
    for v in bwd.inputs:
        for n in v.aval.shape:
            if type(n) is SymInt and len(n.poly.terms) == 1:
                (mono, coeff), = n.poly.terms
                if coeff == 1 and len(mono) == 1:
                    used.discard(mono[0])
    where = {}
    for ti, d, size in sym_dims:
        where.setdefault(str(size), (ti, d, size))
    missing = sorted(used & set(where), key=lambda s: int(s[1:]))
    if not missing:
        return bwd, None
    carrier = Value(Aval(tuple(where[s][2] for s in missing), dtypes.int8), "sizes")
    inputs = list(bwd.inputs)
    inputs.insert(n_residuals, carrier)
    return Graph(inputs, bwd.nodes, bwd.outputs, bwd.groups, bwd.plan), \
        [where[s][:2] for s in missing]


_ZERO = np.zeros((), np.int8)


def carrier_of(tensors, dims):
    """The carrier (see ``size_carrier``) of a call on ``tensors``."""
    return np.broadcast_to(_ZERO, tuple(tensors[ti]._data.shape[d] for ti, d in dims))
