"""The backward engine: ``backward`` and ``grad`` over the graph of ``Node``s.

One pass finds every node reachable from the roots; they then run newest
first. A node is always made after the nodes that produced its inputs, so
that order is topological: every node runs after all its gradients have
arrived (PyTorch's engine also runs newest-first on one device). Before a node
runs: its tensors' hooks, ``retain_grad``, and its pre-hooks; after it: its
post-hooks, anomaly checks, and, without ``retain_graph``, freeing of its
saved tensors. A leaf's gradient lands in ``.grad`` through ``accumulate``.

The per-call cost matters for small steps (a compiled function's call is a few
dozen microseconds), so the common cases take short paths: a node with no hooks
is applied directly, and a graph of one node over leaves (a compiled function's
result, one op on parameters) runs without finding and ordering the graph. A node with
hooks (or under the profiler or anomaly mode) runs through ``node_run``.
"""
import threading

import numpy as np

from .. import _hooks
from .._hooks import state as _hook_state
from . import grad_mode, graph
from .accumulate import accumulate_grad, tensor_type
from .anomaly_mode import _Anomaly
from .graph import AccumulateGrad
from .node_run import _materialize, _run_node   # (the profiler's hook wraps engine._run_node)

_gm = grad_mode._state
# The profiler's wrapper around ``_run_node`` while it records, else None. Checked once per
# backward call: when set, every node takes the general path so that it can be timed.
node_hook = None
# prim -> rule(node, grads) giving a node's input gradients lazily (a ``LazyGradient``: the
# slices of a basic index, ops/index_ops.py), or None to apply the node as usual
LAZY_VJP = {}


class LazyGradient:
    """A gradient not made yet: the gradients that reach one node output add up in it
    (``plus``), and ``tensor()`` makes the sum when the node runs."""
    __slots__ = ()

    def plus(self, other):
        raise NotImplementedError

    def tensor(self):
        raise NotImplementedError
# ``tracegrad._vmap`` sets this while a vmap runs: ``grad`` of batched tensors goes there (the
# physical tensors' gradients, per example); it returns None where none takes part
batched_grad = None


def _as_tuple(x):
    if x is None:
        return ()
    if isinstance(x, tensor_type()):
        return (x,)
    return tuple(x)


def _make_root_grads(outputs, grad_outputs):
    Tensor = tensor_type()
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            data = out._data
            if data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not out.dtype.is_floating_point:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs "
                                   f"but got {out.dtype}")
            if type(data) is np.ndarray and _hooks.tracer is None:    # ones_like, in short
                g = Tensor._make(np.array(1, data.dtype) if data.ndim == 0
                                 else np.ones(data.shape, data.dtype))
            else:
                from ..creation import ones_like
                g = ones_like(out)
        elif not isinstance(g, Tensor):
            from ..creation import full_like
            g = full_like(out, g)
        elif g._data.shape != out._data.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and "
                               f"output[{i}] has a shape of {out.shape}.")
        grads.append(g)
    return grads


def _check_outputs(outputs):
    for i, out in enumerate(outputs):
        if not out._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a "
                               f"grad_fn")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves."""
    outputs = _as_tuple(tensors)
    if grad_variables is not None:
        grad_tensors = grad_variables
    grads = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(grads)} tensors and {len(outputs)} gradients")
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    _check_outputs(outputs)
    root_grads = _make_root_grads(outputs, grads)
    if retain_graph is None:
        retain_graph = create_graph
    stack = _queued.stack
    if stack is None:
        stack = _queued.stack = []
    stack.append([])
    try:
        run(outputs, root_grads, retain_graph, create_graph, inputs, accumulate=True)
        while stack[-1]:            # callbacks may queue more callbacks
            stack[-1].pop(0)()
    finally:
        stack.pop()


# ``Tensor.backward`` runs this: set from here, as the tensor sits below the engine
graph.run_backward = backward


class _Queued(threading.local):
    stack = None        # per ``backward`` call running in this thread, its queued callbacks


_queued = _Queued()


def queue_callback(callback):
    """PyTorch's ``Variable._execution_engine.queue_callback``: ``callback()`` runs once the
    ``backward`` call now running in this thread has finished with the graph (DDP waits for
    its gradient all-reduces there). Only valid during a backward."""
    if not _queued.stack:
        raise RuntimeError("queue_callback can only be called during the backward pass")
    _queued.stack[-1].append(callback)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``."""
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if batched_grad is not None:    # inside vmap: gradients of its batched tensors
        done = batched_grad(outputs, inputs, grad_outputs, retain_graph=retain_graph,
                            create_graph=create_graph, allow_unused=allow_unused)
        if done is not None:
            return done
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True")
    grads = _as_tuple(grad_outputs) if grad_outputs is not None else (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"grad_outputs must have the same length as outputs: got "
                           f"{len(grads)} and {len(outputs)}")
    if is_grads_batched:
        return _grads_batched(outputs, inputs, grads, retain_graph, create_graph, allow_unused,
                              materialize_grads)
    for t in inputs:
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    _check_outputs(outputs)
    root_grads = _make_root_grads(outputs, grads)
    if retain_graph is None:
        retain_graph = create_graph
    result = run(outputs, root_grads, retain_graph, create_graph, inputs, accumulate=False)
    out = []
    for t, g in zip(inputs, result):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            if materialize_grads:
                from ..creation import zeros_like
                g = zeros_like(t)
        out.append(g)
    return tuple(out)


def _grads_batched(outputs, inputs, grads, retain_graph, create_graph, allow_unused,
                   materialize_grads):
    """``grad(..., is_grads_batched=True)``: the first dimension of each grad_output is a
    batch. One backward per entry, over the same graph, and each input's gradients stacked
    along a new first dimension (PyTorch vmaps the backward; the gradients are the same)."""
    from ..creation import zeros, zeros_like
    from ..ops.shape_ops import stack
    for k, (o, g) in enumerate(zip(outputs, grads)):
        if g is None:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if tuple(g.shape[1:]) != tuple(o.shape):
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{k}] has a shape of {g.shape[1:]} and output[{k}] has "
                f"a shape of {o.shape}. If you only want some tensors in `grad_output` to be "
                "considered batched, consider using vmap.")
    batch = grads[0].shape[0] if grads else 0
    if any(g.shape[0] != batch for g in grads):
        raise RuntimeError(f"is_grads_batched=True: every grad_output needs the same batch "
                           f"size, got {[g.shape[0] for g in grads]}")
    if retain_graph is None:
        retain_graph = create_graph
    rows = [grad(outputs, inputs, tuple(g[b] for g in grads),
                 retain_graph=retain_graph or b < batch - 1, create_graph=create_graph,
                 allow_unused=True) for b in range(batch)]
    out = []
    for i, t in enumerate(inputs):
        found = [row[i] for row in rows]
        if batch and all(g is None for g in found):
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            out.append(zeros_like(t) if materialize_grads else None)
            continue
        if not batch:
            out.append(zeros((0, *t.shape), dtype=t.dtype, device=t.device))
            continue
        out.append(stack([zeros_like(t) if g is None else g for g in found]))
    return tuple(out)


def _collect(roots):
    """Every node reachable from ``roots``."""
    seen = {n for n in roots if n is not None}
    stack = list(seen)
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _needed(order, targets):
    """The nodes from which some target node can be reached: only they must run. ``order`` is
    newest first, so walking it backwards meets every node after all of its next nodes."""
    needed = set()
    for node in reversed(order):
        for nxt, _ in node.next_functions:
            if nxt is not None and (nxt in targets or nxt in needed):
                needed.add(node)
                break
    return needed


def run(outputs, root_grads, retain_graph, create_graph, inputs, accumulate):
    """Run the graph below ``outputs``; return the gradients captured for ``inputs``."""
    plain = not _Anomaly.enabled and node_hook is None
    if plain and len(outputs) == 1:
        captured = _run_one_node(outputs[0], root_grads, retain_graph, create_graph, inputs,
                                 accumulate)
        if captured is not None:
            return captured
    root_edges = [t._grad_edge() for t in outputs]
    buffers = {}
    for (node, nr), g in zip(root_edges, root_grads):
        buf = buffers.setdefault(node, [None] * node.num_outputs)
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    order = sorted(_collect([n for n, _ in root_edges]), key=_seq_of, reverse=True)

    captures = {}          # node -> {output_nr: [indices into inputs]}
    if inputs is not None:
        for k, t in enumerate(inputs):
            node, nr = t._grad_edge()
            if node is not None:
                captures.setdefault(node, {}).setdefault(nr, []).append(k)
        needed = _needed(order, captures)
    else:
        needed = None
    captured = [None] * (len(inputs) if inputs is not None else 0)

    # Without the profiler or anomaly mode, a node with no hooks takes a short path: a plain
    # node is applied, a leaf's AccumulateGrad only captures and accumulates.
    selective = inputs is not None
    lazy = False            # some node gave a LazyGradient in this run
    prev_mode = _gm.grad_enabled
    _gm.grad_enabled = create_graph
    try:
        for node in order:
            grads = buffers.pop(node, None)
            if grads is None:
                continue        # no gradient reached this node
            if lazy:
                grads = _settled(grads)
            if not (plain and node._tensor_pre_hooks is None and node._pre_hooks is None
                    and node._retain_grad is None and node._post_hooks is None):
                out = (node_hook or _run_node)(node, grads, captures.get(node), captured, inputs,
                                               needed, accumulate, retain_graph, create_graph)
            elif type(node) is AccumulateGrad:
                if node.variable._backward_hooks:
                    _run_node(node, grads, captures.get(node), captured, inputs, needed,
                              accumulate, retain_graph, create_graph)
                    continue
                cap = captures.get(node)
                if cap is not None:
                    for k in cap[0]:
                        captured[k] = grads[0]
                if accumulate and (inputs is None or cap is not None) and grads[0] is not None:
                    accumulate_grad(node.variable, grads, create_graph)
                continue
            elif selective and (node in captures or node not in needed):
                out = _run_node(node, grads, captures.get(node), captured, inputs, needed,
                                accumulate, retain_graph, create_graph)
            else:
                if node._materialize:
                    for g in grads:
                        if g is None:
                            grads = _materialize(node, grads)
                            break
                out, was_lazy = lazily_applied(node, grads)
                lazy = lazy or was_lazy
                if not retain_graph:
                    node.release()
            for (nxt, nr), g in zip(node.next_functions, out):
                if g is None or nxt is None:
                    continue
                buf = buffers.get(nxt)
                if buf is None:
                    buf = buffers[nxt] = [None] * len(nxt._out_meta)
                    buf[nr] = g
                elif buf[nr] is None:
                    buf[nr] = g
                else:
                    buf[nr] = _sum(buf[nr], g)
            out = g = None      # accumulate_grad counts references: hold no gradient here
    finally:
        _gm.grad_enabled = prev_mode
    return captured


def _run_one_node(out, root_grads, retain_graph, create_graph, inputs, accumulate):
    """``run`` for the commonest small graph: one node whose inputs are all leaves (a compiled
    function's result, one op on parameters), with no hooks but post-accumulate ones. It does
    what the general loop would do, without finding and ordering the graph. None when the
    graph is not of that shape, or an input is not a leaf: then the general loop runs."""
    node = out._grad_fn
    if (node is None or out._base is not None or node._tensor_pre_hooks is not None
            or node._pre_hooks is not None or node._retain_grad is not None
            or node._post_hooks is not None):
        return None
    targets = None              # per input, its AccumulateGrad (None: not in any graph)
    if inputs is not None:
        targets = []
        for t in inputs:
            if t._grad_fn is not None or t._base is not None:
                return None
            targets.append(t._grad_acc() if t._grad_acc is not None else None)
    edges = node.next_functions
    reaches = targets is None   # some input's AccumulateGrad is below the node
    for nxt, _ in edges:
        if nxt is None:
            continue
        if (type(nxt) is not AccumulateGrad or nxt._pre_hooks is not None
                or nxt._post_hooks is not None or nxt._retain_grad is not None
                or nxt._tensor_pre_hooks is not None or nxt.variable._backward_hooks):
            return None
        if not reaches and nxt in targets:
            reaches = True
    if not reaches:
        return [None] * len(inputs)     # the node need not run
    grads = [None] * len(node._out_meta)
    grads[out._output_nr] = root_grads[0]
    prev_mode = _gm.grad_enabled
    _gm.grad_enabled = create_graph
    try:
        if node._materialize and len(grads) > 1:
            grads = _materialize(node, grads)
        res = node.apply(grads)
        if not retain_graph:
            node.release()
        sums = {}               # AccumulateGrad -> its gradient (a leaf may be an input twice)
        for (nxt, _), g in zip(edges, res):
            if g is not None and nxt is not None:
                before = sums.get(nxt)
                sums[nxt] = g if before is None else before + g
        res = g = before = None     # accumulate_grad counts references: sums alone holds them
        if targets is not None:
            captured = [None if acc is None else sums.get(acc) for acc in targets]
        if accumulate:
            if targets is not None:
                for acc in list(sums):
                    if acc not in targets:
                        del sums[acc]
            for acc in sorted(sums, key=_seq_of, reverse=True) if len(sums) > 1 else list(sums):
                accumulate_grad(acc.variable, [sums.pop(acc)], create_graph)
    finally:
        _gm.grad_enabled = prev_mode
    return captured if targets is not None else []


def lazily_applied(node, grads):
    """``(input gradients, whether lazy)`` of ``node``: by its primitive's lazy rule
    (``LAZY_VJP``, giving ``LazyGradient``s) where it has one that takes these gradients,
    else by ``node.apply``."""
    rule = LAZY_VJP.get(getattr(node, "prim", None))
    out = rule(node, grads) if rule is not None else None
    return (node.apply(grads), False) if out is None else (out, True)


def _settled(grads):
    """A node's gradients with the lazy ones (``LazyGradient``) made tensors."""
    for i, g in enumerate(grads):
        if isinstance(g, LazyGradient):
            grads = list(grads)
            grads[i] = g.tensor()
    return grads


def _sum(a, b):
    """``a + b`` for two gradients of one node output. Outside ``create_graph``, with no
    tracer or profiler to see the add, two NumPy arrays of one shape and dtype are added
    directly: a leaf used by many ops receives as many gradients. A lazy gradient
    (``LazyGradient``) takes the other one in."""
    if isinstance(a, LazyGradient):
        return a.plus(b)
    if isinstance(b, LazyGradient):
        return b.plus(a)
    da, db = a._data, b._data
    if (type(da) is np.ndarray and type(db) is np.ndarray and da.dtype is db.dtype
            and da.shape == db.shape and not _gm.grad_enabled
            and (not _hooks.INSTALLED.n or _hook_state.bind_hook is None)):
        return tensor_type()._make(np.asarray(np.add(da, db)), dtype=a.dtype)   # 0-d: a scalar
    return a + b


def _seq_of(node):
    return node._seq
