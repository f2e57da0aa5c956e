"""Op-table entries for ``tracegrad/ops/reduce_more.py``: logcumsumexp, cummax/cummin,
nansum/nanmean, count_nonzero, aminmax, median/nanmedian and quantile/nanquantile (values
and gradients against NumPy, gradcheck, PyTorch and compiled, as every entry)."""
import numpy as np

from op_table import op

_NAN_AT = np.array([[1.0, 1.0, np.nan, 1.0], [1.0, 1.0, 1.0, 1.0], [np.nan, 1.0, np.nan, 1.0]])
_ALL_NAN_ROW = np.array([[1.0, np.nan, 1.0], [np.nan] * 3])


def _with_nans(lib, x):
    """x with NaNs where _NAN_AT has them (a where, so x's gradient there is 0, not NaN)."""
    return lib.where(lib.tensor(np.isnan(_NAN_AT)), float("nan"), x)


def _logcumsumexp(x, axis):
    return np.logaddexp.accumulate(x, axis=axis)


op("logcumsumexp", lambda lib, x: lib.logcumsumexp(x, 1), lambda x: _logcumsumexp(x, 1),
   [(3, 4)], ["logcumsumexp"])
op("logcumsumexp[large].method", lambda lib, x: (x * 300).logcumsumexp(0),
   lambda x: _logcumsumexp(x * 300, 0), [(4, 3)], ["logcumsumexp"], gc={"atol": 1e-4})
op("cummax", lambda lib, x: tuple(lib.cummax(x, 1)),
   lambda x: (np.maximum.accumulate(x, 1), _running_arg(x, 1, np.maximum)), [(3, 4)],
   ["gather"])
op("cummin.method", lambda lib, x: tuple(x.cummin(0)),
   lambda x: (np.minimum.accumulate(x, 0), _running_arg(x, 0, np.minimum)), [(4, 3)],
   ["gather"])
op("nansum", lambda lib, x: lib.nansum(_with_nans(lib, x), 1),
   lambda x: np.nansum(x * _NAN_AT, 1), [(3, 4)], ["sum", "where"])
op("nanmean.method", lambda lib, x: _with_nans(lib, x).nanmean(),
   lambda x: np.nanmean(x * _NAN_AT), [(3, 4)], ["sum", "where"])
op("count_nonzero", lambda lib, x: lib.count_nonzero(lib.relu(x), 1),
   lambda x: np.count_nonzero(np.maximum(x, 0), 1), [(3, 4)], ["sum"], grad=False)
op("aminmax", lambda lib, x: tuple(lib.aminmax(x, dim=1)), lambda x: (x.min(1), x.max(1)),
   [(3, 4)], ["amin", "amax"])
op("median", lambda lib, x: lib.median(x), lambda x: np.sort(x.ravel())[(x.size - 1) // 2],
   [(3, 4)], ["gather"])
op("median[dim].values", lambda lib, x: lib.median(x, 1).values,
   lambda x: np.sort(x, 1)[:, (x.shape[1] - 1) // 2], [(3, 5)], ["gather"])
op("nanmedian[all-NaN row]", lambda lib, x: lib.nanmedian(
    lib.where(lib.tensor(np.isnan(_ALL_NAN_ROW)), float("nan"), x), 1).values,
   lambda x: _nanmedian_rows(x * _ALL_NAN_ROW), [(2, 3)], ["gather"], grad=False)
op("nanmedian[dim].values", lambda lib, x: lib.nanmedian(_with_nans(lib, x), 1).values,
   lambda x: _nanmedian_rows(x * _NAN_AT), [(3, 4)], ["gather"])
for _interp in ("linear", "lower", "higher", "midpoint", "nearest"):
    op(f"quantile[{_interp}]",
       lambda lib, x, i=_interp: lib.quantile(x, lib.tensor([0.1, 0.5, 0.75], dtype=x.dtype),
                                              dim=1, interpolation=i),
       lambda x, i=_interp: np.quantile(x, [0.1, 0.5, 0.75], axis=1, method=i), [(3, 5)],
       ["gather"])
op("quantile[scalar q, all]", lambda lib, x: lib.quantile(x, 0.3), lambda x: np.quantile(x, 0.3),
   [(3, 4)], ["gather"])
op("nanquantile", lambda lib, x: lib.nanquantile(_with_nans(lib, x), 0.4, dim=1),
   lambda x: np.nanquantile(x * _NAN_AT, 0.4, axis=1), [(3, 4)], ["gather"])


def _running_arg(x, axis, fn):
    acc = fn.accumulate(x, axis=axis)
    pos = np.arange(x.shape[axis]).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    return np.maximum.accumulate(np.where(x == acc, pos, 0), axis=axis)


def _nanmedian_rows(x):
    out = []
    for row in x:
        kept = np.sort(row[~np.isnan(row)])
        out.append(kept[(len(kept) - 1) // 2] if len(kept) else np.nan)
    return np.array(out)
