"""Split a joint forward+backward graph into a forward and a backward graph, deciding per
value whether the backward gets it *saved* or *recomputes* it.

Nodes that depend on a cotangent are the backward; the rest are forward nodes. The
backward reads some forward values; each is either saved (the forward returns it as a
*residual*) or recomputed in the backward from saved values. The choice is a minimum cut,
the idea of AOTAutograd's rematerialising partitioner: a flow network over the forward
values the backward transitively needs, each value split into an ``in -> out`` edge whose
capacity is what saving it costs (its bytes; nothing for a graph input, which is alive
anyway, unless the forward writes it in place). Graph inputs and values that may not be
recomputed (matmuls, reductions, random draws, custom and other non-elementwise ops) hang
from the source; values the backward reads hang from the sink. The cheapest set of values
separating the two is saved; what lies beyond it is recomputed. Ties go to fewer
recomputed ops (a value closer to the backward costs a little less). A chain of
recomputation longer than ``MAX_RECOMPUTE_DEPTH`` ops is cut by fixing a value part way
in the forward and cutting again.

The forward returns the user's outputs followed by the residuals (inputs included); the
backward takes the residuals, then the cotangents, and returns the gradients. A recomputed
node is copied into the backward (the same ``Node``: values are SSA, each graph defines it
once), just before the first backward node that reads it.

Joint (``n_primal_in=1``, ``n_primal_out=1``)::

    graph(x:f32[3], d_out:f32[]) {
      a:f32[3] = exp x
      b:f32[3] = mul a a
      out:f32[] = sum b  dims=(0,) dtype=None keepdim=False
      c:f32[1] = reshape d_out  shape=(1,)
      d:f32[3] = broadcast_to c  shape=(3,)
      e:f32[3] = mul d a
      f:f32[3] = add e e
      d_x:f32[3] = mul f a
      return (out, d_x)
    }

The backward reads ``a``. Saving it costs 12 bytes; saving ``x`` costs nothing (an
input), and ``a = exp x`` may be recomputed, so the cut saves ``x``::

    forward(x:f32[3]) {                   backward(x:f32[3], d_out:f32[]) {
      a:f32[3] = exp x                      a:f32[1] = reshape d_out  shape=(1,)
      b:f32[3] = mul a a                    b:f32[3] = broadcast_to a  shape=(3,)
      out:f32[] = sum b  ...                c:f32[3] = exp x
      return (out, x)                       d:f32[3] = mul b c
    }                                       e:f32[3] = add d d
                                            d_x:f32[3] = mul e c
                                            return (d_x)
                                          }
"""
from ..ir import Graph, Namer, Value, type_str
from .dce import dce

# Recompute a value only if some chain of at most this many recomputable ops leads from it
# to a value the backward reads: a longer chain is saved part way rather than re-run whole
# (AOTAutograd's max_dist_from_bw). Elementwise composites such as gelu or layer norm span
# around ten ops, so they fit.
MAX_RECOMPUTE_DEPTH = 16

# shape ops that only move data: as cheap to redo as an elementwise op
_DATA_MOVEMENT = frozenset(("reshape", "permute", "broadcast_to", "cat", "index"))


def partition(joint, n_primal_in, n_primal_out, written=()):
    """``(forward, backward, residuals)`` for a joint graph from ``autodiff``.

    ``written``: positions of the primal inputs that the forward writes in place. Saving
    one costs a copy (the runtime takes it before the write-back), so it is not free.
    """
    primals, cotangents = joint.inputs[:n_primal_in], joint.inputs[n_primal_in:]
    tangent = set(cotangents)
    fwd_nodes, bwd_nodes = [], []
    for n in joint.nodes:
        if any(type(v) is Value and v in tangent for v in n.inputs):
            tangent.add(n.out)
            bwd_nodes.append(n)
        else:
            fwd_nodes.append(n)
    grads = joint.outputs[n_primal_out:]
    backward = dce(Graph((), bwd_nodes, grads))
    needed = _reads(backward.nodes, grads, tangent)
    saved = min_cut(primals, fwd_nodes, needed, {primals[i] for i in written})
    nodes = _with_recomputation(backward.nodes, grads, fwd_nodes, saved, tangent)
    residuals = _reads(nodes, grads, tangent)
    forward = dce(Graph(primals, fwd_nodes, list(joint.outputs[:n_primal_out]) + residuals))
    backward = Graph(residuals + list(cotangents), nodes, grads)
    return forward, backward, residuals


def recomputable(node):
    """May the backward run ``node`` again? Cheap, deterministic, data-independent ops."""
    kind = node.prim.kind
    if kind in ("elementwise", "source"):       # source: a constant
        return True
    # indexing by tensors is a gather: its cost and its index arrays make it worth saving
    return node.op in _DATA_MOVEMENT and (node.op != "index" or len(node.values()) == 1)


def min_cut(primals, fwd_nodes, needed, written=frozenset()):
    """The set of forward values to save so that the backward can get ``needed`` (forward
    values it reads) by recomputing the rest (see the module docstring). Saving a primal
    input costs nothing unless it is in ``written``."""
    if not needed:
        return set()
    producer = {n.out: n for n in fwd_nodes}
    region = set()                  # the forward values the backward transitively needs
    stack = list(needed)
    while stack:
        v = stack.pop()
        if v not in region:
            region.add(v)
            if v in producer:
                stack.extend(w for w in producer[v].values() if w not in region)
    order = [v for v in primals if v in region] + [n.out for n in fwd_nodes if n.out in region]
    dist, banned = _distances(order, producer, set(needed))
    # inputs a rule compares with its result bit for bit (Primitive.exact) are saved: a
    # value computed again may differ in its last bit (another tier, vector vs scalar math)
    exact = {v for n in fwd_nodes for name, v in zip(n.prim.args, n.inputs)
             if name in n.prim.exact and v in region}
    # capacities: bytes first; among equal bytes, fewer recomputed ops (dist breaks ties)
    scale = sum(dist.values()) + len(order) + 1
    free = set(primals) - set(written)          # alive anyway
    weight = {v: 0 if v in free else _nbytes(v) * scale + dist[v] + 1 for v in order}
    fixed = set(primals) | banned | exact
    while True:
        saved = _cut(order, producer, weight, fixed, needed)
        deep = _too_deep(order, producer, saved, needed)
        if not deep:
            return saved
        fixed |= deep       # computed in the forward from now on: saved, or a later value is


def _cut(order, producer, weight, fixed, needed):
    """The minimum cut between ``fixed`` values (computed in the forward) and ``needed``
    ones, on values split into ``in -> out`` edges of capacity ``weight``."""
    index = {v: i for i, v in enumerate(order)}
    inf = sum(weight.values()) + 1
    src, snk = 2 * len(order), 2 * len(order) + 1
    net = _Network(2 * len(order) + 2)
    for i, v in enumerate(order):
        net.edge(2 * i, 2 * i + 1, weight[v])
        if v in fixed:
            net.edge(src, 2 * i, inf)
        if v in producer:
            for w in set(producer[v].values()):
                net.edge(2 * index[w] + 1, 2 * i, inf)
    for v in needed:
        net.edge(2 * index[v] + 1, snk, inf)
    net.max_flow(src, snk)
    side = net.reachable(src)
    return {v for i, v in enumerate(order) if side[2 * i] and not side[2 * i + 1]}


def _distances(order, producer, needed):
    """Per value, the fewest recomputable ops from it to a value the backward reads, and the
    values that must not be recomputed: not ``recomputable``, or so far from the backward
    that recomputing them would exceed ``MAX_RECOMPUTE_DEPTH`` anyway."""
    users = {}
    for v in order:
        if v in producer:
            for w in producer[v].values():
                users.setdefault(w, set()).add(v)
    far = MAX_RECOMPUTE_DEPTH + 1
    dist, banned = {}, set()
    for v in reversed(order):
        d = 0 if v in needed else far
        for u in users.get(v, ()):
            if u not in banned:
                d = min(d, dist[u] + 1)
        dist[v] = d
        if v in producer and (not recomputable(producer[v]) or d > MAX_RECOMPUTE_DEPTH):
            banned.add(v)
    return dist, banned


def _too_deep(order, producer, saved, needed):
    """Recomputed values at depth ``MAX_RECOMPUTE_DEPTH + 1``, ``2 * (...)``, ... of a chain
    of recomputed ops from the saved values: fixing them in the forward cuts every chain to
    at most ``MAX_RECOMPUTE_DEPTH`` ops."""
    recomputed, stack = set(), [v for v in needed if v not in saved]
    while stack:
        v = stack.pop()
        if v not in recomputed:
            recomputed.add(v)
            stack.extend(w for w in producer[v].values() if w not in saved)
    depth, deep = {}, set()
    for v in order:
        if v in recomputed:
            depth[v] = 1 + max((depth.get(w, 0) for w in producer[v].values()), default=0)
            if depth[v] % (MAX_RECOMPUTE_DEPTH + 1) == 0:
                deep.add(v)
    return deep


def _with_recomputation(bwd_nodes, grads, fwd_nodes, saved, tangent):
    """The backward's nodes with each recomputed forward node placed just before the first
    node that reads it (so a recomputed value lives no longer than it must)."""
    producer = {n.out: n for n in fwd_nodes}
    position = {n: i for i, n in enumerate(fwd_nodes)}
    ready = set(saved) | tangent
    out = []

    def provide(values):
        todo, stack = [], [v for v in values if type(v) is Value]
        while stack:
            v = stack.pop()
            if v in ready or v not in producer:
                continue
            ready.add(v)
            todo.append(producer[v])
            stack.extend(producer[v].values())
        out.extend(sorted(todo, key=position.__getitem__))

    for n in bwd_nodes:
        provide(n.inputs)
        out.append(n)
    provide(grads)
    return out


def _reads(nodes, outputs, tangent):
    """Forward values that ``nodes`` read or ``outputs`` name but nothing in ``nodes``
    defines, in order of first read."""
    defined = {n.out for n in nodes}
    seen, reads = set(), []
    for v in [v for n in nodes for v in n.inputs] + list(outputs):
        if type(v) is Value and v not in tangent and v not in defined and v not in seen:
            seen.add(v)
            reads.append(v)
    return reads


def _nbytes(v):
    n = v.aval.dtype.itemsize
    for s in v.shape:
        n *= s
    return n


class _Network:
    """A flow network on nodes ``0..n-1`` with Dinic's max-flow (edges stored in pairs:
    edge ``e`` and its reverse ``e ^ 1``)."""

    def __init__(self, n):
        self.adj = [[] for _ in range(n)]
        self.head, self.cap = [], []

    def edge(self, u, v, cap):
        self.adj[u].append(len(self.head))
        self.head.append(v)
        self.cap.append(cap)
        self.adj[v].append(len(self.head))
        self.head.append(u)
        self.cap.append(0)

    def _levels(self, s):
        level = [-1] * len(self.adj)
        level[s] = 0
        queue = [s]
        for u in queue:
            for e in self.adj[u]:
                v = self.head[e]
                if self.cap[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level

    def max_flow(self, s, t):
        total = 0
        while True:
            level = self._levels(s)
            if level[t] < 0:
                return total
            nxt = [0] * len(self.adj)
            while True:
                pushed = self._augment(s, t, level, nxt)
                if not pushed:
                    break
                total += pushed

    def _augment(self, s, t, level, nxt):
        """Push flow along one path of the level graph (iterative: chains can be long)."""
        adj, head, cap = self.adj, self.head, self.cap
        path, u = [], s
        while u != t:
            edges = adj[u]
            while nxt[u] < len(edges):
                e = edges[nxt[u]]
                if cap[e] > 0 and level[head[e]] == level[u] + 1:
                    break
                nxt[u] += 1
            else:                   # a dead end: step back and skip the edge that led here
                if not path:
                    return 0
                u = head[path.pop() ^ 1]
                nxt[u] += 1
                continue
            path.append(e)
            u = head[e]
        pushed = min(cap[e] for e in path)
        for e in path:
            cap[e] -= pushed
            cap[e ^ 1] += pushed
        return pushed

    def reachable(self, s):
        """Per node: can it be reached from ``s`` along edges with capacity left?"""
        seen = [False] * len(self.adj)
        seen[s] = True
        stack = [s]
        while stack:
            u = stack.pop()
            for e in self.adj[u]:
                v = self.head[e]
                if self.cap[e] > 0 and not seen[v]:
                    seen[v] = True
                    stack.append(v)
        return seen


def saved_and_recomputed(forward, backward, n_residuals, namer=None):
    """For ``explain``: the residuals as ``(name, type, bytes, is_input)`` and the names of
    the values the backward recomputes (its nodes that read no cotangent), all named as
    the printed backward names them (or as ``namer``, a compiled variant's, does)."""
    names = namer or _names(backward)
    inputs = set(forward.inputs)
    residuals = backward.inputs[:n_residuals]
    saved = [(names(v), type_str(v.aval), _nbytes(v), v in inputs) for v in residuals]
    tangent = set(backward.inputs[n_residuals:])
    recomputed = []
    for n in backward.nodes:
        if any(type(v) is Value and v in tangent for v in n.inputs):
            tangent.add(n.out)
        else:
            recomputed.append(names(n.out))
    return saved, recomputed


def _names(graph):
    """The namer ``print_graph`` uses, primed in its order."""
    namer = Namer()
    for v in graph.inputs:
        namer(v)
    for n in graph.nodes:
        namer(n.out)
    return namer
