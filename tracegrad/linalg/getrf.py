"""LAPACK's getrf (the LU factorisation with partial pivoting) on the host, and
``lu_info_p``, its info per matrix (0, or the first zero pivot) as a primitive.

Apart from ``lu`` (whose factor primitive has a gradient written with triangular solves,
from ``linalg.more``) because ``solve``'s ``inv_ex``/``solve_ex`` report getrf's info too,
and ``more`` builds on ``solve``: this module sits below both.
"""
import numpy as np

from .. import dtypes
from ..ops.core import Primitive


def _factor_one(a):
    """``(packed LU, 1-based pivots, info)`` of one matrix, partial pivoting (getrf)."""
    lu = np.array(a, dtype=a.dtype)
    m, n = lu.shape
    k = min(m, n)
    piv = np.zeros(k, dtype=np.int32)
    info = 0
    for j in range(k):
        p = j + int(np.argmax(np.abs(lu[j:, j])))
        piv[j] = p + 1
        if p != j:
            lu[[j, p]] = lu[[p, j]]
        if lu[j, j] == 0:
            info = info or j + 1
            continue
        lu[j + 1:, j] /= lu[j, j]
        lu[j + 1:, j + 1:] -= np.outer(lu[j + 1:, j], lu[j, j + 1:])
    return lu, piv, info


def _factor(xp, a):
    """The batch's packed factors, pivots and infos (on the CPU; CuPy arrays go there and
    back)."""
    host = a if xp is np else xp.asnumpy(a)
    flat = host.reshape(-1, *host.shape[-2:])
    parts = [_factor_one(m) for m in flat]
    lu = np.stack([p[0] for p in parts]).reshape(host.shape) if parts else host.copy()
    k = min(host.shape[-2:])
    piv = (np.stack([p[1] for p in parts]) if parts else np.zeros((0, k), np.int32)).reshape(
        host.shape[:-2] + (k,))
    info = np.array([p[2] for p in parts], dtype=np.int32).reshape(host.shape[:-2])
    if xp is not np:
        return xp.asarray(lu), xp.asarray(piv), xp.asarray(info)
    return lu, piv, info


lu_info_p = Primitive(
    "linalg_lu_info", lambda xp, a: _factor(xp, a)[2], dtype=lambda a: dtypes.int32,
    shape=lambda s: tuple(s[:-2]), kind="other")
