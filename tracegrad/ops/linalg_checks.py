"""PyTorch's checks of a matrix function's input: its words for a tensor that is not a batch
of (square) matrices, or not of a floating dtype (LAPACK's ones), and ``check``, which raises
them as the function's error at the user's line.

Below ``tracegrad.linalg`` (which re-exports them from ``linalg.checks``) so that the norms
in ``ops.norms``, which ``torch.norm`` and the distance reductions build on, check their
input as ``linalg.matrix_norm`` does without importing the linalg layer above them.
"""
from .. import dtypes
from .core import op_error


def scalar_name(dtype):
    """PyTorch's name of a dtype in messages: ``Float``, ``Double``, ``Long``."""
    return dtypes.type_name(dtype)[len("tracegrad."):-len("Tensor")]


def matrix_problem(shape, square=True, name="A"):
    """What PyTorch says of ``shape`` when it is not a batch of (square) matrices, or None."""
    if len(shape) < 2:
        return f"The input tensor {name} must have at least 2 dimensions."
    if square and shape[-1] != shape[-2]:
        return (f"A must be batches of square matrices, but they are {shape[-2]} by "
                f"{shape[-1]} matrices")
    return None


def dtype_problem(dtype, lapack=True):
    """What PyTorch says of ``dtype`` when a linalg function (a LAPACK one: ``lapack``) cannot
    take it, or None."""
    if not dtype.is_floating_point:
        return f"Expected a floating point or complex tensor as input. Got {scalar_name(dtype)}"
    if lapack and dtype is dtypes.float16:
        return f"Low precision dtypes not supported. Got {scalar_name(dtype)}"
    return None


def same_dtype_problem(a, b):
    """What PyTorch says of a second operand's dtype ``b`` unlike the first one's ``a``, or
    None."""
    if a is b:
        return None
    return (f"Expected A and B to have the same dtype, but found A of type {scalar_name(a)} and "
            f"B of type {scalar_name(b)} instead")


def check(op, A, *, square=True, lapack=True):
    """Raise ``op``'s error (PyTorch's, at the user's line) unless ``A`` is a batch of
    matrices (square ones: ``square``) of a floating dtype (one LAPACK takes: ``lapack``)."""
    problem = matrix_problem(A.shape, square) or dtype_problem(A.dtype, lapack)
    if problem:
        raise op_error(op, problem)
