"""The primitives' own batching rules: shape ops, matmul, addmm, convolution, embedding,
gather/scatter and indexing (see ``rules.py`` for the contract: physical in, physical out,
batch dim first)."""
from ..ops.core import PRIMITIVES, bind
from .batched import batched_at
from .rules import expanded, fallback, padded, phys, rule, shift
from .shared import is_shared, shared_matmul_p

__all__ = []


def _ops():
    from ..ops import shape_ops
    return shape_ops


# shape ops -------------------------------------------------------------------------------

@rule("reshape")
def _reshape(prim, args, params, level):
    v = args[0]._value
    return bind(prim, v, shape=(v.shape[0],) + tuple(params["shape"]))


@rule("permute")
def _permute(prim, args, params, level):
    r = args[0].ndim
    return bind(prim, args[0]._value, dims=(0,) + tuple(shift(d, r) for d in params["dims"]))


@rule("broadcast_to")
def _broadcast_to(prim, args, params, level):
    shape = tuple(params["shape"])
    v = padded(args[0]._value, len(shape))
    return bind(prim, v, shape=(v.shape[0],) + shape)


@rule("cat", "stack")
def _cat_stack(prim, args, params, level):
    """Every operand batched (an unbatched one broadcast), the dim shifted past the batch."""
    ranks = [a.ndim for a in args if a.ndim or prim.name == "stack"]
    r = (ranks[0] if ranks else 1) + (prim.name == "stack")
    keep = [a for a in args if prim.name == "stack" or tuple(a.shape) != (0,)] or list(args)
    return bind(prim, *[expanded(a, level) for a in keep], dim=shift(params["dim"], r))


# matmul, addmm ---------------------------------------------------------------------------

@rule("matmul")
def _matmul(prim, args, params, level):
    """``a @ b`` per example. A batched operand times an unbatched matrix folds the batch into
    the rows (one GEMM); otherwise vectors become matrices and the batched operands are padded
    to one rank, so that the batch dims broadcast (a batched matmul)."""
    ops = _ops()
    a, b = args
    va, vb = phys(a, level), phys(b, level)
    if vb is None and b.ndim == 2 and a.ndim >= 1:
        out = bind(prim, ops.reshape(va, (-1, va.shape[-1])), b)
        return ops.reshape(out, tuple(va.shape[:-1]) + (b.shape[-1],))
    if va is not None and vb is not None and b.ndim == 2 and a.ndim >= 1 and is_shared(vb):
        return bind(shared_matmul_p, va, vb)
    x = va if va is not None else a
    y = vb if vb is not None else b
    if a.ndim == 1:
        x = ops.unsqueeze(x, -2)
    if b.ndim == 1:
        y = ops.unsqueeze(y, -1)
    r = max(a.ndim, b.ndim, 2)
    out = bind(prim, padded(x, r) if va is not None else x, padded(y, r) if vb is not None else y)
    if b.ndim == 1:
        out = ops.squeeze(out, -1)
    if a.ndim == 1:
        out = ops.squeeze(out, -1 if b.ndim == 1 else -2)
    return out


@rule("addmm")
def _addmm(prim, args, params, level):
    """``beta * self + alpha * (mat1 @ mat2)``, through the batched matmul."""
    from ..ops.linalg import matmul
    c, a, b = args
    beta, alpha = params["beta"], params["alpha"]
    with _logical(level):
        prod = matmul(a, b)
        prod = prod if alpha == 1 else prod * alpha
        out = prod if beta == 0 else prod + (c if beta == 1 else c * beta)
    return _physical(out, level)


def _logical(level):
    """A block whose ops see ``level``'s batched tensors again (a rule written as a
    decomposition into other primitives, each batched by its own rule)."""
    from .transform import reentered
    return reentered(level)


def _physical(t, level):
    return t._value if batched_at(t, level.id) else expanded(t, level)


# embedding, gather, scatter -----------------------------------------------------------------

@rule("embedding")
def _embedding(prim, args, params, level):
    """Batched indices look up the one table; a batched table (an ensemble) is one table of
    ``B*V`` rows, each example's indices offset by ``b*V``."""
    from ..creation import arange
    w, idx = args
    vw = phys(w, level)
    if vw is None:
        return bind(prim, w, idx._value, **params)
    if params.get("padding_idx") is not None or params.get("scale_grad_by_freq"):
        return fallback(prim, args, params, level)
    b, v = vw.shape[0], vw.shape[1]
    vi = expanded(idx, level)
    offsets = _ops().reshape(arange(b, device=vi.device) * v, (b,) + (1,) * (vi.ndim - 1))
    table = _ops().reshape(vw, (b * v,) + tuple(vw.shape[2:]))
    return bind(prim, table, vi + offsets, **params)


@rule("embedding_backward")
def _embedding_backward(prim, args, params, level):
    """Each example's table gradient: the examples' rows offset by ``b*V`` into one table of
    ``B*V`` rows."""
    from ..creation import arange
    g, idx = args
    if params.get("padding_idx") is not None or params.get("scale_grad_by_freq"):
        return fallback(prim, args, params, level)
    vg, vi = expanded(g, level), expanded(idx, level)
    b, v = level.size, params["num_weights"]
    offsets = _ops().reshape(arange(b, device=vi.device) * v, (b,) + (1,) * (vi.ndim - 1))
    out = bind(prim, vg, vi + offsets, **dict(params, num_weights=b * v))
    return _ops().reshape(out, (b, v) + tuple(out.shape[1:]))


@rule("gather", "scatter_reduce")
def _gather_scatter(prim, args, params, level):
    """Every operand batched, ``dim`` shifted (the index has the input's rank)."""
    r = args[0].ndim
    return bind(prim, *[expanded(a, level) for a in args],
                **dict(params, dim=shift(params["dim"], r)))


@rule("linalg_solve")
def _solve(prim, args, params, level):
    """Both operands batched: B's rank against A's still tells a vector from a matrix."""
    return bind(prim, *[expanded(a, level) for a in args], **params)


@rule("isin")
def _isin(prim, args, params, level):
    """Batched elements against one set of test elements: elementwise."""
    elements, test = args
    if batched_at(test, level.id):
        return fallback(prim, args, params, level)
    return bind(prim, elements._value, test, **params)


@rule("scatter_add_zeros")
def _scatter_add_zeros(prim, args, params, level):
    r = len(params["shape"])
    return bind(prim, *[expanded(a, level) for a in args],
                **dict(params, dim=shift(params["dim"], r), shape=(level.size,) +
                       tuple(params["shape"])))


# indexing ------------------------------------------------------------------------------------

def _index_plan(args, spec, level, first, device=None):
    """``(tensors, spec)`` of one batched indexing: basic indexing takes a whole slice for the
    batch dim; with index tensors, an ``arange`` over the batch leads them (so the batch stays
    the result's first dim however NumPy places the advanced dims), and every index tensor is
    padded to their common rank."""
    from ..creation import arange
    idx = list(args[first:])
    if not idx:
        return [], (("s", None, None, None),) + tuple(spec)
    if any(i.dtype.name == "bool" for i in idx):
        return None
    r = max(i.ndim for i in idx)
    tensors = [padded(i._value, r) if batched_at(i, level.id) else i for i in idx]
    dev = device if device is not None else args[0].device
    tensors.append(_ops().reshape(arange(level.size, device=dev), (level.size,) + (1,) * r))
    return tensors, (("t", len(idx)),) + tuple(spec)


def _advanced_at(spec, ndim):
    """Where NumPy puts the dims of the index tensors in ``x[spec]``: after the dims the
    entries before them give when the tensors (and ints, which join them) are adjacent; first
    when they are not."""
    adv = [k for k, e in enumerate(spec) if type(e) is int or type(e) is tuple and e[0] == "t"]
    if adv != list(range(adv[0], adv[-1] + 1)):
        return 0
    consumed = sum(1 for e in spec if e is not None and e is not Ellipsis)
    dims = 0
    for e in spec[:adv[0]]:
        dims += (ndim - consumed) if e is Ellipsis else 1
    return dims


@rule("index")
def _index(prim, args, params, level):
    """Basic indexing: a whole slice for the batch; with index tensors, the batch an
    ``arange`` index of its own (the index dims then come first, after the batch: moved back
    to where NumPy puts them for one example)."""
    plan = _index_plan(args, params["spec"], level, 1)
    if plan is None:
        return fallback(prim, args, params, level)
    tensors, spec = plan
    out = bind(prim, expanded(args[0], level), *tensors, spec=spec)
    if not tensors:
        return out
    k = max(t.ndim for t in tensors) - 1      # the index tensors' dims, past the batch
    p = _advanced_at(params["spec"], args[0].ndim)
    if p == 0:
        return out
    order = (0,) + tuple(range(1 + k, 1 + k + p)) + tuple(range(1, 1 + k)) + \
        tuple(range(1 + k + p, out.ndim))
    return _ops().permute(out, order)


@rule("index_put")
def _index_put(prim, args, params, level):
    """The values padded to the rank of the indexed part (they broadcast against it)."""
    x, values = args[0], args[1]
    plan = _index_plan(args, params["spec"], level, 2)
    if plan is None:
        return fallback(prim, args, params, level)
    tensors, spec = plan
    target = PRIMITIVES["index"].shape(tuple(x.shape), *[tuple(i.shape) for i in args[2:]],
                                       spec=params["spec"])
    if not hasattr(values, "ndim"):     # a Python scalar
        return bind(prim, expanded(x, level), values, *tensors, spec=spec)
    v = _as_indexed(expanded(values, level), target, tensors, params["spec"], x.ndim)
    return bind(prim, expanded(x, level), v, *tensors, spec=spec)


def _as_indexed(v, target, tensors, spec, ndim):
    """A physical tensor shaped like one example's ``x[spec]`` (``target``), laid out as the
    batched index lays out the batch's (see ``_index``)."""
    v = padded(v, len(target))
    p = _advanced_at(spec, ndim) if tensors else 0
    if not p:
        return v
    k = max(t.ndim for t in tensors) - 1
    v = _ops().broadcast_to(v, (v.shape[0],) + tuple(target))
    return _ops().permute(v, (0,) + tuple(range(1 + p, 1 + p + k)) + tuple(range(1, 1 + p))
                          + tuple(range(1 + p + k, v.ndim)))


@rule("index_backward")
def _index_backward(prim, args, params, level):
    """The gradient of ``x[spec]`` (zeros of ``shape`` with ``g`` added at the index), as
    ``index_put`` lays out its values."""
    shape = tuple(params["shape"])
    plan = _index_plan((None,) + tuple(args[1:]), params["spec"], level, 1, args[0].device)
    if plan is None:
        return fallback(prim, args, params, level)
    tensors, spec = plan
    target = PRIMITIVES["index"].shape(shape, *[tuple(i.shape) for i in args[1:]],
                                       spec=params["spec"])
    g = _as_indexed(expanded(args[0], level), target, tensors, params["spec"], len(shape))
    return bind(prim, g, *tensors, spec=spec, shape=(level.size,) + shape)
