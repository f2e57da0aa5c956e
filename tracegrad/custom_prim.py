"""A custom ``autograd.Function`` seen by the compiler: one primitive per output.

Inside ``tracegrad.compile`` a call ``MyFn.apply(x, 2.0)`` is recorded as a
node of a primitive made for ``(MyFn, output k)``: its implementation runs
``MyFn.forward`` on the arrays (eagerly, without grad), its VJP runs
``MyFn.forward`` again to fill a fresh ``ctx`` and then ``MyFn.backward``.
Because both run tracegrad ops, the symbolic tracer records them into the
backward graph, so the user's own derivative is what the compiled backward
computes. Functions with several outputs get one primitive per output (the
forward runs once for each).
"""
from . import _hooks
from .autograd import grad_mode
from .autograd.function import _save
from .ops.core import Primitive
from .tensor import Tensor

_AVALS = {}      # (prim name, input shapes) -> (shape, dtype), learnt when first traced
_PRIMS = {}      # (Function class, output index) -> Primitive


def _arguments(template, tensors):
    it = iter(tensors)
    return [next(it) if slot is None else slot for slot in template]


def _forward(fn, template, tensors, out=None, index=None):
    """Run the user's forward into a fresh ctx. A saved output ``index`` is replaced by
    ``out``, the primitive's own result, which (as in eager) carries its history."""
    ctx = fn._backward_cls()
    ctx.needs_input_grad = tuple(slot is None for slot in template)
    args = _arguments(template, tensors)
    with grad_mode.no_grad():
        outs = fn.forward(ctx, *args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    if out is not None:
        ctx._to_save = tuple(out if t is outs[index] else t for t in ctx._to_save)
    ctx._saved = tuple(_save(t, outs) for t in ctx._to_save)
    ctx._to_save = ()
    return ctx, outs


def custom_primitive(fn, index):
    prim = _PRIMS.get((fn, index))
    if prim is not None:
        return prim
    name = f"{fn.__name__}_{index}_{id(fn):x}"

    def impl(xp, *arrays, fn, template, index):
        with _hooks.suspended(bind_hook=None, tracer=None):   # the user's forward, plainly
            _, outs = _forward(fn, template, [Tensor._make(a) for a in arrays])
        return outs[index]._data

    def vjp(g, *ins, out, fn, template, index):
        ctx, outs = _forward(fn, template, list(ins), out, index)
        grads = [g if k == index else o.new_zeros(o.shape) if isinstance(o, Tensor) else None
                 for k, o in enumerate(outs)]
        res = fn.backward(ctx, *grads)
        res = res if isinstance(res, tuple) else (res,)
        return [r for r, slot in zip(res, template) if slot is None]

    def learnt(kind):
        def rule(*operands, fn, template, index):
            shapes = tuple(getattr(o, "shape", o) for o in operands)
            return _AVALS[(name, shapes)][kind]
        return rule

    prim = Primitive(name, impl, args=("*inputs",), saves=("*inputs", "result"), vjp=vjp,
                     dtype=learnt(1), shape=learnt(0), node=fn.__name__ + "Backward",
                     kind="custom")
    _PRIMS[(fn, index)] = prim
    return prim


def learn(prim, inputs, out):
    _AVALS[(prim.name, tuple(tuple(t.shape) for t in inputs))] = (tuple(out.shape), out.dtype)


__all__ = ["custom_primitive", "learn"]
