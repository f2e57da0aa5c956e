"""A custom ``autograd.Function`` called under ``vmap`` on batched tensors that need a
gradient: PyTorch's ``generate_vmap_rule=True``.

Without a gradient, the Function's forward simply runs on the batched tensors (its ops are
batched one by one). With one, its node must join the physical tensors, below the level,
and its backward must see one example at a time, as it was written to. So the call is
recorded at the level below as one ``_Vmapped`` Function over the physical tensors:

- its forward is the Function's forward, vmapped;
- its backward runs, vmapped, the Function's forward again for each example (into a fresh
  ``ctx``: the forward's ctx held tensors of a level that has ended) and then its backward;
  an argument that is not batched gets the sum of its gradients over the examples.

``Function.apply`` reaches ``apply`` through the slot ``function.batched_apply``, which
``transform._call`` fills while a vmap runs.
"""
from ..autograd import grad_mode
from ..autograd.function import Function, _save
from ..tensor import Tensor
from .batched import batched_at, current, pop, push, wrap

vmap = None     # ``transform.vmap``: ``transform`` sets it (it imports this module)


def apply(cls, args, kwargs):
    """``cls.apply(*args, **kwargs)`` on this level's batched tensors that need a gradient,
    recorded below the level; NotImplemented where there is nothing to record."""
    level = current()
    if level is None or not grad_mode._state.grad_enabled:
        return NotImplemented
    mine = [batched_at(a, level.id) for a in args]
    if not any(m and a.requires_grad for m, a in zip(mine, args)):
        return NotImplemented
    from .. import _hooks
    physical = [a._value if m else a for a, m in zip(args, mine)]
    dims = tuple(0 if m else None for m in mine)
    pop()       # recorded at the level below, which may be another vmap's
    try:
        with _hooks.suspended(bind_hook=level.below, draw_hook=level.below_draw):
            out = _Vmapped.apply(cls, dims, kwargs, level.randomness, *physical)
    finally:
        push(level)
    if isinstance(out, tuple):
        return tuple(wrap(o, level.id) if isinstance(o, Tensor) else o for o in out)
    return wrap(out, level.id)


class _Vmapped(Function):
    """``cls`` over a level's physical tensors (see the module docstring)."""

    @staticmethod
    def forward(ctx, cls, dims, kwargs, randomness, *physical):
        ctx.cls, ctx.dims, ctx.kwargs, ctx.randomness = cls, dims, kwargs, randomness
        ctx.args = physical
        ctx.wants = tuple(isinstance(a, Tensor) and a.requires_grad for a in physical)
        return vmap(lambda *a: cls.apply(*a, **kwargs), in_dims=dims,
                    randomness=randomness)(*physical)

    @staticmethod
    def backward(ctx, *grads):
        from ..creation import zeros_like
        cls, args, n = ctx.cls, ctx.args, len(ctx.args)
        where = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

        def one(*values):
            example = list(args)
            for i, v in zip(where, values):
                example[i] = v
            inner = cls._backward_cls()
            inner.needs_input_grad = ctx.wants
            with grad_mode.no_grad():
                cls._run_forward(inner, example, ctx.kwargs)
            inner._saved = tuple(_save(t, ()) for t in inner._to_save)
            res = cls.backward(inner, *values[len(where):])
            res = res if isinstance(res, tuple) else (res,)
            return tuple(zeros_like(example[i]) if res[i] is None else res[i] for i in where)
        per_example = vmap(one, in_dims=tuple(ctx.dims[i] for i in where) + (0,) * len(grads),
                           randomness=ctx.randomness)(*[args[i] for i in where], *grads)
        out = [None] * n
        for i, g in zip(where, per_example):
            if ctx.wants[i]:
                out[i] = g if ctx.dims[i] is not None else g.sum(0)
        return (None, None, None, None) + tuple(out)
