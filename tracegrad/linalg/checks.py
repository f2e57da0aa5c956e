"""PyTorch's checks of ``tracegrad.linalg``'s inputs, and the errors of LAPACK's failures.

A linalg function checks its inputs before it binds a primitive (``check``), so a wrong one
raises PyTorch's error for that function, which starts with its name, and ends with the
user's line, as every op's error does (``ops.core.op_error``)::

    RuntimeError: linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices
      (at train.py:12: w = torch.linalg.inv(a))

The primitives' rules (``float_rule``, ``square_rule``) say the same, for a caller that binds
a primitive directly.

A failure that depends on the values, not the shapes (a singular matrix, one that is not
positive-definite), is LAPACK's: an implementation calls it through ``lapack``, which raises
``LinalgError`` with PyTorch's message (what a compiled function's generated code shows), and
``run`` binds a primitive and raises such a failure as the function's error at the user's line.

``check`` and the words it raises (``matrix_problem``, ``dtype_problem``) are defined in
``ops.linalg_checks``, below, where ``ops.norms`` checks its input with them too.
"""
import numpy as np

from ..ops.core import bind, op_error
from ..ops.linalg_checks import (  # noqa: F401 - the linalg modules import them from here
    check, dtype_problem, matrix_problem, same_dtype_problem, scalar_name,
)


def float_rule(name):
    """A primitive's dtype rule: its input's floating dtype, shared by its other tensors."""
    def rule(a, *rest, **_):
        problem = dtype_problem(a.dtype)
        for b in rest:
            problem = problem or (hasattr(b, "dtype") and same_dtype_problem(a.dtype, b.dtype))
        if problem:
            raise RuntimeError(f"linalg.{name}: {problem}")
        return a.dtype
    return rule


def rule_check(name, shape, square=True):
    """In a primitive's shape rule: raise ``linalg.<name>``'s error unless ``shape`` is a batch
    of (square) matrices (``bind`` adds the primitive's name and the user's line)."""
    problem = matrix_problem(shape, square)
    if problem:
        raise RuntimeError(f"linalg.{name}: {problem}")


def square_rule(name):
    """A primitive's shape rule for a batch of square matrices in, the same shape out."""
    def rule(s, *_, **__):
        rule_check(name, s)
        return tuple(s)
    return rule


class LinalgError(RuntimeError):
    """LAPACK failed on the values of ``op``'s input; ``str`` is PyTorch's message."""

    def __init__(self, op, message):
        super().__init__(f"{op}: {message}")
        self.op, self.message = op, message

    def __reduce__(self):
        return type(self), (self.op, self.message)


class LinAlgError(LinalgError):
    """PyTorch's ``torch.linalg.LinAlgError``: a ``RuntimeError`` raised where LAPACK fails on
    the values of an input; made from one message, as PyTorch's, or from an op and one."""

    def __init__(self, op, message=None):
        if message is None:
            RuntimeError.__init__(self, op)
            self.op, self.message = None, op
        else:
            super().__init__(op, message)

    def __reduce__(self):
        return type(self), (self.message,) if self.op is None else (self.op, self.message)


def lapack(op, message, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, NumPy's (or CuPy's) ``LinAlgError`` raised as ``LinalgError``
    with PyTorch's ``message`` (None: LAPACK's own)."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError as e:
        raise LinalgError(op, message or str(e)) from None


def run(prim, *args, **params):
    """``bind(prim, ...)``; a ``LinalgError`` of its implementation is raised as PyTorch's
    ``LinAlgError``, naming its op and the user's line (``bind`` names the primitive,
    ``linalg.inv``, instead)."""
    try:
        return bind(prim, *args, **params)
    except RuntimeError as e:
        failure = e if isinstance(e, LinalgError) else e.__context__
        if isinstance(failure, LinalgError):
            raise op_error(failure.op, failure.message, LinAlgError) from None
        raise
