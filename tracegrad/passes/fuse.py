"""Fusion: maximal groups of elementwise ops and reductions over one iteration space.

A group has a *domain* (the shape it iterates over) and runs as one pass over
it, which codegen may split into chunks of rows (slices along axis 0). Inside
the pass (``loop``) go elementwise ops whose result lines up with the domain's
rows (the full domain, or a per-row value such as ``(rows, 1)``) and
reductions of domain-shaped values: a reduction that keeps axis 0 is per-row
and later ops of the pass may read it; one that reduces axis 0 spans every
row, so what reads it runs once the pass is over (``after``: the epilogue).
Inputs from outside only need to broadcast to the domain. ``can_fuse`` is the
one predicate; a node joins the group of one of its producers, and joining
builds a new group. Joining or merging must not make a cycle (a group that
needs, through nodes outside it, what it computes): the groups being built and
the nodes between them are kept as a ``reach.UnitGraph``, which answers that
without walking the program's history, so the pass costs time linear in it.

Before::                                  After::

    graph(x:f32[3], a:f32[3]) {               graph(x:f32[3], a:f32[3]) {
      b:f32[3] = mul x a                        fused0 reduction [3] (x, a) -> (d) {
      c:f32[3] = tanh b                           b:f32[3] = mul x a
      d:f32[] = sum c  dims=(0,) ...              c:f32[3] = tanh b
      return (d)                                  d:f32[] = sum c  dims=(0,) ...
    }                                           }
                                                return (d)
                                              }
"""
import heapq
import itertools
import math

import numpy as np

from ..ir import Graph, Group
from .reach import UnitGraph

class Draft:
    """A group being built: loop and after nodes, the domain, and what each value is
    (``local``: lines up with the domain's rows; ``rows``: sliced along the rows but not
    broadcastable to the domain; ``across``: spans every row)."""
    __slots__ = ("loop", "after", "domain", "kinds", "reduces")

    def __init__(self, loop, after, domain, kinds, reduces):
        self.loop, self.after, self.domain = loop, after, domain
        self.kinds, self.reduces = kinds, reduces

    def join(self, node, place):
        """A new draft with ``node`` added (``place`` from ``can_fuse``)."""
        domain, kind = self.domain, _kind_in(node, self.domain, place)
        if place == "loop" and node.prim.kind == "elementwise" \
                and not _local(node.out.shape, domain):
            domain = node.out.shape                 # widened: every value so far is per-row
        kinds = dict(self.kinds)
        kinds[node.out] = kind
        loop = self.loop + (node,) if place == "loop" else self.loop
        after = self.after + (node,) if place == "after" else self.after
        return Draft(loop, after, domain, kinds, self.reduces or node.prim.kind == "reduction")

    def merge(self, other, position):
        """A new draft with both groups' nodes, in graph order, or None when their domains
        differ (unless one is per-row in the other and has no reductions: it widens)."""
        def order(nodes):
            return tuple(sorted(nodes, key=position.__getitem__))
        if self.domain == other.domain:
            domain = self.domain
        elif not other.reduces and _local(other.domain, self.domain):
            domain = self.domain
        elif not self.reduces and _local(self.domain, other.domain):
            domain = other.domain
        else:
            return None
        return Draft(order(self.loop + other.loop), order(self.after + other.after),
                     domain, {**self.kinds, **other.kinds}, self.reduces or other.reduces)


def fusable(node):
    """Whether ``node`` can be part of a group at all."""
    prim = node.prim
    if prim.kind == "elementwise":
        return node.out.aval.dtype is not None and node.params.get("device") is None
    # a reduction whose primitive declares how its parts combine can be computed in parts
    return (prim.reduce is not None and node.params.get("dtype") is None
            and node.inputs[0].ndim >= 1)


def start(node):
    """A draft holding ``node`` alone."""
    domain = node.out.shape if node.prim.kind == "elementwise" else node.inputs[0].shape
    return Draft((), (), domain, {}, False).join(node, "loop")


def can_fuse(draft, node):
    """Where ``node`` goes in ``draft``: "loop", "after", or None when it cannot join."""
    if not fusable(node):
        return None
    inner = [v for v in node.values() if v in draft.kinds]
    if not inner:
        return None
    kinds = {draft.kinds[v] for v in inner}
    outer = [v for v in node.values() if v not in draft.kinds]
    if node.prim.kind == "reduction":
        x = node.inputs[0]
        if kinds != {"local"} or x.shape != draft.domain:
            return None
        return "loop"
    if kinds == {"across"}:     # reads results that span every row: the epilogue, on them
        return "after" if math.prod(node.out.shape) < math.prod(draft.domain) else None
    if kinds != {"local"}:
        return None
    domain = draft.domain
    if not _local(node.out.shape, domain):
        if draft.reduces or not _local(domain, node.out.shape):
            return None
        domain = node.out.shape
    if not all(_fits(v.shape, domain) for v in outer):
        return None
    return "loop"


def fuse(graph, stats=None):
    """``stats`` (a dict), when given, gets ``"visits"``: the units the cycle checks walked."""
    producer = graph.producers()
    position = {n: i for i, n in enumerate(graph.nodes)}
    drafts, owner, ids = {}, {}, itertools.count()     # id -> Draft; node -> id
    units = UnitGraph()         # who depends on whom, to rule out cycles without a full walk

    def unit(v):
        p = producer.get(v)
        return None if p is None else owner.get(p, p)

    def needs(values, gids):
        """Whether any of ``values`` depends on a group in ``gids`` through nodes outside
        them (a group counts as one unit: all its members' inputs come first)."""
        return units.depends({u for u in map(unit, values) if u is not None}, gids)

    for n in graph.nodes:
        reads = n.values()
        candidates = sorted({owner[producer[v]] for v in reads if producer.get(v) in owner},
                            reverse=True)   # the most recent group first
        chosen = None
        for gid in candidates:
            draft = drafts[gid]
            place = can_fuse(draft, n)
            # an input from outside that itself needs the group would make a cycle
            if place and not needs([v for v in reads if v not in draft.kinds], {gid}):
                drafts[gid], chosen = draft.join(n, place), gid
                owner[n] = gid
                want = "local" if place == "loop" else "across"
                # the units that, of the group's members, only n reads
                only_n = units.extend(gid, {u for u in map(unit, reads) if u is not None})
                break
        for gid in candidates:      # n also reads another group over its domain: merge
            if chosen is None or gid == chosen:
                continue
            one, other = drafts[chosen], drafts[gid]
            # not when one reads the other (beyond n reading it) or through nodes outside
            # both, or n's reads of it do not line up as n's place needs
            if chosen in units.preds[gid] or gid not in only_n \
                    or any(other.kinds[v] != want for v in reads if v in other.kinds):
                continue
            merged = one.merge(other, position)
            if merged is None or units.depends(
                    (units.preds[chosen] | units.preds[gid]) - {chosen, gid}, {gid, chosen}):
                continue
            drafts[chosen] = merged
            del drafts[gid]
            for node in other.loop + other.after:
                owner[node] = chosen
            only_n -= units.preds[gid]
            units.merge(chosen, gid)
        if chosen is None:
            if fusable(n):
                chosen = next(ids)
                drafts[chosen] = start(n)
                owner[n] = chosen
            units.add(owner.get(n, n), {u for u in map(unit, reads) if u is not None})
    if stats is not None:
        stats["visits"] = stats.get("visits", 0) + units.visits
    return _assemble(graph, drafts, owner, producer)


def _assemble(graph, drafts, owner, producer):
    """The graph with each draft of two or more nodes made a ``Group``, ordered so that
    every group and every other node comes after what it reads."""
    real = {gid for gid, d in drafts.items() if len(d.loop) + len(d.after) > 1}
    position = {n: i for i, n in enumerate(graph.nodes)}

    def unit(n):
        gid = owner.get(n)
        return ("g", gid) if gid in real else ("n", position[n])
    members, needs = {}, {}
    for n in graph.nodes:
        u = unit(n)
        members.setdefault(u, []).append(n)
        for v in n.values():
            p = producer.get(v)
            if p is not None and unit(p) != u:
                needs.setdefault(u, set()).add(unit(p))
    first = {u: position[ns[0]] for u, ns in members.items()}
    users = {}
    for u, ns in needs.items():
        for w in ns:
            users.setdefault(w, []).append(u)
    waiting = {u: len(needs.get(u, ())) for u in members}
    ready = [(first[u], u) for u in members if not waiting[u]]
    heapq.heapify(ready)
    nodes, groups = [], []
    outputs = set(graph.outputs)
    readers = graph.users()
    while ready:
        _, u = heapq.heappop(ready)
        if u[0] == "g":
            d = drafts[u[1]]
            groups.append(_group(d, readers, outputs))
            nodes.extend(d.loop + d.after)
        else:
            nodes.extend(members[u])
        for w in users.get(u, ()):
            waiting[w] -= 1
            if not waiting[w]:
                heapq.heappush(ready, (first[w], w))
    return Graph(graph.inputs, nodes, graph.outputs, groups)


def _group(draft, readers, graph_outputs):
    """``readers``: value -> the nodes that read it (``Graph.users``)."""
    body = draft.loop + draft.after
    inside = {n.out for n in body}
    inputs = list(dict.fromkeys(v for n in body for v in n.values() if v not in inside))
    members = set(body)
    outputs = [n.out for n in body if n.out in graph_outputs
               or any(r not in members for r in readers.get(n.out, ()))]
    kind = "reduction" if any(n.prim.kind == "reduction" for n in body) else "elementwise"
    return Group(draft.loop, draft.after, inputs, outputs, draft.domain, kind)


def spans_rows(node):
    """Whether ``node`` is a reduction over axis 0: in a group that runs in chunks of rows,
    it is computed in parts, one per chunk, combined at the end."""
    return node.prim.kind == "reduction" and 0 in {
        d % node.inputs[0].ndim for d in node.params["dims"]}


def _kind_in(node, domain, place):
    if place == "after" or spans_rows(node):
        return "across"
    if node.prim.kind == "reduction":
        return "local" if node.params["keepdim"] else "rows"
    return "local"


def _local(shape, domain):
    """Whether a value of ``shape`` lines up with ``domain``'s rows: same rank, the same
    number of rows, each other axis full or 1."""
    return len(shape) == len(domain) and all(
        s == d or (s == 1 and i > 0) for i, (s, d) in enumerate(zip(shape, domain)))


def _fits(shape, domain):
    """Whether ``shape`` broadcasts to ``domain``."""
    if all(type(d) is int for d in shape) and all(type(d) is int for d in domain):
        # NumPy's rule, without the cost of a call into it for every candidate
        return len(shape) <= len(domain) and all(
            s == d or s == 1 for s, d in zip(reversed(shape), reversed(domain)))
    try:
        return np.broadcast_shapes(shape, domain) == tuple(domain)
    except ValueError:
        return False
