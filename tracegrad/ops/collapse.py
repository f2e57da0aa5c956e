"""One backward node for a composite, as PyTorch has one for the op it stands for.

``F.mse_loss(x, y).grad_fn`` is PyTorch's ``MseLossBackward0`` and its ``next_functions``
lead straight to ``x`` and ``y``; tracegrad's mse_loss is a composite of primitives whose
nodes would show as a chain (``SumBackward0``, ``MulBackward0``, ``SubBackward0``). Programs
and tutorials print these walks, so ``collapsed`` runs a composite in eager mode as one
node:

- the composite runs as it is, recording its primitives' nodes (its *inner graph*);
- its results come back as new tensors (same data, same version counter) of one
  ``_Collapsed`` node, named by the caller, whose ``next_functions`` are the edges of its
  floating tensor arguments, one per argument, in order;
- that node's ``apply`` runs the inner graph backward, from the composite's results down to
  the arguments' edges and no further (``_inner_backward``): each argument receives the
  gradient that reaches its edge, which is exactly this op's share (a path from one
  argument to another outside the composite is not followed, so nothing is counted
  twice). The inner graph is kept until ``release``. Under ``create_graph`` the gradients
  are built from tracegrad ops over saved tensors that are the arguments themselves, so
  they lead back through the arguments' history and differentiate again.

A composite takes every tensor it differentiates as an argument (a tensor it reached
otherwise would be a leaf of the inner graph, and its gradient is refused with an error).
Inside a trace (``tracegrad.compile``) and without grad, composites run as they are: the
compiler sees their primitives (and fuses them), and nothing is recorded. A composite run
inside another collapsed one is not collapsed again: only the outer node is visible.
(The names here are private: the profiler reports every public function of ``tracegrad.ops``
as an op.)
"""
import heapq
import threading

from .. import _hooks
from ..autograd import grad_mode
from ..autograd.graph import FREED_ERROR, AccumulateGrad, Node, grad_accumulator
from ..tensor import Tensor
from . import declare

_gm = grad_mode._state
_hook_state = _hooks.state


class _Local(threading.local):
    depth = 0       # collapsed composites running now in this thread


_local = _Local()


def _edge(t):
    if t._base is not None:
        return t._grad_edge()
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    return (grad_accumulator(t), 0)


class _Collapsed(Node):
    """A composite's results as one node; its subclasses carry PyTorch's names."""
    __slots__ = ("_outs", "_stops")

    def apply(self, grads):
        outs = self._outs
        if outs is None:
            raise RuntimeError(FREED_ERROR)
        roots, seeds = [], []
        for o, g in zip(outs, grads):
            if o is not None and g is not None:
                roots.append(o)
                seeds.append(g)
        if not roots:
            return [None] * len(self.next_functions)
        return _inner_backward(roots, seeds, self._stops, len(self.next_functions))

    def release(self):
        self._outs = self._stops = None

    @property
    def inner(self):
        """The nodes of the composite's own results: where its primitives' graph starts
        (empty once released)."""
        return tuple(o._grad_fn for o in self._outs or () if o is not None)


def _inner_backward(roots, seeds, stops, n_inputs):
    """The inner graph run backward from ``roots`` (with gradients ``seeds``) down to the
    arguments' edges: ``stops`` maps an edge's node to ``(output_nr, k)`` per argument ``k``
    ending there. The engine's order (the latest node first, from a heap of the nodes a
    gradient has reached), on only the nodes in between, so the cost does not grow with the
    graph below. Grad mode is the engine's (on under ``create_graph``)."""
    from ..autograd.engine import _materialize, _settled, _sum, lazily_applied
    buffers, heap = {}, []
    result = [None] * n_inputs

    def send(node, nr, g):
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * len(node._out_meta)
            heapq.heappush(heap, (-node._seq, id(node), node))
        buf[nr] = g if buf[nr] is None else _sum(buf[nr], g)
    for o, g in zip(roots, seeds):
        send(*_edge(o), g)
    while heap:
        node = heapq.heappop(heap)[2]
        grads = _settled(buffers.pop(node))     # slices' gradients made one (LAZY_VJP)
        ends = stops.get(node)
        if ends is not None:
            taken = set()
            for nr, k in ends:      # one tensor passed twice: its gradient goes once
                if nr not in taken:
                    taken.add(nr)
                    result[k] = grads[nr]
            continue
        if type(node) is AccumulateGrad:
            raise RuntimeError("a collapsed composite reached a tensor it was not given as an "
                               "argument; pass every tensor it differentiates as one")
        if node._materialize and any(g is None for g in grads):
            grads = _materialize(node, grads)
        out, _ = lazily_applied(node, grads)
        for (nxt, nr), g in zip(node.next_functions, out):
            if g is not None and nxt is not None:
                send(nxt, nr, g)
    return result


_CLASSES = {}       # name -> the _Collapsed subclass of that name


def _node_class(label):
    cls = _CLASSES.get(label)
    if cls is None:
        cls = _CLASSES[label] = type(label, (_Collapsed,), {"__slots__": ()})
    return cls


def _active():
    """Whether a call now would collapse: eager, grad on, not inside another collapse."""
    return _gm.grad_enabled and _local.depth == 0 and _hook_state.tracer is None


def _run(label, fn, args, kwargs):
    """``fn(*args, **kwargs)`` as one node named ``label`` (see the module docstring), or
    plainly where no floating argument requires grad."""
    edges, stops = [], {}
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor) and a.dtype.is_floating_point:
            if a._requires_grad:
                edge = _edge(a)
                stops.setdefault(edge[0], []).append((edge[1], len(edges)))
                edges.append(edge)
            else:
                edges.append((None, 0))
    if not stops:
        return _plain(fn, args, kwargs)
    _local.depth += 1
    try:
        out = fn(*args, **kwargs)
    finally:
        _local.depth -= 1
    single = isinstance(out, Tensor)
    outs = (out,) if single else tuple(out)
    kept, meta = [], []
    for o in outs:
        # no history of its own, or an argument returned as it is
        if not isinstance(o, Tensor) or o._grad_fn is None or o._grad_fn in stops:
            kept.append(None)
            meta.append(((), None, None) if not isinstance(o, Tensor) else
                        (o._data.shape, o._data.dtype, None))
        else:
            kept.append(o)
            meta.append((o._data.shape, o._data.dtype, None))
    if all(k is None for k in kept):
        return out
    node = _node_class(label)(tuple(edges), tuple(meta))
    node._outs = tuple(kept)
    node._stops = stops
    results = [o if k is None else Tensor._make(k._data, grad_fn=node, vc=k._vc, output_nr=i,
                                                dtype=k.dtype)
               for i, (o, k) in enumerate(zip(outs, kept))]
    if single:
        return results[0]
    return type(out)(results) if type(out) in (tuple, list) else type(out)(*results)


def _plain(fn, args, kwargs):
    _local.depth += 1       # nothing inside records a node of its own name either
    try:
        return fn(*args, **kwargs)
    finally:
        _local.depth -= 1


# ``declare.backward_name``'s composites collapse through these (declare sits below)
declare.collapse_active, declare.collapse_run = _active, _run
