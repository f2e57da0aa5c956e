"""PyTorch's shape conveniences, as composites of the shape primitives: ``atleast_1d/2d/3d``,
``hstack``/``vstack``/``dstack``/``column_stack``/``row_stack``, ``fliplr``/``flipud``,
``rot90``, ``block_diag``, ``broadcast_shapes``, ``cartesian_prod``, ``diff``; and the
products PyTorch spells as functions: ``tensordot``, ``inner``, ``ger``, ``kron``,
``addmv``, ``addr``, ``addbmm``, ``baddbmm``. Their gradients are those of the primitives
they are made of (reshape, cat, flip, matmul...)."""
import math

from ..tensor import Tensor
from .core import op_error
from .declare import method
from .linalg import bmm, matmul, mv, outer
from .rules import broadcast, norm_dim
from .shape_ops import cat, flip, movedim, permute, reshape, stack, transpose, unsqueeze


def _unpack(tensors):
    """``f(a, b)`` and ``f([a, b])`` both: PyTorch's atleast_* take either."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(tensors[0]), True
    return tensors, len(tensors) > 1


def _atleast(n, tensors):
    tensors, several = _unpack(tensors)
    out = []
    for t in tensors:
        if t.ndim == 0:
            t = reshape(t, (1,) * n)
        elif n >= 2 and t.ndim == 1:
            t = unsqueeze(t, 0)
        if n == 3 and t.ndim == 2:
            t = unsqueeze(t, -1)
        out.append(t)
    return tuple(out) if several else out[0]


def atleast_1d(*tensors):
    """Each tensor with at least one dimension (a 0-d one becomes shape (1,))."""
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions (a vector becomes a row)."""
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    """Each tensor with at least three dimensions (NumPy's rule: (n,) -> (1, n, 1),
    (m, n) -> (m, n, 1))."""
    return _atleast(3, tensors)


def hstack(tensors):
    """Concatenated along dim 1 (dim 0 for vectors)."""
    tensors = atleast_1d(*tensors) if len(tensors) > 1 else (atleast_1d(tensors[0]),)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenated along dim 0, vectors as rows."""
    return cat(_as_tuple(atleast_2d(*tensors)), 0)


row_stack = vstack


def dstack(tensors):
    """Concatenated along dim 2, after ``atleast_3d``."""
    return cat(_as_tuple(atleast_3d(*tensors)), 2)


def column_stack(tensors):
    """Vectors (and 0-d tensors) as columns, matrices as they are, side by side."""
    cols = [reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors]
    return cat(cols, 1)


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


@method
def fliplr(input):
    """Reversed along dim 1 (needs at least two dims)."""
    if input.ndim < 2:
        raise op_error("fliplr", "Input must be >= 2-d.")
    return flip(input, (1,))


@method
def flipud(input):
    """Reversed along dim 0 (needs at least one dim)."""
    if input.ndim < 1:
        raise op_error("flipud", "Input must be >= 1-d.")
    return flip(input, (0,))


@method
def rot90(input, k=1, dims=(0, 1)):
    """Rotated by 90 degrees k times in the plane of ``dims``, from the first towards the
    second."""
    if len(dims) != 2:
        raise op_error("rot90", f"expected total rotation dims == 2, but got dims = {len(dims)}")
    d0, d1 = (norm_dim(d, input.ndim) for d in dims)
    if d0 == d1:
        raise op_error("rot90", f"expected rotation dims to be different, but got dim0 = {d0} "
                                f"and dim1 = {d1}")
    k %= 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return flip(transpose(input, d0, d1), (d1,))
    return input.clone()


def block_diag(*tensors):
    """The tensors (0-d, 1-d as a row, or 2-d) on the diagonal of a block matrix, zeros
    elsewhere."""
    from .. import dtypes
    from ..creation import zeros
    for k, t in enumerate(tensors):
        if t.ndim > 2:
            raise op_error("block_diag", f"Input tensors must have 2 or fewer dimensions. "
                                         f"Input {k} has {t.ndim} dimensions")
    mats = [reshape(t, (1, -1)) if t.ndim < 2 else t for t in tensors]
    if not mats:
        return zeros((1, 0))
    dt = mats[0].dtype
    for t in mats[1:]:
        dt = dtypes.promote_types(dt, t.dtype)
    cols = sum(t.shape[1] for t in mats)
    rows, left = [], 0
    for t in mats:
        r, c = t.shape
        rows.append(cat([zeros((r, left), dtype=dt, device=t.device), t.to(dt),
                         zeros((r, cols - left - c), dtype=dt, device=t.device)], 1))
        left += c
    return cat(rows, 0)


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to (a ``Size``), or PyTorch's error."""
    from ..tensor import Size
    as_tuples = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return Size(broadcast(*as_tuples))
    except (RuntimeError, ValueError) as e:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape "
                           f"({e})") from None


def cartesian_prod(*tensors):
    """Every combination of the vectors' elements, one per row (a vector for one input)."""
    from .shape_ops import broadcast_tensors
    if len(tensors) == 1:
        return tensors[0]
    n = len(tensors)
    grids = [reshape(t, tuple(-1 if i == k else 1 for i in range(n)))
             for k, t in enumerate(tensors)]
    grids = broadcast_tensors(*grids)
    return stack([reshape(g, (-1,)) for g in grids], 1)


@method
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along ``dim`` (with ``prepend``/``append`` joined first)."""
    from .shape_ops import narrow
    if n == 0:          # PyTorch's: the input as it is, prepend and append ignored
        return input
    dim = norm_dim(dim, input.ndim)
    if prepend is not None or append is not None:
        def along(t):
            if t.ndim == 0:
                shape = list(input.shape)
                shape[dim] = 1
                return t.expand(*shape)
            return t
        parts = ([along(prepend)] if prepend is not None else []) + [input] + (
            [along(append)] if append is not None else [])
        input = cat(parts, dim)
    for _ in range(n):
        length = input.shape[dim]
        if length == 0:
            break
        input = narrow(input, dim, 1, length - 1) - narrow(input, dim, 0, length - 1)
    return input


# products -----------------------------------------------------------------------------------

def tensordot(a, b, dims=2, out=None):
    """Sum over the last ``dims`` dims of ``a`` and the first of ``b`` (or the dims given as
    two lists), as one matrix product of the reshaped operands."""
    if out is not None:
        raise op_error("tensordot", "out= is not supported")
    if isinstance(dims, int):
        if dims < 0:
            raise op_error("tensordot", f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        if isinstance(da, int):
            da, db = [da], [db]
        da = [norm_dim(d, a.ndim) for d in da]
        db = [norm_dim(d, b.ndim) for d in db]
    for i, j in zip(da, db):      # a size-1 dim against a longer one broadcasts (PyTorch's)
        if a.shape[i] != b.shape[j] and 1 in (a.shape[i], b.shape[j]):
            size = max(a.shape[i], b.shape[j])
            if a.shape[i] == 1:
                a = a.expand(*[size if k == i else -1 for k in range(a.ndim)])
            else:
                b = b.expand(*[size if k == j else -1 for k in range(b.ndim)])
        if a.shape[i] != b.shape[j]:
            raise op_error("tensordot", f"contracted dimensions need to match, but first has "
                                        f"size {a.shape[i]} in dim {i} and second has size "
                                        f"{b.shape[j]} in dim {j}")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    am = reshape(permute(a, free_a + da), (-1, k))
    bm = reshape(permute(b, db + free_b), (k, -1))
    return reshape(matmul(am, bm), tuple(a.shape[d] for d in free_a) +
                   tuple(b.shape[d] for d in free_b))


@method
def inner(input, other):
    """Sum of products over the last dims (a scalar product for 0-d operands)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([-1], [-1]))


@method
def ger(input, vec2):
    """``outer``, by its older name."""
    return outer(input, vec2)


@method
def kron(input, other):
    """The Kronecker product: every element of ``input`` times all of ``other``."""
    nd = max(input.ndim, other.ndim)
    a = reshape(input, (1,) * (nd - input.ndim) + tuple(input.shape))
    b = reshape(other, (1,) * (nd - other.ndim) + tuple(other.shape))
    pa = reshape(a, tuple(x for d in range(nd) for x in (a.shape[d], 1)))
    pb = reshape(b, tuple(x for d in range(nd) for x in (1, b.shape[d])))
    return reshape(pa * pb, tuple(a.shape[d] * b.shape[d] for d in range(nd)))


def _scaled_sum(name, input, product, beta, alpha):
    """beta * input + alpha * product, with PyTorch's rule that beta = 0 ignores ``input``
    (NaN and inf in it do not propagate)."""
    if not isinstance(input, Tensor):
        raise op_error(name, f"argument 'input' must be Tensor, not {type(input).__name__}")
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:       # input only for its (zero) gradient
        from .composite import isfinite
        from .elementwise import where
        return scaled + where(isfinite(input), input, 0.0) * 0
    return (input if beta == 1 else input * beta) + scaled


@method
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    return _scaled_sum("addmv", input, mv(mat, vec), beta, alpha)


@method
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum("addr", input, outer(vec1, vec2), beta, alpha)


@method
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    return _scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@method
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    prod = matmul(reshape(movedim(batch1, 0, 1), (batch1.shape[1], -1)),
                  reshape(batch2, (-1, batch2.shape[2])))
    return _scaled_sum("addbmm", input, prod, beta, alpha)


__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "fliplr", "flipud", "rot90", "block_diag", "broadcast_shapes",
           "cartesian_prod", "diff", "tensordot", "inner", "ger", "kron", "addmv", "addr",
           "baddbmm", "addbmm"]
