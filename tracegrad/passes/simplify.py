"""Algebraic simplification and constant folding.

Rewrites that keep every value bit for bit (``x * 1``, ``x + 0`` where the
other operand already has the result's shape and dtype, reshapes, broadcasts,
permutes and converts that change nothing, a permute undoing a permute) and
folding of nodes whose inputs are all small constants.

Before::                                  After::

    graph(x:f32[3]) {                         graph(x:f32[3]) {
      a:f32[3] = mul x 1                        c:f32[3] = exp x
      b:f32[3] = reshape a  shape=(3,)          return (c)
      c:f32[3] = exp b                        }
      return (c)
    }
"""
import numpy as np

from ..ir import Const, Graph, Node, Value
from .rewrite import resolve, substitute

FOLD_LIMIT = 4096       # constants up to this many elements are folded


def simplify(graph):
    sub, nodes, defs = {}, [], {}
    for n in graph.nodes:
        n = substitute(n, sub)
        same = _identity(n, defs)
        if same is not None:
            sub[n.out] = resolve(same, sub)
            continue
        folded = _fold(n, defs)
        if folded is not None:
            n = folded
        defs[n.out] = n
        nodes.append(n)
    return Graph(graph.inputs, nodes, [resolve(v, sub) for v in graph.outputs])


def _is(x, number):
    return type(x) in (int, float) and x == number and not (number == 0 and type(x) is float
                                                            and np.signbit(x))


def _identity(n, defs):
    """The value ``n`` is equal to, when it computes nothing new."""
    op, ins, p, aval = n.op, n.inputs, n.params, n.out.aval

    def keeps(v):
        return type(v) is Value and v.aval == aval
    if op == "mul":
        if _is(ins[1], 1) and keeps(ins[0]):
            return ins[0]
        if _is(ins[0], 1) and keeps(ins[1]):
            return ins[1]
    if op == "add":
        if _is(ins[1], 0) and keeps(ins[0]):
            return ins[0]
        if _is(ins[0], 0) and keeps(ins[1]):
            return ins[1]
    if op in ("sub", "div") and _is(ins[1], 0 if op == "sub" else 1) and keeps(ins[0]):
        return ins[0]
    if op in ("reshape", "broadcast_to", "stop_gradient") and keeps(ins[0]) \
            and (op != "stop_gradient" or not aval.dtype.is_floating_point):
        return ins[0]
    if op == "pow_scalar" and _is(p["exponent"], 1) and keeps(ins[0]):
        return ins[0]
    if op == "permute" and p["dims"] == tuple(range(len(p["dims"]))):
        return ins[0]
    if op == "convert" and keeps(ins[0]) and not p.get("copy") and p.get("device") is None:
        return ins[0]
    if op == "permute":
        inner = defs.get(ins[0])
        if inner is not None and inner.op == "permute":
            a, b = inner.params["dims"], p["dims"]
            if tuple(a[i] for i in b) == tuple(range(len(b))):
                return inner.inputs[0]
    if op == "reshape":
        inner = defs.get(ins[0])
        if inner is not None and inner.op == "reshape" and inner.inputs[0].aval == aval:
            return inner.inputs[0]
    return None


def _fold(n, defs):
    """A constant node for ``n`` when all its inputs are small constants."""
    if n.op in ("constant", "random") or n.out.aval.dtype is None:
        return None
    arrays = []
    for v in n.inputs:
        if type(v) is not Value:
            arrays.append(v)
            continue
        d = defs.get(v)
        if d is None or d.op != "constant" or d.params["value"].array.size > FOLD_LIMIT:
            return None
        arrays.append(d.params["value"].array)
    if not any(type(v) is Value for v in n.inputs):
        return None
    from ..ops.core import Tensor, apply_plain
    with np.errstate(all="ignore"):
        t = apply_plain(n.prim, [Tensor._make(a) if isinstance(a, np.ndarray) else a
                                 for a in arrays], n.params)
    return Node("constant", [], {"value": Const(t._data)}, n.out, n.site)
