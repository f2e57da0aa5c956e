"""Common subexpression elimination: one node for each distinct computation.

Two nodes are the same when op, inputs and params agree (random draws never
are). Later uses are renamed to the first.

Before::                                  After::

    graph(x:f32[3]) {                         graph(x:f32[3]) {
      a:f32[3] = exp x                          a:f32[3] = exp x
      b:f32[3] = exp x                          c:f32[3] = add a a
      c:f32[3] = add a b                        return (c)
      return (c)                              }
    }
"""
from ..ir import Graph, Value
from .rewrite import substitute


def _key(n, sub):
    ins = tuple(sub.get(v, v) if type(v) is Value else (type(v), repr(v)) for v in n.inputs)
    try:
        params = tuple(sorted(n.params.items()))
        hash(params)
    except TypeError:       # an unhashable param: leave the node alone
        return None
    return (n.op, ins, params)


def cse(graph):
    seen, sub, nodes = {}, {}, []
    for n in graph.nodes:
        key = _key(n, sub) if n.op != "random" else None
        first = seen.get(key) if key is not None else None
        if first is not None and first.out.aval == n.out.aval:
            sub[n.out] = first.out
            continue
        n = substitute(n, sub)
        if key is not None:
            seen[key] = n
        nodes.append(n)
    return Graph(graph.inputs, nodes, [sub.get(v, v) for v in graph.outputs])
