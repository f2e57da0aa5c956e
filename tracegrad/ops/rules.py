"""Shape and dtype rules shared by the primitives (PyTorch's wording in errors)."""
from .. import dtypes
from ..dtypes import result_type, to_float


def broadcast(*shapes, **_):
    """The broadcast of ``shapes``, or PyTorch's error naming the mismatching dim."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise RuntimeError(
                    f"The size of tensor a ({out[j]}) must match the size of tensor b ({n}) at "
                    f"non-singleton dimension {j}")
    return tuple(out)


def same_shape(s, *_, **__):
    return tuple(s)


promote = result_type     # promote(*operands): PyTorch's result type


def float_promote(*operands, **_):
    return to_float(result_type(*operands))


def to_bool(*operands, **_):
    result_type(*operands)
    return dtypes.bool


def first_dtype(x, *_, **__):
    return x.dtype


def int64_result(*_, **__):
    return dtypes.int64


def norm_dim(dim, ndim, op="op"):
    """A dim in [-ndim, ndim) made non-negative (a 0-dim tensor accepts 0 and -1)."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def reduction_dims(dim, ndim):
    """``norm_dims`` for sum and the reductions built on it (mean, var, std, nansum):
    PyTorch reads an empty list of dims there as every dim."""
    return norm_dims(None if isinstance(dim, (tuple, list)) and not dim else dim, ndim)


def norm_dims(dim, ndim):
    """``dim`` (None, int or sequence) as a sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted(norm_dim(d, ndim) for d in dim)) if ndim else ()
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dim {dims} appears multiple times in the list of dims")
    return dims


def reduced_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)
