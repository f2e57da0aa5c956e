"""``vmap``: one batched primitive per primitive, by a bind hook per level.

Calling ``vmap(f)(*args)`` opens a level: the batched inputs become ``BatchedTensor``s of
it (batch dim moved first), and a bind hook is installed above the ones in force (outer
levels, a tracer, the profiler, forward AD). The hook takes every primitive that has an
argument of its level and runs the primitive's batching rule (``rules.py``) with the hooks
below it, so what autograd records, and what a ``compile`` trace sees, are the batched ops
on the physical tensors. Outputs are unwrapped and their batch dim moved to ``out_dims``.

Reverse mode composes through the physical graph: ``grad`` inside vmap tracks its inputs
as tensors batched at every open level (an unbatched one broadcast, so each example has a
leaf of its own), and takes gradients of the physical outputs; the examples never mix, so
those gradients are the per-example ones (``track``, ``autograd_grad``).

In-place ops on batched tensors are computed out of place by the rules and written into the
physical target (``ops.inplace_views.batched_inplace``); random draws follow ``randomness``
('error' raises, 'same' draws once, 'different' draws per example) through
``_hooks.state.draw_hook``.
"""
import functools
import itertools
import threading

from .. import _hooks
from ..tensor import Tensor
from . import functions
from .batched import (BatchedTensor, Level, batched_at, levels, pop, push, to_levels, unwrap_all,
                      wrap, wrap_all)
from .rules import rule_for

__all__ = ["vmap", "track", "autograd_grad", "reentered"]
_ids = itertools.count(1)
_RUNNING, _RUNNING_LOCK = [0], threading.Lock()     # vmap calls running, in every thread


# the hook ---------------------------------------------------------------------------------

def _make_hook(level, below):
    """The bind hook of ``level``: its batched primitives through their rules, the rest on
    to the hook below."""
    lid = level.id
    outer = {lv.id for lv in levels()}      # the levels open around this one
    plain = below
    if plain is None:
        from ..ops.core import apply_plain
        plain = apply_plain

    def hook(prim, args, params):
        mine = False
        for a in args:
            if type(a) is BatchedTensor:
                if a._level == lid:
                    mine = True
                elif a._level not in outer:     # of a vmap call that has returned
                    raise RuntimeError(f"vmap: {prim.name}: a batched tensor is used outside "
                                       f"the vmap call that made it (return it from the "
                                       f"function instead)")
        if not mine:
            return plain(prim, args, params)
        rule, _ = rule_for(prim)
        with _hooks.suspended(bind_hook=below):
            out = rule(prim, args, params, level)
        return wrap(out, lid)
    return hook


def reentered(level):
    """A block in which ``level``'s hook takes the ops again (a rule that decomposes)."""
    return _hooks.suspended(bind_hook=level.hook)


def _inplace(prim, name, target, others, params):
    """``target.<name>(*others)`` where a vmap level's tensor takes part: the result computed
    by the batching rules, then copied into the physical target. None: no batched tensor."""
    from ..ops.core import bind, inplace
    from ..ops.index_ops import index_put_p
    ids = [t._level for t in (target,) + tuple(others) if type(t) is BatchedTensor]
    if not ids:
        return None
    lid = max(ids)
    level = next((lv for lv in levels() if lv.id == lid), None)
    if level is None:
        raise RuntimeError(f"vmap: {name}: a batched tensor is used outside the vmap call that "
                           f"made it (return it from the function instead)")
    with reentered(level):
        new = bind(prim, target, *others, **params)
    if not batched_at(target, lid):
        raise RuntimeError(f"vmap: {name}(self, *extra_args) is not possible because there "
                           f"exists a Tensor `other` in extra_args that has more elements than "
                           f"`self`. This happened due to `other` being vmapped over but `self` "
                           f"not being vmapped over in a vmap. Please try to use out-of-place "
                           f"operators instead of {name}.")
    value = new._value if batched_at(new, lid) else new
    with _hooks.suspended(bind_hook=level.below):
        inplace(index_put_p, name, target._value, value, spec=(Ellipsis,))
    target._requires_grad = target._value.requires_grad
    return target


def _draw(generator, draw, dist, size, dtype, device, requires_grad, **params):
    """A random draw inside the innermost level, as its ``randomness`` asks."""
    from ..creation import _drawn
    from ..ops.shape_ops import stack
    level = levels()[-1]
    if level.randomness == "error":
        raise RuntimeError("vmap: called random operation while in randomness error mode. "
                           "Please either use the 'same' or 'different' randomness flags on "
                           "vmap or perform the randomness operation out of vmap")
    with _hooks.suspended(draw_hook=level.below_draw, bind_hook=level.below):
        one = functools.partial(_drawn, generator, draw, dist, size, dtype, device,
                                requires_grad, **params)
        if level.randomness == "same":
            return one()
        return wrap(stack([one() for _ in range(level.size)], 0), level.id)


# reverse mode -------------------------------------------------------------------------------

def track(x, keep_path):
    """``x`` as a leaf (or, with ``keep_path``, a view that keeps an outer level's path) of
    a gradient taken inside vmap: batched at every open level, so that each example has its
    own."""
    active = levels()
    plain, ids = unwrap_all(x)
    base = plain.view_as(plain) if keep_path else plain.detach()
    p = to_levels(wrap_all(base, ids), active)
    if not p.requires_grad:
        p.requires_grad_(True)
    return wrap_all(p, [lv.id for lv in active])


def _engine_grad(outputs, inputs, grad_outputs, **kwargs):
    """``autograd.grad`` called on batched tensors inside vmap (None where no output nor input
    is one: batched cotangents then flow through the backward as they are)."""
    if not any(type(t) is BatchedTensor for t in tuple(outputs) + tuple(inputs)):
        return None
    gos = None if grad_outputs is None else (
        [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs))
    return tuple(autograd_grad(list(outputs), list(inputs), gos, **kwargs))


def autograd_grad(outputs, inputs, grad_outputs=None, **kwargs):
    """``autograd.grad`` inside vmap. The levels an output or input is batched at (their
    forward ran inside the gradient) are taken physically: the gradient of the physical
    outputs, whose examples depend on their own inputs only, with respect to inputs made by
    ``track``. At the other levels only the cotangents are batched (``vmap(vjp_fn)``): they
    flow through the backward as batched tensors, each op batched by its rule."""
    from ..autograd import grad
    from ..creation import ones_like
    involved = {i for t in list(outputs) + list(inputs) for i in unwrap_all(t)[1]}
    route = [lv for lv in levels() if lv.id in involved]
    rest = [lv.id for lv in levels() if lv.id not in involved]
    outs = [to_levels(o, route) for o in outputs]
    ins = [to_levels(i, route) for i in inputs]
    gos = [ones_like(o) if g is None else _cotangent(g, route, rest)
           for o, g in zip(outs, grad_outputs or [None] * len(outs))]
    grads = grad(outs, ins, gos, **kwargs)
    return [None if g is None else _regathered(g, route) for g in grads]


def _lead_permuted(plain, ids, order_ids):
    """``plain`` (leading dims of the levels ``ids``) with those dims in ``order_ids``'s
    order."""
    from ..ops.shape_ops import permute
    order = [ids.index(i) for i in order_ids] + list(range(len(ids), plain.ndim))
    return plain if order == list(range(plain.ndim)) else permute(plain, order)


def _cotangent(g, route, rest):
    """A cotangent as the backward takes it: physical at the ``route`` levels (broadcast
    where it is not batched there), a batched tensor of the ``rest`` levels it is batched
    at."""
    from ..ops.shape_ops import broadcast_to, reshape
    plain, ids = unwrap_all(g)
    outer = [i for i in ids if i in rest]
    inner = [i for i in ids if i not in rest]
    plain = _lead_permuted(plain, list(ids), outer + inner)
    have = dict(zip(inner, plain.shape[len(outer):len(ids)]))
    lead, tail = tuple(plain.shape[:len(outer)]), tuple(plain.shape[len(ids):])
    if [lv.id for lv in route] != inner:
        plain = reshape(plain, lead + tuple(have.get(lv.id, 1) for lv in route) + tail)
        plain = broadcast_to(plain, lead + tuple(lv.size for lv in route) + tail)
    return wrap_all(plain, outer)


def _regathered(g, route):
    """A gradient from the backward (batched at some ``rest`` levels, physical at the route
    levels) as a batched tensor of all of them."""
    plain, outer = unwrap_all(g)
    ids = list(outer) + [lv.id for lv in route]
    return wrap_all(_lead_permuted(plain, ids, sorted(ids)), sorted(ids))


# the transform -------------------------------------------------------------------------------

def _map_in(tree, dims, fn, where="in_dims"):
    """``tree`` with each tensor leaf ``t`` replaced by ``fn(t, d)``, ``d`` its entry of
    ``dims`` (a pytree prefix of ``tree``)."""
    if isinstance(dims, (tuple, list)) and isinstance(tree, (tuple, list)) and \
            not isinstance(tree, Tensor):
        if len(dims) != len(tree):
            raise ValueError(f"vmap: {where} is not compatible with the structure of the "
                             f"inputs: {len(dims)} entries for {len(tree)} values")
        out = [_map_in(t, d, fn, where) for t, d in zip(tree, dims)]
        return type(tree)(*out) if hasattr(tree, "_fields") else type(tree)(out)
    if isinstance(dims, dict) and isinstance(tree, dict):
        if set(dims) != set(tree):
            raise ValueError(f"vmap: {where} is not compatible with the structure of the "
                             f"inputs: keys {sorted(dims)} for {sorted(tree)}")
        return {k: _map_in(tree[k], dims[k], fn, where) for k in tree}
    if not (dims is None or isinstance(dims, int)):
        raise ValueError(f"vmap: {where} is not compatible with the structure of the inputs: "
                         f"got {dims!r} for a value of type {type(tree).__name__}")
    if isinstance(tree, (tuple, list)):
        return _map_in(tree, type(tree)([dims] * len(tree)), fn, where)
    if isinstance(tree, dict):
        return _map_in(tree, {k: dims for k in tree}, fn, where)
    if isinstance(tree, Tensor):
        return fn(tree, dims)
    if dims is not None and where == "in_dims":
        raise ValueError(f"vmap: Got in_dim={dims} for an input but the input is of type "
                         f"{type(tree)}. We cannot vmap over non-Tensor arguments, please use "
                         f"None as the respective in_dim")
    return fn(tree, dims) if where == "out_dims" else tree


def _batch_size(args, dims):
    sizes = []

    def see(t, d):
        if d is not None:
            if not -max(t.ndim, 1) <= d < max(t.ndim, 1) or t.ndim == 0:
                raise ValueError(f"vmap: Got in_dim={d} for some input, but that input is a "
                                 f"Tensor of dimensionality {t.ndim} so expected in_dim to "
                                 f"satisfy -{t.ndim} <= in_dim < {t.ndim}.")
            sizes.append(t.shape[d])
        return t
    _map_in(args, dims, see)
    if not sizes:
        raise ValueError(f"vmap: at least one input must be batched, but in_dims={dims!r} "
                         f"maps none of them")
    if len(set(sizes)) != 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0]


def _unwrap_out(t, d, level):
    """An output of ``level``'s function as a physical tensor, batch dim at ``d``."""
    from ..ops.shape_ops import broadcast_to, movedim, unsqueeze
    if not isinstance(t, Tensor):
        if d is None:
            return t
        raise ValueError(f"vmap: the function must only return Tensors, got type {type(t)}. "
                         f"Did you mean to set out_dims= to None for this output?")
    if batched_at(t, level.id):
        if d is None:
            raise ValueError("vmap: out_dims=None for an output that is batched: its value "
                             "differs per example, so it has to have an out_dim")
        v = t._value
        return v if d % v.ndim == 0 else movedim(v, 0, d)
    if d is None:
        return t
    d = d % (t.ndim + 1)
    return broadcast_to(unsqueeze(t, d), tuple(t.shape[:d]) + (level.size,) + tuple(t.shape[d:]))


def _call(func, args, kwargs, dims, out_dims, n, randomness):
    """One level: wrap, run ``func`` under the level's hook, unwrap."""
    from ..autograd import engine, function
    from ..ops import inplace_views
    from ..ops.shape_ops import movedim
    level = Level(next(_ids), n, randomness)
    moved = _map_in(args, dims, lambda t, d: t if d is None else
                    wrap(t if d % t.ndim == 0 else movedim(t, d, 0), level.id))
    level.below, level.below_draw = _hooks.state.bind_hook, _hooks.state.draw_hook
    level.hook = _make_hook(level, level.below)
    push(level)
    with _RUNNING_LOCK:
        _RUNNING[0] += 1
        inplace_views.batched_inplace, engine.batched_grad = _inplace, _engine_grad
        function.batched_apply = functions.apply
    try:
        with _hooks.suspended(bind_hook=level.hook, draw_hook=_draw):
            out = func(*moved, **kwargs)
    finally:
        pop()
        with _RUNNING_LOCK:
            _RUNNING[0] -= 1
            if not _RUNNING[0]:     # no vmap runs in any thread
                inplace_views.batched_inplace = engine.batched_grad = None
                function.batched_apply = None
    od = out_dims
    if isinstance(out_dims, (tuple, list)) and not isinstance(out, (tuple, list)):
        if len(out_dims) != 1:
            raise ValueError(f"vmap: out_dims={out_dims!r} is not compatible with the "
                             f"structure of the outputs: one output")
        od = out_dims[0]
    return _map_in(out, od, lambda t, d: _unwrap_out(t, d, level), "out_dims")


def _chunks(args, dims, n, chunk_size):
    from ..ops.shape_ops import narrow
    for start in range(0, n, chunk_size):
        k = min(chunk_size, n - start)
        yield _map_in(args, dims, lambda t, d: t if d is None else narrow(t, d, start, k)), k


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a dimension of its inputs (see ``tracegrad.func.vmap``)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got "
                         f"{chunk_size})")

    def wrapper(*args, **kwargs):
        from ..ops.shape_ops import cat
        dims = in_dims
        if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                             f"compatible with the structure of `inputs`: expected one entry "
                             f"per positional input, got {len(in_dims)} for {len(args)} inputs")
        dims = tuple(in_dims) if isinstance(in_dims, (tuple, list)) else in_dims
        n = _batch_size(args, dims)
        if chunk_size is None or chunk_size >= n:
            return _call(func, args, kwargs, dims, out_dims, n, randomness)
        parts = [_call(func, a, kwargs, dims, out_dims, k, randomness)
                 for a, k in _chunks(args, dims, n, chunk_size)]
        return _join(parts, out_dims, cat)
    return wrapper


functions.vmap = vmap


def _join(parts, out_dims, cat):
    """The chunks' outputs joined along their out_dims."""
    from ..func import _flatten
    leaves = [_flatten(p)[0] for p in parts]
    _, rebuild = _flatten(parts[0])
    ods = _map_in(parts[0], out_dims if not isinstance(out_dims, (tuple, list)) or
                  isinstance(parts[0], (tuple, list)) else out_dims[0],
                  lambda t, d: _OutDim(d) if isinstance(t, Tensor) else t, "out_dims")
    dims = [o.d for o in _flatten_any(ods)]
    return rebuild([t[0] if d is None else cat(list(t), d)
                    for t, d in zip(zip(*leaves), dims)])


class _OutDim:
    __slots__ = ("d",)

    def __init__(self, d):
        self.d = d


def _flatten_any(tree):
    if isinstance(tree, _OutDim):
        return [tree]
    if isinstance(tree, (tuple, list)):
        return [x for t in tree for x in _flatten_any(t)]
    if isinstance(tree, dict):
        return [x for k in tree for x in _flatten_any(tree[k])]
    return []
