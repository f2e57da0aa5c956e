"""Op-table entries for ``tracegrad/ops/methods_more.py``: repeat, tile, ravel, Tensor.unfold,
vdot, split_with_sizes, sum_to_size, chain_matmul and the in-place forms through copy_."""
import numpy as np

from op_table import op


def _np_unfold(x, dim, size, step):
    n = x.shape[dim]
    wins = [np.take(x, range(s, s + size), axis=dim) for s in range(0, n - size + 1, step)]
    return np.moveaxis(np.stack(wins, axis=dim), dim + 1, -1)


op("repeat.method", lambda lib, x: x.repeat(2, 1, 3), lambda x: np.tile(x, (2, 1, 3)),
   [(2, 3)], ["reshape"])
op("repeat[list, 0d]", lambda lib, x: x.repeat([3]), lambda x: np.tile(x, 3), [()],
   ["reshape"])
op("tile", lambda lib, x: lib.tile(x, (2,)), lambda x: np.tile(x, (1, 2)), [(2, 3)],
   ["reshape"])
op("ravel", lambda lib, x: lib.ravel(x.mT), lambda x: np.ravel(x.T), [(2, 3)], ["reshape"])
op("unfold[windows].method", lambda lib, x: x.unfold(1, 2, 1), lambda x: _np_unfold(x, 1, 2, 1),
   [(2, 3)], ["index"])
op("unfold[step 2, dim 0]", lambda lib, x: x.unfold(0, 3, 2), lambda x: _np_unfold(x, 0, 3, 2),
   [(7, 2)], ["index"])
op("vdot", lambda lib, a, b: lib.vdot(a, b), np.vdot, [(4,), (4,)], ["mul", "sum"])
op("split_with_sizes.method", lambda lib, x: tuple(x.split_with_sizes([1, 2], 1)),
   lambda x: (x[:, :1], x[:, 1:]), [(2, 3)], ["index"])
op("sum_to_size.method", lambda lib, x: x.sum_to_size(1, 3), lambda x: x.sum(0, keepdims=True),
   [(2, 3)], ["sum"])
op("chain_matmul", lambda lib, a, b, c: lib.chain_matmul(a, b, c), lambda a, b, c: a @ b @ c,
   [(2, 3), (3, 4), (4, 2)], ["matmul"])
op("triu_[inplace]", lambda lib, x: (x * 1).triu_(), np.triu, [(3, 3)], ["triu"])
op("nan_to_num_[inplace]", lambda lib, x: lib.log(x).nan_to_num_(nan=0.5),
   lambda x: np.nan_to_num(np.log(x), nan=0.5), [(3, 4)], ["log"])
