"""Helpers shared by the passes: renaming a node's inputs, counting a value's reads."""
from collections import Counter

from ..ir import Node, Value


def substitute(node, sub):
    """``node`` with its inputs renamed through ``sub`` (the same node when nothing changes)."""
    if not sub or not any(type(v) is Value and v in sub for v in node.inputs):
        return node
    ins = [sub.get(v, v) if type(v) is Value else v for v in node.inputs]
    return Node(node.op, ins, node.params, node.out, node.site)


def resolve(v, sub):
    """Follow renames to their end."""
    while type(v) is Value and v in sub:
        v = sub[v]
    return v


def read_counts(graph):
    """Value -> how many times it is read, by nodes (once per operand) and as an output (a
    ``Counter``: 0 for a value nothing reads)."""
    count = Counter(v for n in graph.nodes for v in n.values())
    count.update(graph.outputs)
    return count
