"""Batching rules: how each primitive runs once over a whole batch.

A rule is ``rule(prim, args, params, level) -> tensor``: ``args`` are the primitive's
arguments as the function under vmap passed them (tensors of ``level`` are
``BatchedTensor``s, whose ``_value`` holds every example, batch dim first; others are
unbatched), and it returns the physical result, batch dim first. Rules run with the hooks
below the level's own (outer levels, a tracer, the profiler), so the tracegrad ops they call
are what autograd records and what a trace sees: one batched op per primitive.

Where a rule comes from (``rule_for``), in order:
- ``RULES[name]``, a rule of the primitive's own (``rules_nn.py``: matmul, conv, indexing,
  embedding, gather/scatter, cat/stack, ...);
- a generic rule read off the primitive's kind: every elementwise primitive (and the other
  ones whose shape rule is the elementwise one) broadcasts after aligning ranks; every
  reduction shifts its dims past the batch dim; ``FOLD`` and ``TRAILING`` list the ops that
  act on trailing dims (pools, pads, upsampling, linalg);
- otherwise ``fallback``: the primitive once per example, stacked, with one warning that
  names it.
"""
import warnings

from ..ops import rules as shape_rules
from ..ops.core import PRIMITIVES, bind
from .batched import batched_at

__all__ = ["RULES", "rule_for", "coverage", "phys", "expanded", "fallback"]

RULES = {}          # primitive name -> its own rule
_warned = set()     # primitives whose fallback has warned


def rule(*names):
    """Register the decorated function as the rule of the primitives ``names``."""
    def decorate(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return decorate


# helpers ----------------------------------------------------------------------------------

def phys(a, level):
    """The physical tensor of ``a`` at ``level`` (batch first), or None if unbatched there."""
    return a._value if batched_at(a, level.id) else None


def expanded(a, level):
    """``a``'s physical tensor; an unbatched tensor broadcast to the batch (a view)."""
    from ..ops.shape_ops import broadcast_to, unsqueeze
    v = phys(a, level)
    if v is not None:
        return v
    return broadcast_to(unsqueeze(a, 0), (level.size,) + tuple(a.shape))


def padded(v, rank):
    """A physical tensor ``v`` (batch first) with 1s inserted after the batch dim up to
    ``rank`` logical dims, so that it broadcasts like a tensor of that rank."""
    from ..ops.shape_ops import reshape
    k = v.ndim - 1
    if k >= rank:
        return v
    return reshape(v, (v.shape[0],) + (1,) * (rank - k) + tuple(v.shape[1:]))


def shift(d, rank):
    """Logical dim ``d`` (maybe negative) of a rank-``rank`` tensor as a physical dim."""
    return (d % rank if rank else 0) + 1


# generic rules ---------------------------------------------------------------------------

def elementwise(prim, args, params, level):
    """Align every batched operand to the highest logical rank (1s after the batch dim), then
    let broadcasting do the rest; the result keeps the dtype the logical operands give (a
    logically 0-d operand promotes as a 0-d tensor, not as the 1-d physical one)."""
    from ..tensor import Tensor
    tensors = [a for a in args if isinstance(a, Tensor)]
    r = max(a.ndim for a in tensors)
    new = [padded(a._value, r) if batched_at(a, level.id) else a for a in args]
    out = bind(prim, *new, **params)
    if len({a.dtype for a in tensors}) > 1:
        want = prim.dtype(*args, **params)
        if out.dtype is not want:
            out = out.to(want)
    return out


def reduction(prim, args, params, level):
    """``dims`` (or ``dim``) shifted past the batch dim; ``dim=None`` (argmax over every
    element) flattens each example first."""
    from ..ops.shape_ops import reshape
    (x,) = args
    v, r = x._value, x.ndim
    if "dims" in params:
        params = dict(params, dims=tuple(shift(d, r) for d in params["dims"]))
        return bind(prim, v, **params)
    if params.get("dim") is None:
        flat = bind(prim, reshape(v, (v.shape[0], -1)), dim=1, keepdim=False)
        return reshape(flat, (v.shape[0],) + (1,) * r) if params.get("keepdim") else flat
    return bind(prim, v, **dict(params, dim=shift(params["dim"], r)))


_DIM_PARAMS = ("dim", "dim1", "dim2")


def dims_shifted(prim, args, params, level):
    """A one-tensor op whose params name dims (``dim``, ``dims``, ``dim1``/``dim2``): each
    dim shifted past the batch dim."""
    (x,) = args
    r = x.ndim if "shape" not in params else len(params["shape"])
    new = dict(params)
    if "shape" in new:          # a backward's: the input's shape
        new["shape"] = (level.size,) + tuple(new["shape"])
    for k in _DIM_PARAMS:
        if new.get(k) is not None:
            new[k] = shift(new[k], r)
    if "dims" in new:
        dims = new["dims"]
        if dims is None or dims == ():
            return fallback(prim, args, params, level)
        new["dims"] = tuple(shift(d, r) for d in dims) if isinstance(dims, (tuple, list)) \
            else shift(dims, r)
    return bind(prim, x._value, **new)


def trailing(prim, args, params, level):
    """An op on the trailing dims of its one tensor (tril, pads, linalg): the batch is one
    more leading dim."""
    if "shape" in params:       # a backward's: the input's shape
        params = dict(params, shape=(level.size,) + tuple(params["shape"]))
    return bind(prim, args[0]._value, **params)


def folded(prim, args, params, level):
    """A pool, pad or resize of ``k`` spatial dims (or its backward): with a batch dim in the
    example, the vmap batch folds into it (``B*N``); without one, the vmap batch is the
    batch. A ``shape`` param (the input's, for a backward) changes alike."""
    from ..ops.shape_ops import reshape
    k = int(prim.name.replace("_backward", "")[-2])     # the names end in 1d, 2d or 3d
    tensors = [expanded(a, level) for a in args]
    b, n = tensors[0].shape[0], tensors[0].shape[1]
    if tensors[0].ndim - 1 != k + 2:
        if "shape" in params:
            params = dict(params, shape=(b,) + tuple(params["shape"]))
        return bind(prim, *tensors, **params)
    if "shape" in params:
        params = dict(params, shape=(b * n,) + tuple(params["shape"])[1:])
    out = bind(prim, *[reshape(t, (b * n,) + tuple(t.shape[2:])) for t in tensors], **params)
    return reshape(out, (b, n) + tuple(out.shape[1:]))


def fallback(prim, args, params, level):
    """No rule: the primitive once per example (a Python loop), the results stacked; one
    warning per primitive says so."""
    from ..ops.shape_ops import stack
    if prim.name not in _warned:
        _warned.add(prim.name)
        warnings.warn(f"vmap: there is no batching rule for the primitive '{prim.name}'; it runs "
                      f"once per batch element (a Python loop over {level.size})", stacklevel=4)
    outs = []
    for b in range(level.size):
        outs.append(bind(prim, *[a._value[b] if batched_at(a, level.id) else a for a in args],
                         **params))
    return stack(outs, 0)


# the table ---------------------------------------------------------------------------------

# ops on trailing dims: the batch folds into their batch dim (pools, pads, resizes)...
_FOLD_KINDS = ("avg_pool", "adaptive_", "max_pool", "upsample_", "reflection_pad",
               "replication_pad")


def _is_fold(name):
    return name.replace("_backward", "").endswith(("1d", "2d", "3d")) and \
        name.startswith(_FOLD_KINDS)


# ... or is one more leading dim (one-tensor ops that broadcast over leading dims)
TRAILING = {"tril", "triu", "constant_pad_nd", "linalg_det", "linalg_detsign", "linalg_inv",
            "linalg_logabsdet", "linalg_cholesky", "linalg_cholesky_info", "linalg_matrix_exp",
            "linalg_eigh_values", "linalg_eigh_vectors", "linalg_qr_q", "linalg_qr_r",
            "linalg_svd_s", "linalg_svd_u", "linalg_svd_vh", "linalg_pinv", "pool_argmax",
            "linalg_lu", "linalg_lu_info", "linalg_lu_pivots", "geqrf_a", "geqrf_tau",
            "circular_pad", "circular_pad_backward"}
# one-tensor ops with dim params
DIMS = {"cumsum", "cumprod", "logcumsumexp", "running_argmax", "running_argmin", "argsort",
        "roll", "diagonal", "mode_index", "diagonal_scatter"}
_ELEMENTWISE_SHAPES = (shape_rules.same_shape, shape_rules.broadcast)


def _is_elementwise(prim):
    return prim.kind == "elementwise" or prim.shape in _ELEMENTWISE_SHAPES \
        or prim.name == "polygamma"


def rule_for(prim):
    """``(rule, how)``: the primitive's batching rule and ``"own"``, ``"generic"`` or
    ``"fallback"``."""
    own = RULES.get(prim.name)
    if own is not None:
        return own, "own"
    if prim.name in DIMS:
        return dims_shifted, "generic"
    if _is_elementwise(prim):
        return elementwise, "generic"
    if prim.kind == "reduction":
        return reduction, "generic"
    if _is_fold(prim.name):
        return folded, "generic"
    if prim.name in TRAILING:
        return trailing, "generic"
    return fallback, "fallback"


def coverage():
    """``{primitive name: "own" | "generic" | "fallback"}`` over the primitive table (the
    IR's source and random ops, which eager code never binds, left out)."""
    return {n: rule_for(p)[1] for n, p in sorted(PRIMITIVES.items())
            if p.kind not in ("source", "random")}
