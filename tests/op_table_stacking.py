"""Op-table entries for ``tracegrad/ops/stacking.py``: atleast_*, the stack and flip
conveniences, rot90, block_diag, cartesian_prod, diff, and the products tensordot, inner,
ger, kron, addmv, addr, baddbmm, addbmm (their gradients are those of the primitives they
are built from, checked here by gradcheck and against PyTorch like any entry)."""
import numpy as np

from op_table import op

op("atleast_3d[two]", lambda lib, x, y: lib.atleast_3d(x, y),
   lambda x, y: tuple(np.atleast_3d(x, y)), [(3,), (2, 3)], ["reshape"])
op("atleast_2d[0d]", lambda lib, x: lib.atleast_2d(x), np.atleast_2d, [()], ["reshape"])
op("atleast_1d[list]", lambda lib, x, y: lib.atleast_1d([x, y]),
   lambda x, y: tuple(np.atleast_1d(x, y)), [(), (2,)], ["reshape"])
op("hstack", lambda lib, x, y: lib.hstack([x, y]), lambda x, y: np.hstack([x, y]),
   [(2, 3), (2, 1)], ["cat"])
op("hstack[vectors]", lambda lib, x, y: lib.hstack([x, y]), lambda x, y: np.hstack([x, y]),
   [(3,), (2,)], ["cat"])
op("vstack", lambda lib, x, y: lib.vstack([x, y]), lambda x, y: np.vstack([x, y]),
   [(3,), (2, 3)], ["cat"])
op("row_stack", lambda lib, x, y: lib.row_stack((x, y)), lambda x, y: np.vstack([x, y]),
   [(2, 3), (1, 3)], ["cat"])
op("dstack", lambda lib, x, y: lib.dstack([x, y]), lambda x, y: np.dstack([x, y]),
   [(3,), (3,)], ["cat"])
op("column_stack", lambda lib, x, y: lib.column_stack([x, y]),
   lambda x, y: np.column_stack([x, y]), [(3,), (3, 2)], ["cat"])
op("fliplr", lambda lib, x: lib.fliplr(x), np.fliplr, [(2, 3)], ["index"])
op("flipud.method", lambda lib, x: x.flipud(), np.flipud, [(2, 3)], ["index"])
for _k in (1, 2, 3, -1):
    op(f"rot90[k={_k}]", lambda lib, x, k=_k: lib.rot90(x, k, (0, 2)),
       lambda x, k=_k: np.rot90(x, k, (0, 2)), [(2, 3, 4)], ["index"])
op("block_diag", lambda lib, a, b, c: lib.block_diag(a, b, c),
   lambda a, b, c: _block_diag([a, b.reshape(1, -1), c.reshape(1, 1)]),
   [(2, 3), (2,), ()], ["cat"])
op("cartesian_prod", lambda lib, a, b: lib.cartesian_prod(a, b),
   lambda a, b: np.stack([np.repeat(a, len(b)), np.tile(b, len(a))], 1), [(2,), (3,)],
   ["stack"])
op("diff", lambda lib, x: lib.diff(x), lambda x: np.diff(x), [(3, 4)], ["sub"])
op("diff[n=2, dim 0].method", lambda lib, x: x.diff(n=2, dim=0), lambda x: np.diff(x, 2, 0),
   [(4, 3)], ["sub"])
op("diff[prepend, append]", lambda lib, x, p, a: lib.diff(x, dim=1, prepend=p, append=a),
   lambda x, p, a: np.diff(x, axis=1, prepend=p, append=a), [(3, 4), (3, 1), (3, 2)],
   ["sub", "cat"])
op("tensordot[dims=1]", lambda lib, a, b: lib.tensordot(a, b, dims=1),
   lambda a, b: np.tensordot(a, b, 1), [(3, 4), (4, 2)], ["matmul"])
op("tensordot[lists]", lambda lib, a, b: lib.tensordot(a, b, ([0, 2], [1, 0])),
   lambda a, b: np.tensordot(a, b, ([0, 2], [1, 0])), [(2, 3, 4), (4, 2, 5)], ["matmul"])
op("inner", lambda lib, a, b: lib.inner(a, b), np.inner, [(2, 3), (4, 3)], ["matmul"])
op("ger.method", lambda lib, a, b: a.ger(b), np.outer, [(3,), (4,)], ["mul"])
op("kron", lambda lib, a, b: lib.kron(a, b), np.kron, [(2, 3), (3, 1, 2)], ["mul"])
op("addmv", lambda lib, i, m, v: lib.addmv(i, m, v, beta=0.5, alpha=2),
   lambda i, m, v: 0.5 * i + 2 * (m @ v), [(3,), (3, 4), (4,)], ["matmul"])
op("addr.method", lambda lib, i, a, b: i.addr(a, b), lambda i, a, b: i + np.outer(a, b),
   [(3, 4), (3,), (4,)], ["mul"])
op("baddbmm[beta=0]", lambda lib, i, a, b: lib.baddbmm(i, a, b, beta=0, alpha=0.5),
   lambda i, a, b: 0.5 * (a @ b), [(2, 3, 5), (2, 3, 4), (2, 4, 5)], ["matmul"])
op("baddbmm", lambda lib, i, a, b: lib.baddbmm(i, a, b, beta=2), lambda i, a, b: 2 * i + a @ b,
   [(3, 5), (2, 3, 4), (2, 4, 5)], ["matmul"])
op("addbmm", lambda lib, i, a, b: lib.addbmm(i, a, b), lambda i, a, b: i + (a @ b).sum(0),
   [(3, 5), (2, 3, 4), (2, 4, 5)], ["matmul"])


def _block_diag(mats):
    out = np.zeros((sum(m.shape[0] for m in mats), sum(m.shape[1] for m in mats)))
    r = c = 0
    for m in mats:
        out[r:r + m.shape[0], c:c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out
