"""Batching rules of the convolutions (forward, input gradient, weight gradient) and of
unfold/fold: a batched input folds the vmap batch into N; a batched weight (an ensemble)
folds it into the groups, the examples' channels side by side."""
from ..ops.core import bind
from .rules import expanded, phys, rule

__all__ = []


def _ops():
    from ..ops import shape_ops
    return shape_ops


def _into_n(v):
    """(B, N, ...) -> (B*N, ...)."""
    return _ops().reshape(v, (v.shape[0] * v.shape[1],) + tuple(v.shape[2:]))


def _from_n(out, b):
    """(B*N, ...) -> (B, N, ...)."""
    return _ops().reshape(out, (b, out.shape[0] // b) + tuple(out.shape[1:]))


def _into_channels(v):
    """(B, N, C, ...) -> (N, B*C, ...): each example's channels a group of their own."""
    ops = _ops()
    b, n, c = v.shape[0], v.shape[1], v.shape[2]
    moved = ops.permute(v, (1, 0, 2) + tuple(range(3, v.ndim)))
    return ops.reshape(moved, (n, b * c) + tuple(v.shape[3:]))


def _from_channels(out, b):
    """(N, B*C, ...) -> (B, N, C, ...)."""
    ops = _ops()
    n = out.shape[0]
    split = ops.reshape(out, (n, b, out.shape[1] // b) + tuple(out.shape[2:]))
    return ops.permute(split, (1, 0, 2) + tuple(range(3, split.ndim)))


@rule("convolution", "convolution_transpose")
def _convolution(prim, args, params, level):
    """``(input, weight)``: the batch into N for one weight, into the groups for a batch of
    weights (``groups * B`` groups over the inputs side by side)."""
    x, w = args
    vw = phys(w, level)
    b = level.size
    if vw is None:
        return _from_n(bind(prim, _into_n(x._value), w, **params), b)
    xs = _into_channels(expanded(x, level))
    ws = _ops().reshape(vw, (b * vw.shape[1],) + tuple(vw.shape[2:]))
    out = bind(prim, xs, ws, **dict(params, groups=params["groups"] * b))
    return _from_channels(out, b)


@rule("convolution_weight")
def _convolution_weight(prim, args, params, level):
    """Each example's weight gradient: input and output gradient side by side on the
    channels, ``groups * B`` groups, the result's rows split back per example."""
    b = level.size
    x, g = (_into_channels(expanded(a, level)) for a in args)
    out = bind(prim, x, g, **dict(params, groups=params["groups"] * b))
    return _ops().reshape(out, (b, out.shape[0] // b) + tuple(out.shape[1:]))


@rule("im2col", "col2im")
def _unfold_fold(prim, args, params, level):
    """unfold (4-d, or 3-d without a batch dim) and fold (3-d, or 2-d): the vmap batch folds
    into N, or is N."""
    full = 4 if prim.name == "im2col" else 3
    v = args[0]._value
    if v.ndim - 1 != full:
        return bind(prim, v, **params)
    return _from_n(bind(prim, _into_n(v), **params), level.size)
