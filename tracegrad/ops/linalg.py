"""Matrix products: one batched primitive, with 1-D operands handled by composition."""
from .core import Primitive, bind, op_error
from .declare import method
from .rules import broadcast
from .shape_ops import squeeze, transpose, unsqueeze


def _matmul_dtype(a, b):
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != "
                           f"{b.dtype.name}")
    return a.dtype


def _matmul_shape(a, b):
    if a[-1] != b[-2]:
        ra = "x".join(map(str, a)) if len(a) == 2 else str(list(a))
        rb = "x".join(map(str, b)) if len(b) == 2 else str(list(b))
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({ra} and {rb})")
    return broadcast(a[:-2], b[:-2]) + (a[-2], b[-1])


def _mT(x):
    return transpose(x, -1, -2)


def _column_major(x):
    """Whether the eager tensor ``x``'s matrices are laid out by columns (a transposed view,
    as ``Linear``'s ``weight.t()``); IR values, which have no layout, are not."""
    data = getattr(x, "_data", None)
    if data is None or getattr(data, "ndim", 0) < 2 or min(data.shape[-2:]) < 2:
        return False
    rows, cols = data.strides[-2:]
    return rows == data.itemsize and cols >= data.shape[-2] * data.itemsize


def _mat1_grad(g, a, b):
    """``g @ b^T``, the gradient of ``a`` in ``a @ b``, in ``a``'s layout: where ``a`` is laid
    out by columns it is computed as ``(b @ g^T)^T`` (PyTorch's ``mm_mat1_backward``)."""
    return _mT(matmul(b, _mT(g))) if _column_major(a) else matmul(g, _mT(b))


def _mat2_grad(g, a, b):
    """``a^T @ g``, the gradient of ``b`` in ``a @ b``, in ``b``'s layout: for ``Linear``'s
    ``weight.t()`` it is ``(g^T @ a)^T``, so that the weight's gradient comes out contiguous,
    with no transposing copy on its way into ``.grad`` (PyTorch's ``mm_mat2_backward``)."""
    return _mT(matmul(_mT(g), a)) if _column_major(b) else matmul(_mT(a), g)


matmul_p = Primitive(
    "matmul", lambda xp, a, b: xp.matmul(a, b), args=("self", "mat2"), dtype=_matmul_dtype,
    shape=_matmul_shape,
    vjp=(lambda g, a, b, out: _mat1_grad(g, a, b), lambda g, a, b, out: _mat2_grad(g, a, b)),
    saves=("self", "mat2"), node="MmBackward0", np="np.matmul({self}, {mat2})", kind="matmul",
    jvp=(lambda t, a, b, out: matmul(t, b), lambda t, a, b, out: matmul(a, t)))


@method
def matmul(input, other):
    """NumPy's matmul semantics: 1-D operands are promoted and the added dim removed."""
    if input.ndim == 0 or other.ndim == 0:
        raise op_error("matmul", "both arguments to matmul need to be at least 1D, but they are "
                                 f"{input.ndim}D and {other.ndim}D")
    a = unsqueeze(input, 0) if input.ndim == 1 else input
    b = unsqueeze(other, -1) if other.ndim == 1 else other
    out = bind(matmul_p, a, b)
    if other.ndim == 1:
        out = squeeze(out, -1)
    if input.ndim == 1:
        out = squeeze(out, -2 if other.ndim > 1 else -1)
    return out


@method
def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise op_error("mm", f"self must be a matrix (got {input.ndim}-D and {mat2.ndim}-D)")
    return bind(matmul_p, input, mat2)


@method
def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3:
        raise op_error("bmm", f"batch1 must be a 3D tensor (got {input.ndim}-D and "
                              f"{mat2.ndim}-D)")
    if input.shape[0] != mat2.shape[0]:
        raise op_error("bmm", f"batch1 and batch2 must have same number of batches, got "
                              f"{input.shape[0]} and {mat2.shape[0]}")
    return bind(matmul_p, input, mat2)


@method
def mv(input, vec):
    return matmul(input, vec)


@method
def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise op_error("dot", f"1D tensors expected, but got {input.ndim}D and {other.ndim}D "
                              f"tensors")
    return matmul(input, other)


@method
def outer(input, vec2):
    return unsqueeze(input, 1) * unsqueeze(vec2, 0)
