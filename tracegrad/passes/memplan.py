"""Memory plan: where the values that fused groups write live.

A group writes its outputs into arrays the calling function hands it. An
output that leaves the function (a result, a value saved for backward, a
gradient) needs a fresh array each call. One that only later statements of
the function read lives in a *slot* of the variant's workspace, kept from call
to call (no allocation, no fresh pages), and values whose lives do not overlap
share a slot when shape and dtype match. A value's life runs to the last use
of it or of any view of it (a reshape, permute or index of it may alias it).
Values die at their last use: codegen deletes them there.

Before (no plan)::                        After (``plan``)::

    graph(x:f32[4096,64]) {                   slots: slot0 f32[4096,64]
      fused0 ... (x) -> (b) {                 b -> slot0, d -> slot0
      ...                                     (b dies in fused1, d is born in fused2)
      fused1 ... (b) -> (c) {
      fused2 ... (c) -> (d) {
      ...
"""
from ..ir import Graph
from .fuse import spans_rows


class Plan:
    """``slots``: slot name -> (shape, NumPy dtype); ``slot_of``: value -> slot name."""
    __slots__ = ("slots", "slot_of")

    def __init__(self, slots, slot_of):
        self.slots, self.slot_of = dict(slots), dict(slot_of)

    def __str__(self):
        return "\n".join(f"{name}: {shape} {dtype}" for name, (shape, dtype) in self.slots.items())


def may_alias(node):
    """Whether a node's result may share memory with its inputs (a view)."""
    return node.prim.kind not in ("elementwise", "reduction", "matmul") \
        or node.op == "stop_gradient"


def written(group):
    """The outputs a group writes into arrays it is handed (not partial reductions)."""
    partial = {n.out for n in group.loop if spans_rows(n)}
    loop = {n.out for n in group.loop}
    return [v for v in group.outputs if v in loop and v not in partial]


def memplan(graph):
    walk = graph.units()
    units = [g for g, _ in walk]
    unit_of = {n: u for u, (_, nodes) in enumerate(walk) for n in nodes}
    roots = {}                          # value -> the values whose memory it may share
    for n in graph.nodes:
        if units[unit_of[n]] is None and may_alias(n):
            roots[n.out] = {n.out}.union(*(roots.get(v, {v}) for v in n.values()))
    end, escapes = {}, set()
    for n in graph.nodes:
        for v in n.values():
            for r in roots.get(v, (v,)):
                end[r] = max(end.get(r, -1), unit_of[n])
    for v in graph.outputs:
        escapes.update(roots.get(v, (v,)))
    # busy: last unit -> [(key, name)] in the order taken; a slot is free from the unit
    # after its value's last use (a value lives at least through the unit that writes it)
    slots, slot_of, free, busy = {}, {}, {}, {}
    for u, g in enumerate(units):
        for key, name in busy.pop(u - 1, ()):
            free.setdefault(key, []).append(name)
        if g is None:
            continue
        for v in written(g):
            if v in escapes or v not in end:
                continue
            key = (v.shape, v.dtype.np)
            name = free.get(key, []).pop() if free.get(key) else f"slot{len(slots)}"
            slots.setdefault(name, key)
            slot_of[v] = name
            busy.setdefault(end[v], []).append((key, name))
    return Graph(graph.inputs, graph.nodes, graph.outputs, graph.groups,
                 Plan(slots, slot_of))
