"""Dead code elimination: drop nodes whose value no output needs.

Random nodes are kept even when unused: a draw advances its generator, and
skipping it would change every later draw.

Before::                                  After::

    graph(x:f32[3]) {                         graph(x:f32[3]) {
      a:f32[3] = exp x                          b:f32[3] = neg x
      b:f32[3] = neg x                          return (b)
      return (b)                              }
    }
"""
from ..ir import Graph, Value


def dce(graph):
    live = set(graph.outputs)
    kept = []
    for n in reversed(graph.nodes):
        if n.out in live or n.op == "random":
            kept.append(n)
            live.update(v for v in n.inputs if type(v) is Value)
    return Graph(graph.inputs, reversed(kept), graph.outputs)
