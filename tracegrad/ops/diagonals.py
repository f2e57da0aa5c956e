"""Triangles, diagonals and roll: ``tril``/``triu``, ``diagonal`` and its adjoint
``diagonal_scatter`` (which ``diag_embed`` and ``diag`` of a vector bind), ``trace``, ``roll``.

Each is a primitive whose VJP is another of them: tril's is tril, roll's is roll by the
opposite shifts, diagonal's is diagonal_scatter and diagonal_scatter's is diagonal.
"""
from .core import Primitive, bind, op_error
from .declare import method
from .reduce_ops import sum
from .rules import norm_dim
from .shape_ops import reshape


def _tri_shape(s, diagonal):
    if len(s) < 2:
        raise RuntimeError("tril/triu: input tensor must have at least 2 dimensions")
    return tuple(s)


tril_p = Primitive(
    "tril", lambda xp, x, diagonal: xp.tril(x, diagonal), dtype=lambda x, **_: x.dtype,
    shape=_tri_shape, vjp=(lambda g, x, out, diagonal: tril(g, diagonal),),
    np="np.tril({self}, {diagonal})")
triu_p = Primitive(
    "triu", lambda xp, x, diagonal: xp.triu(x, diagonal), dtype=lambda x, **_: x.dtype,
    shape=_tri_shape, vjp=(lambda g, x, out, diagonal: triu(g, diagonal),),
    np="np.triu({self}, {diagonal})")


@method
def tril(input, diagonal=0):
    return bind(tril_p, input, diagonal=int(diagonal))


@method
def triu(input, diagonal=0):
    return bind(triu_p, input, diagonal=int(diagonal))


roll_p = Primitive(
    "roll", lambda xp, x, shifts, dims: xp.roll(x, shifts, axis=dims),
    dtype=lambda x, **_: x.dtype, shape=lambda s, **_: tuple(s),
    vjp=(lambda g, x, out, shifts, dims: bind(roll_p, g, shifts=tuple(-s for s in shifts),
                                              dims=dims),),
    np="np.roll({self}, {shifts}, axis={dims})")


@method
def roll(input, shifts, dims=None):
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (int(shifts),)
    if dims is None:
        if len(shifts) != 1:
            raise op_error("roll", f"`shifts` required to be a single integer when `dims` is "
                                   f"not given, got {len(shifts)} shifts")
        flat = bind(roll_p, reshape(input, (-1,)), shifts=shifts, dims=(0,))
        return reshape(flat, input.shape)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(dims) != len(shifts):
        raise op_error("roll", f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               f"dims:{len(dims)}")
    return bind(roll_p, input, shifts=tuple(int(s) for s in shifts),
                dims=tuple(norm_dim(d, input.ndim) for d in dims))


def _diagonal_shape(s, offset, dim1, dim2):
    if dim1 == dim2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = max(0, min(s[dim1] - max(-offset, 0), s[dim2] - max(offset, 0)))
    return tuple(v for i, v in enumerate(s) if i not in (dim1, dim2)) + (n,)


def _diagonal_scatter_impl(xp, g, offset, dim1, dim2, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    view = xp.moveaxis(out, (dim1, dim2), (-2, -1))
    n = g.shape[-1]
    rows = xp.arange(n) + max(-offset, 0)
    view[..., rows, rows + offset] = g
    return out


diagonal_p = Primitive(
    "diagonal", lambda xp, x, offset, dim1, dim2: xp.diagonal(x, offset, dim1, dim2).copy(),
    dtype=lambda x, **_: x.dtype, shape=_diagonal_shape,
    vjp=(lambda g, x, out, offset, dim1, dim2: bind(
        diagonal_scatter_p, g, offset=offset, dim1=dim1, dim2=dim2, shape=x.shape),),
    np="np.diagonal({self}, {offset}, {dim1}, {dim2}).copy()")

diagonal_scatter_p = Primitive(
    "diagonal_scatter", _diagonal_scatter_impl, args=("grad",), dtype=lambda g, **_: g.dtype,
    shape=lambda s, offset, dim1, dim2, shape: tuple(shape),
    vjp=(lambda g, gd, out, offset, dim1, dim2, shape: bind(
        diagonal_p, g, offset=offset, dim1=dim1, dim2=dim2),),
    node="DiagonalBackwardBackward0")


@method
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal as a new tensor (PyTorch returns a view; writes to it do not reach the
    input here)."""
    return bind(diagonal_p, input, offset=int(offset), dim1=norm_dim(dim1, input.ndim),
                dim2=norm_dim(dim2, input.ndim))


@method
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    n = input.shape[-1] + _abs_int(offset)
    nd = input.ndim + 1
    d1, d2 = norm_dim(dim1, nd), norm_dim(dim2, nd)
    shape = list(input.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    return bind(diagonal_scatter_p, input, offset=int(offset), dim1=d1, dim2=d2,
                shape=tuple(shape))


def _abs_int(v):
    return v if v >= 0 else -v


@method
def diag(input, diagonal=0):
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim != 2:
        raise op_error("diag", "diag(): Supports 1D or 2D tensors. Got "
                               f"{input.ndim}D")
    return bind(diagonal_p, input, offset=int(diagonal), dim1=0, dim2=1)


@method
def trace(input):
    if input.ndim != 2:
        raise op_error("trace", f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return sum(diagonal(input))

