"""Sizes as values: an elementwise op's symbolic scalar operand becomes a ``size`` node.

A dynamic trace leaves sizes of the call in the graph as scalars (``mean``'s count
``s0``, a VJP's ``g / s0``). Fused kernels take arrays and typed literals, never the
driver's variables, so each such scalar becomes a 0-d array the driver computes from
the call's sizes, in the dtype the op computes in; a kernel reads it like any input.

Before::                                   After::

    graph(x:f32[s0,8]) {                       graph(x:f32[s0,8]) {
      a:f32[] = sum x  dims=(0, 1)               a:f32[] = sum x  dims=(0, 1)
      b:f32[] = div a 8*s0                       n:f32[] = size  value=8*s0 dtype=float32
      return (b)                                 b:f32[] = div a n
    }                                            return (b)
                                               }
"""
from .. import dtypes
from ..ir import Aval, Graph, Node, Value
from ..symbolic import SymInt


def sizes(graph):
    nodes, made, changed = [], {}, False
    for n in graph.nodes:
        if n.prim.kind == "elementwise" and any(type(v) is SymInt for v in n.inputs):
            dtype = n.out.aval.dtype
            if dtype is dtypes.bool:        # a comparison: the size as an integer
                dtype = dtypes.int64
            ins = []
            for v in n.inputs:
                if type(v) is SymInt:
                    key = (v.poly, dtype)
                    if key not in made:
                        made[key] = Value(Aval((), dtype))
                        nodes.append(Node("size", [], {"value": v, "dtype": dtype},
                                          made[key], n.site))
                    v = made[key]
                ins.append(v)
            n = Node(n.op, ins, n.params, n.out, n.site)
            changed = True
        nodes.append(n)
    return Graph(graph.inputs, nodes, graph.outputs) if changed else graph
