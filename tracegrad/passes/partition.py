"""Split a joint forward+backward graph into a forward and a backward graph.

Nodes that do not depend on a cotangent go to the forward; the rest to the
backward. The forward returns the user's outputs followed by the *residuals*:
the forward values (inputs included) that the backward reads. The backward
takes the residuals, then the cotangents, and returns the gradients.

Joint (``n_primal_in=1``, ``n_primal_out=1``)::

    graph(x:f32[3], d_b:f32[]) {
      a:f32[3] = exp x
      b:f32[] = sum a  dims=(0,) dtype=None keepdim=False
      c:f32[3] = broadcast_to d_b  shape=(3,)
      d_x:f32[3] = mul c a
      return (b, d_x)
    }

Forward and backward::

    forward(x:f32[3]) {                   backward(a:f32[3], d_b:f32[]) {
      a:f32[3] = exp x                      c:f32[3] = broadcast_to d_b  shape=(3,)
      b:f32[] = sum a  ...                  d_x:f32[3] = mul c a
      return (b, a)                         return (d_x)
    }                                     }
"""
from ..ir import Graph, Value
from .dce import dce


def partition(joint, n_primal_in, n_primal_out):
    """``(forward, backward, residuals)`` for a joint graph from ``autodiff``."""
    tangent = set(joint.inputs[n_primal_in:])
    fwd_nodes, bwd_nodes = [], []
    for n in joint.nodes:
        if any(type(v) is Value and v in tangent for v in n.inputs):
            tangent.add(n.out)
            bwd_nodes.append(n)
        else:
            fwd_nodes.append(n)
    grads = joint.outputs[n_primal_out:]
    backward = dce(Graph((), bwd_nodes, grads))
    defined = {n.out for n in backward.nodes}
    residuals, seen = [], set()
    for n in backward.nodes:
        for v in n.inputs:
            _note(v, tangent, defined, residuals, seen)
    for v in grads:
        _note(v, tangent, defined, residuals, seen)
    cotangents = list(joint.inputs[n_primal_in:])
    forward = dce(Graph(joint.inputs[:n_primal_in], fwd_nodes,
                        list(joint.outputs[:n_primal_out]) + residuals))
    backward = Graph(residuals + cotangents, backward.nodes, grads)
    return forward, backward, residuals


def _note(v, tangent, defined, residuals, seen):
    if type(v) is Value and v not in tangent and v not in defined and v not in seen:
        seen.add(v)
        residuals.append(v)
