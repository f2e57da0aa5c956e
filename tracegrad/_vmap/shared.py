"""``shared_matmul``: a batched matmul whose right operand is one matrix for every example.

Inside ``vmap(grad(f))`` an unbatched weight is tracked as a broadcast (stride-0) batch of
copies, so that each example gets a gradient of its own (``transform.track``). A plain
batched matmul with it would run one matrix-vector product per example; this primitive runs
the forward as one GEMM over every example's rows, while its VJP with respect to the weight
is still each example's own (``a_b^T g_b``, one batched GEMM): the per-sample gradient.
"""
from ..ops.core import Primitive, bind
from ..ops.linalg import _matmul_dtype, _mT, matmul
from ..tensor import Tensor

__all__ = ["shared_matmul_p", "is_shared"]


def _impl(xp, a, b):
    w = b[0]
    return xp.matmul(a.reshape(-1, a.shape[-1]), w).reshape(a.shape[:-1] + (w.shape[-1],))


def _weight_grad(g, a):
    """Each example's ``a^T g`` (its leading dims summed), as a batch of matrices; for one
    row an example (a vector times a matrix), a broadcast outer product: NumPy's batched
    matmul with an inner size of 1 does not reach BLAS."""
    from ..ops.shape_ops import reshape
    b, k, n = a.shape[0], a.shape[-1], g.shape[-1]
    if a.ndim == 2 or all(s == 1 for s in a.shape[1:-1]):
        return reshape(a, (b, k, 1)) * reshape(g, (b, 1, n))
    return matmul(_mT(reshape(a, (b, -1, k))), reshape(g, (b, -1, n)))


shared_matmul_p = Primitive(
    "shared_matmul", _impl, args=("self", "mat2"), dtype=_matmul_dtype,
    shape=lambda a, b: tuple(a[:-1]) + (b[-1],),
    vjp=(lambda g, a, b, out: bind(shared_matmul_p, g, _mT(b)),
         lambda g, a, b, out: _weight_grad(g, a)),
    saves=("self", "mat2"), node="MmBackward0")


def is_shared(v):
    """Whether the physical tensor ``v`` (batch first) holds one matrix for every example: a
    plain 3-d tensor whose batch dim has stride 0 (a broadcast)."""
    data = v._data      # (a batched tensor's own is a stride-0 stand-in: not this case)
    return type(v) is Tensor and v.ndim == 3 and data.shape[0] > 1 and data.strides[0] == 0 \
        and hasattr(data, "ctypes")
