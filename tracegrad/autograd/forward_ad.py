"""Forward-mode AD: PyTorch's ``torch.autograd.forward_ad``.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)
        y, jvp = forward_ad.unpack_dual(f(x))      # jvp = J tangent

Contract, as PyTorch's: one level at a time (``dual_level``, or ``enter_dual_level`` and
``exit_dual_level``); ``make_dual`` gives a new tensor aliasing its primal and carrying the
tangent as is; ``unpack_dual`` gives ``(primal, tangent)``, the primal a view without the
tangent, the tangent None where there is none; leaving the level drops every tangent.
``make_dual`` and ``unpack_dual`` are backward differentiable, and tangents are ordinary
tensors that keep their reverse-mode history, so forward-over-reverse (the JVP of a
``create_graph`` gradient: a Hessian-vector product) and reverse-over-forward both work.

Where tangents live: in the open level's table, keyed by the tensor's array. A tensor finds
its tangent when it is the very tensor the tangent was set on, or when it shares that array
and has a grad_fn: that is how a result that autograd saved and unpacks again for backward
(a new ``Tensor`` over the same array) keeps its tangent, which forward-over-reverse needs.
``detach()`` also shares the array but has no grad_fn, and drops the tangent, as PyTorch's.

How tangents propagate: while a level is open, a bind hook (the stack that tracers and the
profiler use, ``_hooks``) runs each primitive and then computes the output's tangent from
the inputs' tangents by the primitive's JVP rule: the one it declares (``Primitive.jvp``,
one rule per arg whose shares add up, or ``LINEAR``: the primitive applied to the tangents),
or else one derived from its VJP rule, exactly: for an elementwise primitive the VJP rule
itself, handed the tangent for the cotangent (a diagonal Jacobian is its own transpose);
for any other, the gradient with respect to g of <vjp(g), t> (``forward_rules``: the VJP is
linear in g). In-place ops reach us through ``ops.inplace_views.forward_inplace``, and a write
through a view writes the base's tangent too. With no level open ``bind`` pays nothing
new: it already checks the hook census before every op.
"""
import contextlib
import threading
import weakref
from typing import NamedTuple, Optional

from .. import _hooks
from . import grad_mode
from .forward_rules import jvp_of
from .grad_mode import _DecoratorContextManager

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]

_current_level = -1
_gm = grad_mode._state
# id(array) -> [weakref to the array, {id(tensor): (weakref to tensor, tangent)}, tangent last
# set on the array]; an entry goes when its array dies, all of them when the level closes
_table = {}
_hook_cm = None
_tls = threading.local()    # .busy: computing a rule, whose own ops propagate nothing
Tensor = None               # tracegrad.Tensor, set on first use (tensor.py imports autograd)


def _tensor_class():
    global Tensor
    if Tensor is None:
        from ..tensor import Tensor as cls
        Tensor = cls
    return Tensor


# the table -----------------------------------------------------------------------------------

def _tangent_of(t):
    """``t``'s tangent at the open level, or None. A view without a tangent of its own
    whose base has one gets the same view of the base's tangent (kept as its own), as
    PyTorch's views read their base's forward grad."""
    e = _table.get(id(t._data))
    if e is not None and e[0]() is t._data:
        own = e[1].get(id(t))
        if own is not None and own[0]() is t:
            return own[1]
        if t._grad_fn is not None and e[2] is not None:
            return e[2]                                 # a saved result, unpacked anew
    base = t._base
    if base is None or not _table:
        return None
    e = _table.get(id(base._data))
    if e is None or e[0]() is not base._data:
        return None
    own = e[1].get(id(base))
    if own is None or own[0]() is not base:
        return None
    from ..ops.core import apply_view_steps
    with _Busy():
        view = apply_view_steps(own[1], t._view_steps)
    _set_tangent(t, view)
    return view


def _set_tangent(t, tangent):
    data = t._data
    key = id(data)
    e = _table.get(key)
    if e is None or e[0]() is not data:
        try:
            ref = weakref.ref(data, lambda r, key=key: _forget(key, r))
        except TypeError:       # an array type without weak references: kept for the level
            ref = (lambda d: lambda: d)(data)
        e = _table[key] = [ref, {}, None]
    e[1][id(t)] = (weakref.ref(t), tangent)
    e[2] = tangent


def _forget(key, ref):
    e = _table.get(key)
    if e is not None and e[0] is ref:
        del _table[key]


class _Busy:
    """Inside: this thread's ops propagate no tangents (a rule's own arithmetic)."""
    __slots__ = ("prev",)

    def __enter__(self):
        self.prev = getattr(_tls, "busy", False)
        _tls.busy = True

    def __exit__(self, *exc):
        _tls.busy = self.prev


# propagation ---------------------------------------------------------------------------------

def _on_bind(prim, args, params, inner):
    """The bind hook of an open level: the op, then its output's tangent."""
    out = inner(prim, args, params)
    if not _table or getattr(_tls, "busy", False):
        return out
    ts = None
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            t = _tangent_of(a)
            if t is not None:
                if ts is None:
                    ts = [None] * len(args)
                ts[i] = t
    if ts is not None and out.dtype.is_floating_point:
        with _Busy():
            tangent = jvp_of(prim, args, ts, out, params)
        if tangent is not None:
            _set_tangent(out, tangent)
    return out


def _on_inplace(prim, name, target, others, params, plain):
    """``target.<name>(*others)`` in place, and ``target``'s tangent with it."""
    ts = None
    if not getattr(_tls, "busy", False):
        ts = [_tangent_of(target)] + [_tangent_of(o) if isinstance(o, Tensor) else None
                                      for o in others]
    if not ts or all(t is None for t in ts):
        return plain(prim, name, target, *others, **params)
    before = Tensor._make(target._data.copy(), dtype=target.dtype)   # the rule's input value
    with _Busy():
        plain(prim, name, target, *others, **params)
        tangent = (jvp_of(prim, (before,) + tuple(others), ts, target, params)
                   if target.dtype.is_floating_point else None)
    if tangent is not None:
        _write_tangent(target, ts[0], tangent)
    else:                   # written with a value of no tangent (an integer target)
        e = _table.get(id(target._data))
        if e is not None:
            e[1].pop(id(target), None)
            e[2] = None
    return target


def _write_tangent(target, old, new):
    """``target``'s tangent after an in-place op made it ``new``. As in PyTorch, the tangent
    is updated in place where it can be: the tangent ``target`` had (so the tangents that
    are views of it, its views' and its base's, see the change), else the region of its
    base's tangent (made zeros where the base had none). Where a write in place cannot be
    made (a tangent with reverse-mode history, a broadcast one), the tangents are replaced:
    ``target``'s, and its base's region by a CopySlices of the old one."""
    from ..creation import zeros_like
    from ..ops.core import apply_view_steps
    base = target._base
    if base is not None and not base.dtype.is_floating_point:
        base = None
    if old is not None and _write_into(old, new):
        if base is None:
            return
        b = _tangent_of(base)
        if b is None or b._data is old._data or _xp(b).may_share_memory(b._data, old._data):
            return
    if base is None:
        _set_tangent(target, new)
        return
    with _Busy():
        b = _tangent_of(base)
        if b is None:
            b = zeros_like(base)
            _set_tangent(base, b)
        region = apply_view_steps(b, target._view_steps)
        if _write_into(region, new):
            _set_tangent(target, region)
            return
        from ..ops.index_ops import view_scatter
        _set_tangent(base, view_scatter(b, new, target._view_steps))
    _set_tangent(target, new)


def _xp(t):
    from ..device import xp_of
    return xp_of(t._data)


def _write_into(dst, src):
    """Copy ``src``'s values into the tangent ``dst`` in place, if that loses nothing: same
    shape, no reverse-mode history on either, a writeable array. Whether it did."""
    if (dst._requires_grad or src._requires_grad or tuple(dst.shape) != tuple(src.shape)
            or not getattr(dst._data, "flags", None) or not dst._data.flags.writeable):
        return False
    if dst._data is not src._data:
        dst._data[...] = src._data
        dst._vc.value += 1
    return True


# custom Functions ----------------------------------------------------------------------------

def input_tangents(args):
    """The tangents of a custom ``Function``'s ``args`` at the open level (None for an arg
    without one), or None when no arg carries a tangent (the Function then runs as without
    forward AD)."""
    if not _table or getattr(_tls, "busy", False):
        return None
    found = [_tangent_of(a) if isinstance(a, Tensor) else None for a in args]
    return None if all(t is None for t in found) else found


def propagation(on):
    """A context in which ops propagate tangents (``on``) or not: a custom Function's
    forward runs without, its ``jvp`` gives the outputs' tangents, as in PyTorch."""
    return contextlib.nullcontext() if on else _Busy()


def function_jvp(jvp, ctx, args, tangents, outs):
    """Set the tangents of a custom Function's outputs ``outs`` from its ``jvp(ctx, ...)``,
    which sees the tensors of ``ctx.save_for_forward`` as ``ctx.saved_tensors`` (PyTorch's
    contract), and the inputs' tangents: zeros for a floating tensor input without one, unless
    ``ctx.set_materialize_grads(False)`` asked for None."""
    if ctx._materialize:
        from ..creation import zeros_like
        with _Busy():
            tangents = [zeros_like(a) if t is None and isinstance(a, Tensor)
                        and a.is_floating_point() else t for a, t in zip(args, tangents)]
    saved, ctx._saved = ctx._saved, getattr(ctx, "_to_save_forward", ())
    try:
        with _Busy():
            result = jvp(ctx, *tangents)
    finally:
        ctx._saved = saved
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(outs):
        raise RuntimeError(f"Function's jvp returned an invalid number of forward gradients "
                           f"(expected {len(outs)} but got {len(result)})")
    for o, t in zip(outs, result):
        if t is None or not isinstance(o, Tensor) or not o.is_floating_point():
            continue
        if tuple(t.shape) != tuple(o.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size "
                               f"than that of the original Tensor, this is not supported. "
                               f"Tensor is of size {list(o.shape)} while the given forward "
                               f"gradient is of size {list(t.shape)}.")
        _set_tangent(o, t)


# the API -------------------------------------------------------------------------------------

def enter_dual_level():
    """Open a forward grad level (only one at a time, as in PyTorch) and return it."""
    global _current_level, _hook_cm
    from ..ops import inplace_views
    if _current_level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    if _hooks.tracer is not None:   # inside tracegrad.compile: a graph carries no tangents
        _hooks.tracer.abandon("opens a forward-mode AD level (forward_ad, func.jvp, jacfwd)")
    _tensor_class()
    _hook_cm = _hooks.bind_hook_installed(_on_bind, all_threads=True)
    _hook_cm.__enter__()
    inplace_views.forward_inplace = _on_inplace
    _current_level = 0
    return _current_level


def exit_dual_level(*, level=None):
    """Close the open level: every tangent made in it is dropped."""
    global _current_level, _hook_cm
    from ..ops import inplace_views
    if level is None:
        level = _current_level
    if level != _current_level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    inplace_views.forward_inplace = None
    cm, _hook_cm = _hook_cm, None
    _table.clear()
    _current_level = level - 1
    cm.__exit__(None, None, None)


def make_dual(tensor, tangent, *, level=None):
    """A new tensor aliasing ``tensor`` that carries ``tangent`` (as is) at the open level;
    backward differentiable with respect to ``tensor``."""
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if level != _current_level:
        raise RuntimeError("Invalid level given to _make_dual")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than "
                           f"that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    if _tangent_of(tensor) is not None:
        raise RuntimeError(f"Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {level} is not supported.")
    dual = _alias(tensor)
    _set_tangent(dual, tangent)
    return dual


def _alias(tensor):
    """A view of ``tensor`` over an array object of its own (so a tangent set on the view is
    not the tensor's), with ``tensor``'s reverse-mode history."""
    with _Busy():
        view = tensor.view_as(tensor)
    if view._data is tensor._data:
        view._data = tensor._data.view()
    return view


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal and the tangent (None where there is none)."""
    primal: "Tensor"
    tangent: Optional["Tensor"]


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor`` at the open level: the primal a view of
    ``tensor`` without the tangent, the tangent as it was set or computed, or None."""
    if level is None:
        level = _current_level
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    if not isinstance(tensor, _tensor_class()):
        raise TypeError(f"_unpack_dual(): argument 'dual' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    # inside a custom Function's forward (or a rule) forward AD is off, as in PyTorch
    tangent = None if getattr(_tls, "busy", False) else _tangent_of(tensor)
    if level != _current_level:     # PyTorch checks the level only where there is a tangent
        if tangent is not None:
            raise RuntimeError("Invalid level given to _fw_primal")
        tangent = None
    return UnpackedDualTensor(_alias(tensor), tangent)


class dual_level(_DecoratorContextManager):
    """A context (or decorator) in which forward AD computation happens: it enters a level
    and exits it, dropping the tangents. Levels do not nest, as in PyTorch; nest
    ``tracegrad.func.jvp`` for higher forward derivatives."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, exc_type, exc_value, traceback):
        exit_dual_level()
