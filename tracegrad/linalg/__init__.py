"""``tracegrad.linalg``: PyTorch's ``torch.linalg`` over NumPy's LAPACK bindings.

The namespace; its modules:

- ``composed``: the functions built on the other parts: ``det``/``slogdet`` (whose gradient
  comes from the SVD), ``lstsq`` (through a QR), ``matrix_rank`` and ``matrix_power``, with
  the ``Tensor`` methods ``det``, ``logdet``, ``slogdet`` and ``inverse``;
- ``solve``: ``inv`` and ``solve``, the linear systems the other rules build on;
- ``decomp``: ``cholesky``, ``qr``, ``eigh``/``eigvalsh``, ``svd``/``svdvals``, one
  primitive per output (a primitive has one result; VJPs add up over the outputs);
- ``norms``: ``vector_norm``, ``matrix_norm`` (defined in ``ops.norms``, below, where
  ``torch.norm`` builds on them), ``norm``;
- ``lu``: ``lu``, ``lu_factor``/``lu_factor_ex``, ``lu_solve``; the factorisation itself
  (``getrf``) sits below ``solve``, whose ``inv_ex``/``solve_ex`` report its info;
- ``more``: ``matrix_exp``, ``pinv``, ``solve_triangular``, ``cond``, ``multi_dot``, the
  ``_ex`` variants and the rest of the namespace;
- ``ldl``: ``ldl_factor``/``ldl_factor_ex``/``ldl_solve`` (LAPACK's Bunch-Kaufman
  ``sytrf``/``sytrs``, not differentiable, as in PyTorch), ``householder_product`` (and
  ``torch.orgqr``, ``ormqr``, ``geqrf``), and ``LinAlgError``;
- ``checks``: PyTorch's checks of the inputs, so that an error starts with PyTorch's
  words for the function (``linalg.inv: A must be batches of square matrices, ...``) and
  ends with the user's line; LAPACK's failures (a singular matrix) say the same. The
  shape and dtype checks are defined in ``ops.linalg_checks``, where ``ops.norms`` uses
  them too.

Every rule is written with tracegrad ops, so gradients are differentiable again.

All functions take batches (``(*, m, n)``) and real floating inputs. Conventions for
degenerate inputs follow PyTorch:

- ``eigh``/``svd``: the gradient of the eigen/singular vectors involves 1 / (l_j - l_i)
  (1 / (s_j**2 - s_i**2)); with repeated eigen/singular values it is not defined (inf or
  NaN), as in PyTorch. The gradient through the values alone is always defined.
- ``det``: the gradient is the cofactor matrix (the adjugate's transpose), computed from
  the SVD, so it is right for singular matrices too; its derivative again needs distinct
  singular values.
- ``inv``/``solve`` of a singular matrix raise; ``slogdet`` gives ``logabsdet = -inf``.
- ``qr``: differentiable for ``mode='reduced'``, and for ``'complete'`` when m <= n;
  ``mode='r'`` returns an empty Q and R is not differentiable.
- ``svd(full_matrices=True)``: the gradient uses the first min(m, n) columns of U and rows
  of Vh (the others are not unique) and ignores the cotangent of the rest.
"""
from ..ops.linalg import matmul     # torch.linalg.matmul is torch.matmul
from .composed import det, lstsq, matrix_power, matrix_rank, slogdet
from .decomp import cholesky, eigh, eigvalsh, qr, svd, svdvals
from .ldl import LinAlgError, householder_product, ldl_factor, ldl_factor_ex, ldl_solve
from .lu import lu, lu_factor, lu_factor_ex, lu_solve
from .more import (cholesky_ex, cond, cross, diagonal, inv_ex, matrix_exp, multi_dot, pinv,
                   solve_ex, solve_triangular, tensorinv, tensorsolve, vander, vecdot)
from .norms import matrix_norm, norm, vector_norm
from .solve import inv, solve

__all__ = ["inv", "solve", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd",
           "svdvals", "lstsq", "matrix_rank", "norm", "vector_norm", "matrix_norm", "matrix_power",
           "cholesky_ex", "cond", "cross", "diagonal", "inv_ex", "matrix_exp", "multi_dot",
           "pinv", "solve_ex", "solve_triangular", "tensorinv", "tensorsolve", "vander",
           "vecdot", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "ldl_factor", "ldl_factor_ex",
           "ldl_solve", "householder_product", "LinAlgError", "matmul"]
