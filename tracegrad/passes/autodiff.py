"""Reverse-mode autodiff on the IR, with the very VJP rules eager uses.

``autodiff(graph, wrt, seeds)`` walks the forward nodes in reverse and calls
each primitive's rule on placeholder tensors under a symbolic tracer, so the
rule's tracegrad ops become IR nodes. Broadcasting is undone by
``sum_to_shape`` and dtypes restored, exactly as ``PrimNode.apply`` does.

Before (``wrt=[0]``, ``seeds=[0]``)::

    graph(x:f32[3]) {
      a:f32[3] = mul x x
      b:f32[] = sum a  dims=(0,) dtype=None keepdim=False
      return (b)
    }

After: the joint graph takes the cotangent of each seed output as an extra
input and returns the gradient of each ``wrt`` input after the outputs::

    graph(x:f32[3], d_b:f32[]) {
      a:f32[3] = mul x x
      b:f32[] = sum a  dims=(0,) dtype=None keepdim=False
      c:f32[3] = broadcast_to d_b  shape=(3,)
      d:f32[3] = mul c x
      e:f32[3] = mul c x
      d_x:f32[3] = add d e
      return (b, d_x)
    }
"""
from ..autograd import grad_mode
from ..ir import Graph, Value
from ..ops.core import sum_to_shape, to_copy
from ..ops.elementwise import add
from ..ops.index_ops import index_p
from ..ops.slice_grads import SliceGrads
from ..trace import Tracer


def active_values(graph, wrt):
    """Values that depend differentiably on the inputs ``wrt``."""
    active = {graph.inputs[i] for i in wrt}
    for n in graph.nodes:
        if n.prim.vjp is None or not n.out.aval.dtype.is_floating_point:
            continue
        if any(type(v) is Value and v in active for v in n.inputs):
            active.add(n.out)
    return active


def autodiff(graph, wrt, seeds, names=None):
    """``(joint, where, hints)``: the joint forward+backward graph, for each ``wrt`` input
    the index of its gradient among the joint outputs (None where no gradient flows), and
    name hints: ``names`` (for the forward's own values: an unnamed result is ``out``) and
    those of the gradients (``d_hidden`` for ``hidden``), which the namers of printers and
    codegen take; values keep the names they were built with."""
    names = names or {}
    hints = {}
    active = active_values(graph, wrt)
    tr = Tracer(symbolic=True)
    tr.nodes = list(graph.nodes)
    holders = {}

    def ph(v):
        t = holders.get(v)
        if t is None:
            t = holders[v] = tr.placeholder(v)
        return t

    cotangents = []
    ct = {}
    # value -> [(cotangent, spec)] of the basic slices read from it: added up in one
    # buffer (index_backward_sum) when the value's cotangent is needed, rather than a
    # full-size index_backward and add per slice (an LSTM's unbind over time steps)
    slices = {}

    def gather_slices(v):
        parts = slices.pop(v, None)
        if parts is None:
            return
        r = SliceGrads(parts, v.aval.shape).tensor()
        ct[v] = add(ct[v], r) if v in ct else r

    with grad_mode.no_grad(), tr.active():
        for i in seeds:
            v = graph.outputs[i]
            name = v.name or names.get(v)
            c = Value(v.aval, "d_" + name if name else None)
            cotangents.append(c)
            if v in active:
                t = ph(c)
                ct[v] = add(ct[v], t) if v in ct else t
        for n in reversed(graph.nodes):
            tr.site = n.site            # the backward of a line is listed under that line
            gather_slices(n.out)
            g = ct.pop(n.out, None)
            if g is None:
                continue
            _name(tr, g, n.out, names, hints)
            need = [type(v) is Value and v in active for v in n.inputs]
            if n.prim is index_p and len(n.inputs) == 1 and need[0]:
                slices.setdefault(n.inputs[0], []).append((g, n.params["spec"]))
                continue
            for v, r, wanted in zip(n.inputs, _rules(n, g, ph, need), need):
                if r is None or not wanted:
                    continue
                if r.shape != v.aval.shape:
                    r = sum_to_shape(r, v.aval.shape)
                if r.dtype is not v.aval.dtype:
                    r = to_copy(r, dtype=v.aval.dtype)
                ct[v] = add(ct[v], r) if v in ct else r
    outputs = list(graph.outputs)
    where = []
    with grad_mode.no_grad(), tr.active():
        for i in wrt:
            gather_slices(graph.inputs[i])
    for i in wrt:
        v = graph.inputs[i]
        g = ct.get(v)
        if g is None:
            where.append(None)
            continue
        _name(tr, g, v, names, hints)
        gv = tr.value_of(g)
        where.append(len(outputs))
        outputs.append(gv)
    return Graph(list(graph.inputs) + cotangents, tr.nodes, outputs), where, {**names, **hints}


def _rules(node, g, ph, need):
    prim, params = node.prim, node.params
    ins = [ph(v) if type(v) is Value else v for v in node.inputs]
    out = ph(node.out)
    if prim.vjp_all:
        return prim.vjp(g, *ins, out=out, **params)
    return [rule(g, *ins, out=out, **params) if rule is not None and wanted else None
            for rule, wanted in zip(prim.vjp, need)]


def _name(tr, g, v, names, hints):
    """Hint the gradient of ``v``'s name after it: ``d_hidden`` for ``hidden``."""
    gv = tr.value_of(g)
    name = v.name or names.get(v)
    if name and gv.name is None and gv not in hints:
        hints[gv] = "d_" + name
