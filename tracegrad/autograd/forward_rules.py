"""The JVP of one primitive application: the output's tangent from the inputs' tangents.

Which rule gives it, in order: the primitive's own (``Primitive.jvp``: one rule per arg,
whose shares add up, or ``LINEAR``: the primitive applied to the tangents); for an
elementwise primitive, its VJP rule handed the tangent for the cotangent (a diagonal
Jacobian is its own transpose); for any other, the JVP derived exactly from the VJP
(``_derived``). ``forward_ad`` calls ``jvp_of`` with its propagation off, so the rules' own
ops carry no tangents.
"""
from . import grad_mode

_gm = grad_mode._state


def _Tensor():
    from ..tensor import Tensor
    return Tensor


def jvp_of(prim, args, ts, out, params):
    """The tangent of ``out = prim(*args)`` given the args' tangents (None: no tangent)."""
    from ..ops.core import LINEAR
    rule = prim.jvp
    if rule is None:
        if prim.vjp is None:        # not differentiable: no tangent, as for an int result
            return None
        if prim.kind != "elementwise" or prim.vjp_all:
            return _derived(prim, args, ts, out, params)
        # An elementwise Jacobian is diagonal, its own transpose: the VJP rule, handed the
        # tangent for g, is the JVP. The tangent is broadcast to the output's shape first, so
        # that the rule computes exactly as with a cotangent (a 0-d float64 operand would
        # otherwise not take part in the dtype promotion); the backward node would sum that
        # share down to the input's shape, forward mode keeps it whole.
        ts = [t if t is None or t.shape == out.shape else _fit(t, out) for t in ts]
        total = _shares(prim.vjp, args, ts, out, params)
        if total is not None and total.dtype is not out.dtype:
            total = total.to(out.dtype)     # a rule that casts g back to its input's dtype
        return _fit(total, out)
    if rule == LINEAR:
        from ..creation import zeros_like
        tangents = [(t if t is not None else zeros_like(a)) if isinstance(a, _Tensor()) else a
                    for a, t in zip(args, ts)]
        return _fit(_bind_plain(prim, tangents, params), out)
    return _fit(_shares(rule, args, ts, out, params), out)


def _shares(rule, args, ts, out, params):
    """The sum of each arg's share of the output tangent; zeros where no arg with a tangent
    has a rule (the output does not depend on it, almost everywhere)."""
    total = None
    for r, t in zip(rule, ts):
        if t is None or r is None:
            continue
        share = r(t, *args, out=out, **params)
        if share is not None:
            total = share if total is None else total + share
    if total is None:
        from ..creation import zeros_like
        return zeros_like(out)
    return total


def _bind_plain(prim, args, params):
    from ..ops.core import bind
    return bind(prim, *args, **params)


def _fit(tangent, out):
    """A tangent broadcast to its primal's shape (a share from a broadcast operand)."""
    if tangent.shape != out.shape:
        from ..ops.shape_ops import broadcast_to
        tangent = broadcast_to(tangent, out.shape)
    return tangent


def _derived(prim, args, ts, out, params):
    """J t from the VJP rule alone. The VJP is linear in its cotangent g, so
    sum_i <vjp_i(g), t_i> = <g, J t>, and its gradient with respect to g is J t: one
    backward pass through the VJP rule's own graph (a rule that twice-differentiable
    reverse mode already needs). The tangent keeps a reverse-mode history where the user's
    grad mode is on and an input or a tangent requires grad."""
    from ..creation import ones_like, zeros_like
    from ..ops.core import sum_to_shape
    from .engine import grad
    keep_graph = _gm.grad_enabled and (
        any(isinstance(a, _Tensor()) and a._requires_grad for a in args)
        or any(t is not None and t._requires_grad for t in ts))
    g = ones_like(out).requires_grad_(True)     # any g: the rule is linear in it (ones
    #                                              keep log|g| finite: logcumsumexp's rule)
    with grad_mode.enable_grad():
        if prim.vjp_all:
            raw = list(prim.vjp(g, *args, out=out, **params))
        else:
            raw = [None if t is None or rule is None else rule(g, *args, out=out, **params)
                   for rule, t in zip(prim.vjp, ts)]
        s = None
        for r, a, t in zip(raw, args, ts):
            if r is None or t is None:
                continue
            if r.shape != a.shape:      # undo broadcasting, as the backward node does
                r = sum_to_shape(r, a.shape)
            term = (r * t).sum()
            s = term if s is None else s + term
        if s is None or not s.requires_grad:    # the VJP ignores g: the derivative is zero
            return zeros_like(out)
        (jt,) = grad(s, g, create_graph=keep_graph, allow_unused=True)
    if jt is None:
        return zeros_like(out)
    return jt if keep_graph else jt.detach()
