"""Helpers shared by the passes: renaming a node's inputs."""
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
