"""The compiler's IR: immutable SSA ``Graph``, ``Node`` and ``Value``.

A ``Value`` is an abstract tensor (an ``Aval``: shape and dtype) with an
optional name hint taken from the user's variable. A ``Node`` applies one
primitive of the table (``op`` is its name) to values and Python scalars and
defines exactly one new value. A ``Graph`` lists its input values, its nodes in
an order where every value is defined before use, and its output values.
Nothing is mutated after construction: passes build new graphs.

The canonical text form prints like a jaxpr, deterministic, shapes inline and
params sorted::

    graph(x:f32[3], w:f32[3]) {
      h:f32[3] = mul x w
      a:f32[] = sum h  dims=(0,) keepdim=False
      return (a)
    }

``verify(graph)`` checks the invariants; ``evaluate(graph, tensors)`` runs a
graph through the eager ops (the reference semantics, and how a compiled
backward is differentiated again under ``create_graph=True``).
"""
import keyword

import numpy as np

from . import dtypes
from .ops.core import PRIMITIVES, Aval, Primitive, bind

SHORT = {dtypes.float16: "f16", dtypes.float32: "f32", dtypes.float64: "f64",
         dtypes.int64: "i64", dtypes.int32: "i32", dtypes.int16: "i16", dtypes.int8: "i8",
         dtypes.uint8: "u8", dtypes.bool: "bool"}


class Value:
    """One SSA value: an aval and a name (the user's variable, or None), both given when it
    is built and never changed (names found later are hints to a ``Namer``)."""
    __slots__ = ("aval", "name")

    def __init__(self, aval, name=None):
        object.__setattr__(self, "aval", aval)
        object.__setattr__(self, "name", name)

    def __setattr__(self, attr, value):
        raise AttributeError(f"IR values are immutable: build a new Value to set {attr} "
                             f"(or give a Namer a name hint)")

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def ndim(self):
        return len(self.aval.shape)

    def __repr__(self):
        return f"Value({self.name or '?'}:{type_str(self.aval)})"


class Node:
    """``out = op(*inputs, **params)``; ``site`` is the user's ``file:line`` or ''."""
    __slots__ = ("op", "inputs", "params", "out", "site")

    def __init__(self, op, inputs, params, out, site=""):
        self.op, self.inputs, self.params, self.out, self.site = (
            op, tuple(inputs), dict(params), out, site)

    @property
    def prim(self):
        return PRIMITIVES[self.op]

    def values(self):
        """The inputs that are values (the rest are Python scalars)."""
        return [v for v in self.inputs if type(v) is Value]

    def __repr__(self):
        return f"Node({self.op})"


class Graph:
    """``inputs`` (values), ``nodes`` (in definition order), ``outputs`` (values).

    ``groups`` (set by the ``fuse`` pass, kept by ``memplan``) are fused groups: each a
    run of consecutive nodes that codegen emits as one loop. ``plan`` (set by
    ``memplan``) says where group outputs live (see ``passes/memplan.py``).
    """
    __slots__ = ("inputs", "nodes", "outputs", "groups", "plan")

    def __init__(self, inputs, nodes, outputs, groups=(), plan=None):
        self.inputs, self.nodes, self.outputs = tuple(inputs), tuple(nodes), tuple(outputs)
        self.groups, self.plan = tuple(groups), plan

    def __str__(self):
        return print_graph(self)

    def __repr__(self):
        return f"<Graph: {len(self.inputs)} inputs, {len(self.nodes)} nodes>"

    def producers(self):
        """Value -> the node that defines it."""
        return {n.out: n for n in self.nodes}

    def units(self):
        """``[(group or None, nodes)]`` in order: each fused group as one unit, every other
        node as a unit of its own (how codegen and memplan walk a fused graph)."""
        first = {g.nodes[0]: g for g in self.groups}
        units, i = [], 0
        while i < len(self.nodes):
            g = first.get(self.nodes[i])
            nodes = g.nodes if g else (self.nodes[i],)
            units.append((g, nodes))
            i += len(nodes)
        return units

    def users(self):
        """Value -> nodes that read it (in order)."""
        out = {}
        for n in self.nodes:
            for v in n.inputs:
                if type(v) is Value:
                    out.setdefault(v, []).append(n)
        return out


class Group:
    """A fused group: ``nodes`` run as one pass over the iteration space ``domain``.

    ``loop`` nodes run inside the pass (codegen may split it into chunks of rows:
    slices along axis 0 of ``domain``); ``after`` nodes (the epilogue) run once the
    pass is over, on results of reductions that span every row. ``inputs`` are the
    values read from outside, ``outputs`` the values read after the group (or returned).
    ``kind`` is "elementwise" or "reduction". Immutable like the rest of the IR.
    """
    __slots__ = ("loop", "after", "inputs", "outputs", "domain", "kind")

    def __init__(self, loop, after, inputs, outputs, domain, kind):
        self.loop, self.after = tuple(loop), tuple(after)
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        self.domain, self.kind = tuple(domain), kind

    @property
    def nodes(self):
        return self.loop + self.after

    def __repr__(self):
        return f"<Group {self.kind} {list(self.domain)}: {len(self.nodes)} nodes>"


# ops that exist only in the IR --------------------------------------------------------

def _const_impl(xp, *, value):
    return value.array if xp is np else xp.asarray(value.array)


class Const:
    """A constant array inside a node's params: hashed and compared by content."""
    __slots__ = ("array", "_key")

    def __init__(self, array):
        self.array = np.asarray(array)
        self._key = (self.array.dtype.str, self.array.shape, self.array.tobytes())

    def __eq__(self, other):
        return isinstance(other, Const) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        a = self.array
        if a.size <= 6:
            return np.array2string(a, separator=",").replace("\n", "")
        return f"<{a.size} values>"


constant = Primitive(
    "constant", _const_impl, args=(),
    dtype=lambda *, value: dtypes.from_numpy(value.array.dtype),
    shape=lambda *, value: value.array.shape, kind="source")


def _draw(xp, *, dist, shape, dtype, generator, low=0, high=1):
    rng = generator.rng
    a = (rng.random(shape) if dist == "uniform" else rng.standard_normal(shape)
         if dist == "normal" else rng.integers(low, high, shape))
    a = a.astype(dtype.np, copy=False)
    return a if xp is np else xp.asarray(a)


random = Primitive(
    "random", _draw, args=(),
    dtype=lambda *, dtype, **_: dtype, shape=lambda *, shape, **_: tuple(shape), kind="random")


size = Primitive(
    "size", lambda xp, *, value, dtype: xp.asarray(value, dtype=dtype.np), args=(),
    dtype=lambda *, value, dtype: dtype, shape=lambda **_: (), kind="source",
    np="np.asarray({value}, dtype={dtype})")
size.__doc__ = """A size of the call as a 0-d array (``mean``'s count when the batch is
dynamic); ``passes.sizes`` makes one for each symbolic scalar operand."""


def _passthrough(xp, a):
    return a


stop_gradient = Primitive(
    "stop_gradient", _passthrough, args=("self",),
    dtype=lambda a: a.dtype, shape=lambda s: s, kind="elementwise", np="{self}",
    c="{self}")


# the canonical printer ------------------------------------------------------------------

def type_str(aval):
    return f"{SHORT.get(aval.dtype, aval.dtype.name)}[{','.join(map(str, aval.shape))}]"


class Namer:
    """Deterministic, unique names: a value's own name when it has one, else its hint from
    ``hints`` (names passes found for it, such as ``d_x`` for the gradient of ``x``), else
    a, b, c, ..."""

    def __init__(self, taken=(), hints=None):
        self.names, self.used, self.counter = {}, set(taken), 0
        self.hints = hints or {}
        self.suffix = {}    # base -> the suffix to try next: those below are taken

    def __call__(self, v):
        name = self.names.get(v)
        if name is None:
            name = self._fresh(v.name or self.hints.get(v))
            self.names[v] = name
        return name

    def fresh(self, hint):
        """A new unique name from ``hint``, bound to no value (a helper variable)."""
        return self._fresh(hint)

    def _fresh(self, hint):
        if hint:
            base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint)
            if base[0].isdigit() or keyword.iskeyword(base):
                base = "_" + base
            i = self.suffix.get(base, 0)       # tried in turn: base, base_1, base_2, ...
            name = f"{base}_{i}" if i else base
            while name in self.used:
                i += 1
                name = f"{base}_{i}"
            self.suffix[base] = i + 1
        else:
            name = None
            while name is None or name in self.used:
                name = _letters(self.counter)
                self.counter += 1
        self.used.add(name)
        return name


def _letters(i):
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(97 + r) + s
    return s if not keyword.iskeyword(s) else s + "_"


def format_param(v):
    if isinstance(v, dtypes.dtype):
        return v.name
    if isinstance(v, tuple):
        inner = ",".join(format_param(x) for x in v)
        return f"({inner}{',' if len(v) == 1 else ''})"
    if v is Ellipsis:
        return "..."
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}={format_param(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, Primitive):
        return v.name
    if hasattr(v, "manual_seed"):      # a Generator
        return "generator" if _is_default_generator(v) else f"generator@{id(v):x}"
    return repr(v)


def _is_default_generator(g):
    from .creation import default_generator
    return g is default_generator


def print_graph(graph, name="graph", namer=None):
    """The canonical text; a fused group prints as a block, its epilogue after ``then``.
    ``namer`` (a compiled variant's) names values as its generated code does::

        fused0 reduction [3] (x) -> (b) {
          a:f32[3] = exp x
          b:f32[] = sum a  dims=(0,) keepdim=False
        }
    """
    namer = namer or Namer()
    head = ", ".join(f"{namer(v)}:{type_str(v.aval)}" for v in graph.inputs)
    lines = [f"{name}({head}) {{"]
    for n in graph.nodes:       # names in definition order, with or without groups
        namer(n.out)
    starts = {g.nodes[0]: (k, g) for k, g in enumerate(graph.groups)}
    indent, closing = "  ", {}
    for n in graph.nodes:
        if n in starts:
            k, g = starts[n]
            names = [namer(v) for v in g.inputs], [namer(v) for v in g.outputs]
            lines.append(f"  fused{k} {g.kind} [{','.join(map(str, g.domain))}] "
                         f"({', '.join(names[0])}) -> ({', '.join(names[1])}) {{")
            indent = "    "
            if g.after:
                closing[g.loop[-1]] = "  } then {"
            closing[g.nodes[-1]] = "  }"
        args = " ".join(namer(v) if type(v) is Value else repr(v) for v in n.inputs)
        params = " ".join(f"{k}={format_param(n.params[k])}" for k in sorted(n.params))
        rhs = " ".join(p for p in (n.op, args) if p)
        lines.append(f"{indent}{namer(n.out)}:{type_str(n.out.aval)} = {rhs}"
                     + (f"  {params}" if params else ""))
        if n in closing:
            lines.append(closing[n])
            indent = "  " if closing[n] == "  }" else indent
    lines.append(f"  return ({', '.join(namer(v) for v in graph.outputs)})")
    lines.append("}")
    return "\n".join(lines)


# checking ---------------------------------------------------------------------------------

class IRError(Exception):
    """A graph that breaks the IR's invariants (a compiler bug, never a user error)."""


def verify(graph):
    """Check that every value is defined once before use and that avals agree with the rules."""
    defined = set()
    for v in graph.inputs:
        if v in defined:
            raise IRError(f"input {v} listed twice")
        defined.add(v)
    for i, n in enumerate(graph.nodes):
        if n.op not in PRIMITIVES:
            raise IRError(f"node {i}: unknown op {n.op!r}")
        for v in n.inputs:
            if type(v) is Value and v not in defined:
                raise IRError(f"node {i} ({n.op}): input {v} used before its definition")
        if n.out in defined:
            raise IRError(f"node {i} ({n.op}): {n.out} assigned twice")
        defined.add(n.out)
        want = infer_aval(n.op, n.inputs, n.params)
        if want != n.out.aval:
            raise IRError(f"node {i} ({n.op}): aval {n.out.aval} but the rules give {want}")
    for v in graph.outputs:
        if v not in defined:
            raise IRError(f"output {v} is not defined")
    _verify_groups(graph)
    return graph


def _verify_groups(graph):
    """Each group is a run of consecutive nodes whose inputs are what it reads from the rest
    of the graph and whose outputs include all the rest reads of it."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    seen = set()
    for k, g in enumerate(graph.groups):
        idx = [position.get(n) for n in g.nodes]
        if None in idx or idx != list(range(idx[0], idx[0] + len(idx))):
            raise IRError(f"fused{k}: its nodes are not a run of the graph's nodes")
        if seen & set(g.nodes):
            raise IRError(f"fused{k}: a node belongs to two groups")
        seen.update(g.nodes)
        inside = {n.out for n in g.nodes}
        reads = {v for n in g.nodes for v in n.inputs if type(v) is Value and v not in inside}
        if reads != set(g.inputs):
            raise IRError(f"fused{k}: inputs {g.inputs} but its nodes read {reads}")
        used = set(graph.outputs) | {v for n in graph.nodes if n not in g.nodes
                                     for v in n.inputs if type(v) is Value}
        if not {v for v in inside if v in used} <= set(g.outputs) <= inside:
            raise IRError(f"fused{k}: outputs {g.outputs} miss what is read after it")


def infer_aval(op, inputs, params):
    prim = PRIMITIVES[op]
    operands = [v.aval if type(v) is Value else v for v in inputs]
    return prim.shape_dtype(*operands, **params)


# the reference interpreter -----------------------------------------------------------------

def evaluate(graph, args, sizes=None, device=None):
    """Run ``graph`` on tensors through the eager ops (so autograd records it); ``sizes``
    (symbol -> int) gives a dynamic graph's symbolic sizes their values for this call;
    ``device`` (a GPU's): where the constants go (a constant is kept on the host)."""
    from .symbolic import substitute
    env = dict(zip(graph.inputs, args))
    for n in graph.nodes:
        ins = [env[v] if type(v) is Value else v for v in n.inputs]
        params = n.params
        if sizes:
            ins, params = substitute(ins, sizes), substitute(params, sizes)
        out = env[n.out] = bind(n.prim, *ins, **params)
        if device is not None and n.prim.kind == "source":
            env[n.out] = out.to(device)
    return [env[v] for v in graph.outputs]


__all__ = ["Value", "Node", "Graph", "Group", "Const", "Aval", "print_graph", "verify", "evaluate",
           "infer_aval", "IRError", "Namer", "type_str"]
