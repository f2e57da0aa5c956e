"""The norms of ``tracegrad.linalg``: ``vector_norm``, ``matrix_norm`` and ``norm``.

``vector_norm`` and ``matrix_norm`` are defined in ``ops.norms``, below, where ``torch.norm``
and the distance reductions build on them; ``norm`` picks one of them, as PyTorch's
``linalg.norm`` does.
"""
from ..ops.core import op_error
from ..ops.norms import matrix_norm, vector_norm


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    raise op_error("linalg.norm", f"If dim is not specified but ord is, the input must be 1D "
                                  f"or 2D. Got {A.ndim}D.")
