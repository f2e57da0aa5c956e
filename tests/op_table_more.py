"""Op-table entries for scans, sorting, triangles, diagonals, einsum and ``tracegrad.linalg``.

Imported at the end of ``op_table.py``, so ``test_ops.py`` and ``test_compile_ops.py`` run
each entry: forward against the NumPy references here, gradcheck and gradgradcheck in float64,
PyTorch's values and gradients (first and second order), and compiled against eager.
Decompositions whose factors are unique only up to signs (eigh, svd) are normalised in the
entry so both libraries (and NumPy) agree.
"""
import math

import numpy as np

from op_table import op


def _eye(lib, x):
    return lib.eye(x.shape[-1], dtype=x.dtype)


def _wellposed(lib, x):
    """x + 3 I: a comfortably invertible matrix (batch-safe)."""
    return x + 3 * _eye(lib, x)


def _np_wellposed(x):
    return x + 3 * np.eye(x.shape[-1])


def _spd(lib, x):
    return x @ x.mT + _eye(lib, x)


def _np_spd(x):
    return x @ np.swapaxes(x, -1, -2) + np.eye(x.shape[-1])


def _np_mT(x):
    return np.swapaxes(x, -1, -2)


# scans ------------------------------------------------------------------------------------

op("cumsum[dim1]", lambda lib, x: lib.cumsum(x, 1), lambda x: np.cumsum(x, 1), [(3, 4)],
   ["cumsum"])
op("cumsum[method,dim-1]", lambda lib, x: x.cumsum(-1), lambda x: np.cumsum(x, -1), [(2, 3)],
   ["cumsum"])
op("cumsum[0d]", lambda lib, x: x.cumsum(0), lambda x: x.copy(), [()], ["cumsum"])
op("cumprod[dim0]", lambda lib, x: lib.cumprod(x, 0), lambda x: np.cumprod(x, 0), [(3, 4)],
   ["cumprod", "cumsum"])
op("cumprod[one zero]", lambda lib, x: x.cumprod(0), lambda x: np.cumprod(x, 0), [(4,)],
   ["cumprod"], fixed=([1.5, 0.0, -2.0, 0.5],))
op("cumprod[two zeros]", lambda lib, x: x.cumprod(0), lambda x: np.cumprod(x, 0), [(5,)],
   ["cumprod"], fixed=([2.0, 0.0, 3.0, 0.0, 1.5],))
op("cumprod[zeros rows]", lambda lib, x: lib.cumprod(x, 1), lambda x: np.cumprod(x, 1),
   [(3, 3)], ["cumprod"], fixed=([[0.0, 2.0, 3.0], [1.5, 0.0, 0.5], [1.0, -1.5, 2.0]],))


# sorting ----------------------------------------------------------------------------------

op("sort[dim1]", lambda lib, x: tuple(lib.sort(x, 1)),
   lambda x: (np.sort(x, 1), np.argsort(x, 1)), [(3, 4)], ["gather"])
op("sort[desc,stable,dim0].method", lambda lib, x: tuple(x.sort(dim=0, descending=True,
                                                                stable=True)),
   lambda x: (-np.sort(-x, 0), np.argsort(-x, 0, kind="stable")), [(3, 4)], ["gather"])
op("argsort", lambda lib, x: lib.argsort(x, 0, descending=True),
   lambda x: np.argsort(-x, 0), [(3, 4)], grad=False)
op("topk", lambda lib, x: tuple(lib.topk(x, 2, dim=1)),
   lambda x: (-np.sort(-x, 1)[:, :2], np.argsort(-x, 1)[:, :2]), [(3, 4)], ["gather"])
op("topk[smallest].method", lambda lib, x: tuple(x.topk(2, largest=False)),
   lambda x: (np.sort(x, -1)[..., :2], np.argsort(x, -1)[..., :2]), [(2, 5)], ["gather"])
op("kthvalue", lambda lib, x: tuple(lib.kthvalue(x, 2, 1)),
   lambda x: (np.sort(x, 1)[:, 1], np.argsort(x, 1)[:, 1]), [(3, 4)], ["gather"])
op("kthvalue[keepdim].method", lambda lib, x: tuple(x.kthvalue(3, 0, keepdim=True)),
   lambda x: (np.sort(x, 0)[2:3], np.argsort(x, 0)[2:3]), [(4, 3)], ["gather"])


# triangles, roll, diagonals ---------------------------------------------------------------

op("tril", lambda lib, x: lib.tril(x), np.tril, [(3, 4)], ["tril"])
op("tril[-1,batched].method", lambda lib, x: x.tril(-1), lambda x: np.tril(x, -1), [(2, 3, 3)],
   ["tril"])
op("triu[1]", lambda lib, x: lib.triu(x, diagonal=1), lambda x: np.triu(x, 1), [(4, 3)],
   ["triu"])
op("triu.method", lambda lib, x: x.triu(), np.triu, [(2, 3, 4)], ["triu"])
op("roll[dim1]", lambda lib, x: lib.roll(x, 1, 1), lambda x: np.roll(x, 1, 1), [(3, 4)],
   ["roll"])
op("roll[two dims].method", lambda lib, x: x.roll((1, -2), (0, 1)),
   lambda x: np.roll(x, (1, -2), (0, 1)), [(3, 4)], ["roll"])
op("roll[flat]", lambda lib, x: lib.roll(x, 5), lambda x: np.roll(x, 5), [(3, 4)], ["roll"])
op("diagonal[offset1]", lambda lib, x: lib.diagonal(x, 1), lambda x: np.diagonal(x, 1),
   [(3, 4)], ["diagonal", "diagonal_scatter"])
op("diagonal[batched,-1].method", lambda lib, x: x.diagonal(-1, 1, 2),
   lambda x: np.diagonal(x, -1, 1, 2), [(2, 3, 3)], ["diagonal", "diagonal_scatter"])
op("diag[vector]", lambda lib, x: lib.diag(x), np.diag, [(3,)], ["diagonal_scatter"])
op("diag[vector,offset]", lambda lib, x: lib.diag(x, -1), lambda x: np.diag(x, -1), [(3,)],
   ["diagonal_scatter"])
op("diag[matrix]", lambda lib, x: lib.diag(x, 1), lambda x: np.diag(x, 1), [(3, 4)],
   ["diagonal"])
op("diag_embed", lambda lib, x: lib.diag_embed(x),
   lambda x: np.stack([np.diag(r) for r in x]), [(2, 3)], ["diagonal_scatter"])
op("trace", lambda lib, x: lib.trace(x), np.trace, [(3, 3)], ["diagonal", "sum"])


# elementwise ------------------------------------------------------------------------------

op("atan2", lambda lib, a, b: lib.atan2(a, b), np.arctan2, [(3, 4), (4,)], ["atan2"])
op("atan2.method", lambda lib, a, b: a.atan2(b), np.arctan2, [(2, 3), (2, 3)], ["atan2"])
op("logaddexp", lambda lib, a, b: lib.logaddexp(a, b), np.logaddexp, [(3, 4), (4,)],
   ["maximum", "log1p", "exp"])
op("logaddexp2.method", lambda lib, a, b: a.logaddexp2(b), np.logaddexp2, [(2, 3), (2, 3)],
   ["maximum", "log1p"])
_NONFINITE = ([[float("nan"), float("inf"), -float("inf"), 1.5], [-0.5, 2.0, float("nan"), 0.7]],)
op("nan_to_num", lambda lib, x: lib.nan_to_num(x, nan=0.5, posinf=3.0, neginf=-3.0),
   lambda x: np.nan_to_num(x, nan=0.5, posinf=3.0, neginf=-3.0), [(2, 4)], ["where"],
   fixed=_NONFINITE)
op("repeat_interleave[int]", lambda lib, x: lib.repeat_interleave(x, 2, dim=0),
   lambda x: np.repeat(x, 2, 0), [(2, 3)], ["broadcast_to"])
op("repeat_interleave[flat].method", lambda lib, x: x.repeat_interleave(3),
   lambda x: np.repeat(x, 3), [(2, 2)], ["broadcast_to"])
op("repeat_interleave[tensor]",
   lambda lib, x: lib.repeat_interleave(x, lib.tensor([1, 0, 2]), dim=1),
   lambda x: np.repeat(x, [1, 0, 2], 1), [(2, 3)], ["index"])
op("meshgrid[ij]", lambda lib, a, b: lib.meshgrid(a, b, indexing="ij"),
   lambda a, b: tuple(np.meshgrid(a, b, indexing="ij")), [(3,), (2,)], ["broadcast_to"])
op("meshgrid[xy]", lambda lib, a, b, c: lib.meshgrid(a, b, c, indexing="xy"),
   lambda a, b, c: tuple(np.meshgrid(a, b, c, indexing="xy")), [(3,), (2,), (2,)],
   ["broadcast_to"])


# einsum -------------------------------------------------------------------------------------

_EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij,kj", [(2, 3), (4, 3)]),                 # implicit output: ik
    ("i,j->ij", [(3,), (2,)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),                             # trace
    ("iij->ji", [(2, 2, 3)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 2)]),
    ("...i,...i->...", [(2, 1, 3), (4, 3)]),      # ellipsis dims broadcast
    ("bn,anm,bm->ba", [(2, 3), (2, 3, 4), (2, 4)]),
    ("ij->", [(2, 3)]),
    ("ab,bc,cd->da", [(2, 3), (3, 2), (2, 2)]),
]
for _eq, _shapes in _EINSUM:
    op(f"einsum[{_eq}]", lambda lib, *xs, e=_eq: lib.einsum(e, *xs),
       lambda *xs, e=_eq: np.einsum(e, *xs), _shapes)
op("einsum[list operands]", lambda lib, a, b: lib.einsum("ij,jk->ik", [a, b]),
   lambda a, b: a @ b, [(2, 3), (3, 2)], ["matmul"])
op("einsum[sublist]", lambda lib, a, b: lib.einsum(a, [0, 1], b, [1, 2], [0, 2]),
   lambda a, b: a @ b, [(2, 3), (3, 2)], ["matmul"])


# linalg -------------------------------------------------------------------------------------

def _L(lib):
    return lib.linalg


op("linalg.inv", lambda lib, x: _L(lib).inv(_wellposed(lib, x)),
   lambda x: np.linalg.inv(_np_wellposed(x)), [(3, 3)], ["linalg_inv"])
op("linalg.inv[batched]", lambda lib, x: _L(lib).inv(_wellposed(lib, x)),
   lambda x: np.linalg.inv(_np_wellposed(x)), [(2, 2, 2)], ["linalg_inv"])
op("inverse.method", lambda lib, x: _wellposed(lib, x).inverse(),
   lambda x: np.linalg.inv(_np_wellposed(x)), [(3, 3)], ["linalg_inv"])
op("linalg.solve", lambda lib, a, b: _L(lib).solve(_wellposed(lib, a), b),
   lambda a, b: np.linalg.solve(_np_wellposed(a), b), [(3, 3), (3, 2)], ["linalg_solve"])
op("linalg.solve[vector]", lambda lib, a, b: _L(lib).solve(_wellposed(lib, a), b),
   lambda a, b: np.linalg.solve(_np_wellposed(a), b[:, None])[:, 0], [(3, 3), (3,)],
   ["linalg_solve"])
op("linalg.solve[broadcast]", lambda lib, a, b: _L(lib).solve(_wellposed(lib, a), b),
   lambda a, b: np.linalg.solve(_np_wellposed(a), np.broadcast_to(b, (2, 2, 1))),
   [(2, 2, 2), (2, 1)], ["linalg_solve"])
op("linalg.solve[left=False]", lambda lib, a, b: _L(lib).solve(_wellposed(lib, a), b,
                                                                left=False),
   lambda a, b: _np_mT(np.linalg.solve(_np_mT(_np_wellposed(a)), _np_mT(b))),
   [(3, 3), (2, 3)], ["linalg_solve"])
op("linalg.det", lambda lib, x: _L(lib).det(x), np.linalg.det, [(3, 3)],
   ["linalg_det", "linalg_svd_u", "linalg_svd_s", "linalg_svd_vh"])
op("det[batched]", lambda lib, x: lib.det(x), np.linalg.det, [(2, 2, 2)], ["linalg_det"])
op("linalg.det[singular]", lambda lib, x: _L(lib).det(x), np.linalg.det, [(3, 3)],
   ["linalg_det"], fixed=([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.3, -1.0, 2.0]],),
   xfail={"torch": "PyTorch's first-order det backward (LU path, outside create_graph) gives "
                   "0 for this exactly singular matrix; the cofactor matrix, which gradcheck and "
                   "PyTorch's own create_graph (SVD) path give, is not 0"})
op("linalg.slogdet", lambda lib, x: tuple(_L(lib).slogdet(x)),
   lambda x: tuple(np.linalg.slogdet(x)), [(2, 3, 3)], ["linalg_logabsdet", "linalg_detsign"])
op("logdet", lambda lib, x: lib.logdet(_spd(lib, x)),
   lambda x: np.linalg.slogdet(_np_spd(x))[1], [(3, 3)], ["linalg_logabsdet"])
op("linalg.cholesky", lambda lib, x: _L(lib).cholesky(_spd(lib, x)),
   lambda x: np.linalg.cholesky(_np_spd(x)), [(3, 3)], ["linalg_cholesky"])
op("linalg.cholesky[upper,batched]", lambda lib, x: _L(lib).cholesky(_spd(lib, x), upper=True),
   lambda x: _np_mT(np.linalg.cholesky(_np_spd(x))), [(2, 2, 2)], ["linalg_cholesky"])
op("linalg.qr[tall]", lambda lib, x: tuple(_L(lib).qr(x)), lambda x: tuple(np.linalg.qr(x)),
   [(4, 3)], ["linalg_qr_q", "linalg_qr_r", "linalg_solve"])
op("linalg.qr[wide,batched]", lambda lib, x: tuple(_L(lib).qr(x)),
   lambda x: tuple(np.linalg.qr(x)), [(2, 2, 3)], ["linalg_qr_q", "linalg_qr_r"])
op("linalg.qr[complete,square]", lambda lib, x: tuple(_L(lib).qr(x, mode="complete")),
   lambda x: tuple(np.linalg.qr(x, mode="complete")), [(3, 3)], ["linalg_qr_q", "linalg_qr_r"])


def _eigh(lib, x):
    w, v = _L(lib).eigh(x + x.mT)
    return w, v * lib.sign(v[..., :1, :])        # eigenvectors up to sign: first row positive


def _np_eigh(x):
    w, v = np.linalg.eigh(x + _np_mT(x))
    return w, v * np.sign(v[..., :1, :])


op("linalg.eigh", lambda lib, x: _eigh(lib, x), _np_eigh, [(3, 3)],
   ["linalg_eigh_values", "linalg_eigh_vectors"])
op("linalg.eigh[batched]", lambda lib, x: _eigh(lib, x), _np_eigh, [(2, 3, 3)],
   ["linalg_eigh_values", "linalg_eigh_vectors"])
op("linalg.eigh[values,U]", lambda lib, x: _L(lib).eigh(x + x.mT, UPLO="U").eigenvalues,
   lambda x: np.linalg.eigvalsh(x + _np_mT(x), UPLO="U"), [(3, 3)], ["linalg_eigh_values"])


def _svd(lib, x, full=False):
    u, s, vh = _L(lib).svd(x, full_matrices=full)
    k = s.shape[-1]
    sgn = lib.sign(u[..., :1, :k])                 # singular vectors up to a joint sign
    return u[..., :k] * sgn, s, vh[..., :k, :] * sgn.mT


def _np_svd(x, full=False):
    u, s, vh = np.linalg.svd(x, full_matrices=full)
    k = s.shape[-1]
    sgn = np.sign(u[..., :1, :k])
    return u[..., :k] * sgn, s, vh[..., :k, :] * _np_mT(sgn)


op("linalg.svd[tall]", lambda lib, x: _svd(lib, x), _np_svd, [(4, 3)],
   ["linalg_svd_u", "linalg_svd_s", "linalg_svd_vh"])
op("linalg.svd[wide,batched]", lambda lib, x: _svd(lib, x), _np_svd, [(2, 2, 3)],
   ["linalg_svd_u", "linalg_svd_s", "linalg_svd_vh"])
op("linalg.svd[full,square]", lambda lib, x: _svd(lib, x, True),
   lambda x: _np_svd(x, True), [(3, 3)], ["linalg_svd_u", "linalg_svd_s", "linalg_svd_vh"])
op("linalg.svdvals", lambda lib, x: _L(lib).svdvals(x),
   lambda x: np.linalg.svd(x, compute_uv=False), [(3, 4)], ["linalg_svd_s"])
op("linalg.lstsq[tall]", lambda lib, a, b: _L(lib).lstsq(a, b).solution,
   lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], [(4, 3), (4, 2)], ["linalg_qr_r"])
op("linalg.lstsq[wide]", lambda lib, a, b: _L(lib).lstsq(a, b).solution,
   lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], [(2, 3), (2, 2)], ["linalg_qr_q"])

_VECTOR_ORDS = [2, 1, math.inf, -math.inf, 3, 0.5]
for _ord in _VECTOR_ORDS:
    op(f"linalg.vector_norm[{_ord}]",
       lambda lib, x, o=_ord: _L(lib).vector_norm(x, o, dim=1, keepdim=True),
       lambda x, o=_ord: np.linalg.norm(x, o, axis=1, keepdims=True), [(3, 4)])
op("linalg.vector_norm[0]", lambda lib, x: _L(lib).vector_norm(x, 0),
   lambda x: np.float64(np.count_nonzero(x)), [(3, 4)], grad=False)
op("linalg.vector_norm[all]", lambda lib, x: _L(lib).vector_norm(x), np.linalg.norm,
   [(2, 3, 2)])
_MATRIX_ORDS = ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]
# drawn values: the table's evenly spaced samples can give two columns equal sums (a tie)
_MATRIX = (np.random.default_rng(5).standard_normal((2, 3, 4)).round(6).tolist(),)
for _ord in _MATRIX_ORDS:
    op(f"linalg.matrix_norm[{_ord}]", lambda lib, x, o=_ord: _L(lib).matrix_norm(x, o),
       lambda x, o=_ord: np.linalg.norm(x, o, axis=(-2, -1)), [(2, 3, 4)], fixed=_MATRIX)
op("linalg.matrix_norm[keepdim,dims]",
   lambda lib, x: _L(lib).matrix_norm(x, 1, dim=(0, 2), keepdim=True),
   lambda x: np.linalg.norm(x, 1, axis=(0, 2), keepdims=True), [(3, 2, 4)])
op("linalg.norm[default]", lambda lib, x: _L(lib).norm(x), lambda x: np.linalg.norm(x.ravel()),
   [(3, 4)])
op("linalg.norm[matrix nuc]", lambda lib, x: _L(lib).norm(x, "nuc"),
   lambda x: np.linalg.norm(x, "nuc"), [(3, 4)], ["linalg_svd_s"])
op("linalg.norm[dim]", lambda lib, x: _L(lib).norm(x, 3, dim=0),
   lambda x: np.linalg.norm(x, 3, axis=0), [(3, 4)])
