"""Op-table entries for scatter_reduce, index_reduce and the small tensor functions PyTorch's
OpInfo database names (``ops/fill_scatter.py``, ``ops/methods_more.py``, ``creation.py``).

The references reduce element by element in Python (independent of the ``ufunc.at``
implementation); indices repeat, so every reduction combines several values into one place.
"""
import numpy as np

from op_table import op  # noqa: F401

# scatter_reduce along dim 0 of a (4, 3) input: index and src (3, 3), places hit 0-3 times
_SIDX0 = [[0, 1, 0], [2, 1, 0], [0, 1, 2]]
# along dim 1 of a (3, 4) input: index and src (3, 2)
_SIDX1 = [[3, 3], [0, 1], [1, 1]]
# index_reduce along dim 1 of a (2, 4) input: source (2, 5)
_IIDX = [1, 3, 1, 0, 1]
_FLAT = [0, 5, -1, 5, 2]    # put: flat positions in a (3, 4) input, one repeated


def _ref_scatter(x, dim, index, src, reduce, include_self=True):
    index = np.asarray(index)
    out, groups = x.copy(), {}
    for pos in np.ndindex(index.shape):
        place = list(pos)
        place[dim] = index[pos]
        groups.setdefault(tuple(place), []).append(src[pos])
    for place, values in groups.items():
        values = ([x[place]] if include_self else []) + values
        out[place] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max,
                      "amin": np.min}[reduce](values)
    return out


def _ref_index(x, dim, index, source, reduce, include_self=True):
    shape = [1] * source.ndim
    shape[dim] = -1
    wide = np.broadcast_to(np.reshape(index, shape), source.shape)
    return _ref_scatter(x, dim, wide, source, reduce, include_self)


for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    op(f"scatter_reduce[{_reduce}]",
       lambda lib, x, s, r=_reduce: lib.scatter_reduce(x, 0, lib.tensor(_SIDX0), s, r),
       lambda x, s, r=_reduce: _ref_scatter(x, 0, _SIDX0, s, r),
       [(4, 3), (3, 3)], ["scatter_reduce"])
    op(f"scatter_reduce[{_reduce},dim1,exclude_self,method]",
       lambda lib, x, s, r=_reduce: x.scatter_reduce(1, lib.tensor(_SIDX1), s, r,
                                                      include_self=False),
       lambda x, s, r=_reduce: _ref_scatter(x, 1, _SIDX1, s, r, False),
       [(3, 4), (3, 2)], ["scatter_reduce"])
for _reduce in ("prod", "mean", "amax", "amin"):
    op(f"index_reduce[{_reduce}]",
       lambda lib, x, s, r=_reduce: lib.index_reduce(x, 1, lib.tensor(_IIDX), s, r),
       lambda x, s, r=_reduce: _ref_index(x, 1, _IIDX, s, r),
       [(2, 4), (2, 5)], ["scatter_reduce"])
    op(f"index_reduce[{_reduce},exclude_self,method]",
       lambda lib, x, s, r=_reduce: x.index_reduce(1, lib.tensor(_IIDX), s, r,
                                                    include_self=False),
       lambda x, s, r=_reduce: _ref_index(x, 1, _IIDX, s, r, False),
       [(2, 4), (2, 5)], ["scatter_reduce"])
op("scatter_reduce_[prod,inplace]",
   lambda lib, x, s: x.clone().scatter_reduce_(0, lib.tensor(_SIDX0), s, "prod"),
   lambda x, s: _ref_scatter(x, 0, _SIDX0, s, "prod"), [(4, 3), (3, 3)], ["scatter_reduce"])
op("index_reduce_[amax,inplace]",
   lambda lib, x, s: x.clone().index_reduce_(1, lib.tensor(_IIDX), s, "amax"),
   lambda x, s: _ref_index(x, 1, _IIDX, s, "amax"), [(2, 4), (2, 5)], ["scatter_reduce"])


def _ref_put(x, values, accumulate):
    out = x.copy().reshape(-1)
    for i, v in zip(_FLAT, values.reshape(-1)):
        out[i] = out[i] + v if accumulate else v
    return out.reshape(x.shape)


_FLAT_ONCE = [0, 5, -1, 2]      # without repeats: which write wins is unspecified


def _ref_put_once(x, values):
    out = x.copy().reshape(-1)
    out[_FLAT_ONCE] = values.reshape(-1)
    return out.reshape(x.shape)


op("put", lambda lib, x, v: lib.put(x, lib.tensor(_FLAT_ONCE), v),
   _ref_put_once, [(3, 4), (4,)], ["index_put", "index"])
op("put[accumulate,method]", lambda lib, x, v: x.put(lib.tensor(_FLAT), v, accumulate=True),
   lambda x, v: _ref_put(x, v, True), [(3, 4), (5,)], ["index_backward"])
op("put_[2d_index]", lambda lib, x, v: x.clone().put_(lib.tensor([[0, 5], [-1, 2]]), v),
   _ref_put_once, [(3, 4), (2, 2)], ["index_put"])

op("fill[tensor_value]", lambda lib, x, v: lib.fill(x, v),
   lambda x, v: np.full_like(x, v), [(3, 4), ()], ["index_put"])
op("fill[number]", lambda lib, x: lib.fill(x, 1.5) * x,
   lambda x: 1.5 * x, [(3, 4)], ["index_put"])
op("unsafe_chunk", lambda lib, x: lib.unsafe_chunk(x, 3, 1),
   lambda x: tuple(np.split(x, [3, 6], 1)), [(2, 7)], ["index"])
op("unsafe_chunk[method]", lambda lib, x: x.unsafe_chunk(2),
   lambda x: tuple(np.split(x, [2], 0)), [(3, 2)], ["index"])
op("unsafe_split", lambda lib, x: lib.unsafe_split(x, 2, -1),
   lambda x: tuple(np.split(x, [2, 4], -1)), [(2, 5)], ["index"])
op("unsafe_split[method]", lambda lib, x: x.unsafe_split(3),
   lambda x: tuple(np.split(x, [3], 0)), [(4, 2)], ["index"])
op("constant_pad_nd", lambda lib, x: lib.constant_pad_nd(x, [1, -1, 2, 0], 0.5),
   lambda x: np.pad(x, ((2, 0), (1, 0)), constant_values=0.5)[:, :-1],
   [(3, 4)])
op("__rdiv__", lambda lib, x: x.__rdiv__(2.5), lambda x: 2.5 / x, [(3, 4)], ["mul"])
op("__rmod__", lambda lib, x: x.__rmod__(2.5), lambda x: np.mod(2.5, x), [(3, 4)],
   ["remainder"])
op("__rmod__[operator]", lambda lib, x: 2.5 % x, lambda x: np.mod(2.5, x), [(3, 4)],
   ["remainder"])


def _ref_nonzero_static(x, size, fill):
    found = np.argwhere(x > 0)[:size]
    out = np.full((size, x.ndim), fill, dtype=np.int64)
    out[:len(found)] = found
    return out


op("nonzero_static[padded]", lambda lib, x: lib.nonzero_static(x > 0, size=9),
   lambda x: _ref_nonzero_static(x, 9, -1), [(2, 3)], grad=False)
op("nonzero_static[cut,method]", lambda lib, x: (x > 0).nonzero_static(size=2, fill_value=7),
   lambda x: _ref_nonzero_static(x, 2, 7), [(5,)], grad=False)
# empty tensors' values are undefined: the entries write into them
op("empty_strided", lambda lib, x: lib.empty_strided((3, 4), (1, 3), dtype=x.dtype,
                                                    device=x.device).copy_(x) * 2,
   lambda x: x * 2, [(3, 4)], ["index_put"])
op("new_empty_strided", lambda lib, x: x.new_empty_strided((4, 2), (2, 1)).copy_(x.T) + 1,
   lambda x: x.T + 1, [(2, 4)], ["index_put"])
