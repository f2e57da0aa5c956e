"""Op-table entries for ops/search_count.py and ops/statistics.py: searchsorted, bucketize,
histc, histogram, isin and mode (integer, boolean or count results: no gradient, except
mode's values), and cov, corrcoef, cdist, trapezoid, cumulative_trapezoid, vander,
combinations and renorm (values and gradients against NumPy, gradcheck, PyTorch and
compiled, as every entry).

``bincount``, ``unique_consecutive`` (result sizes that depend on the data: the compiled
table test expects a graph) and ``equal`` (a Python bool) are tested in
``test_statistics.py`` instead.
"""
import itertools
import math

import numpy as np

from op_table import op

_CDIST_NO_SECOND = {"torch2": "PyTorch: the derivative for '_cdist_backward' is not "
                              "implemented (tracegrad's cdist differentiates twice)"}
_VANDER_NO_GRAD = {
    "torch": "PyTorch 2.13's vander cannot backpropagate (a variable it saved is modified by "
             "an inplace operation); tracegrad's differentiates",
    "torch2": "PyTorch 2.13's vander cannot backpropagate"}


# searching and counting ----------------------------------------------------------------------

op("searchsorted", lambda lib, s, v: lib.searchsorted(lib.sort(s).values, v),
   lambda s, v: np.searchsorted(np.sort(s), v), [(6,), (3, 4)], ["searchsorted"], grad=False)
op("searchsorted[batched right]",
   lambda lib, s, v: lib.searchsorted(lib.sort(s, 1).values, v, right=True),
   lambda s, v: np.stack([np.searchsorted(r, w, "right") for r, w in zip(np.sort(s, 1), v)]),
   [(3, 5), (3, 4)], ["searchsorted"], grad=False)
op("searchsorted[sorter]",
   lambda lib, s, v: lib.searchsorted(s, v, sorter=lib.argsort(s), side="right"),
   lambda s, v: np.searchsorted(s, v, "right", sorter=np.argsort(s)), [(7,), (5,)],
   ["searchsorted"], grad=False)
op("bucketize", lambda lib, x, b: lib.bucketize(x, lib.sort(b).values),
   lambda x, b: np.searchsorted(np.sort(b), x), [(3, 4), (5,)], ["searchsorted"], grad=False)
op("bucketize[right]", lambda lib, x, b: lib.bucketize(x, lib.sort(b).values, right=True),
   lambda x, b: np.searchsorted(np.sort(b), x, "right"), [(7,), (4,)], ["searchsorted"],
   grad=False)
op("histc", lambda lib, x: lib.histc(x, bins=5, min=-1.5, max=1.5),
   lambda x: np.histogram(x, 5, (-1.5, 1.5))[0].astype(float), [(4, 5)], ["histc"],
   grad=False)
op("histc[data range].method", lambda lib, x: x.histc(7),
   lambda x: np.histogram(x, 7)[0].astype(float), [(20,)], ["histc"], grad=False)
op("histogram", lambda lib, x: tuple(lib.histogram(x, 4)),
   lambda x: tuple(a.astype(float) for a in np.histogram(x, 4)), [(3, 5)],
   ["histogram_count"], grad=False)
op("histogram[edges, weight, density].method",
   lambda lib, x, w: tuple(x.histogram(lib.tensor([-2.0, -0.5, 0.0, 0.7, 2.0], dtype=x.dtype),
                                       weight=w.abs(), density=True)),
   lambda x, w: tuple(np.histogram(x, [-2.0, -0.5, 0.0, 0.7, 2.0], weights=np.abs(w),
                                   density=True)), [(10,), (10,)], ["histogram_count"],
   grad=False)
op("isin", lambda lib, a, b: lib.isin((a * 2).round(), (b * 2).round()),
   lambda a, b: np.isin((a * 2).round(), (b * 2).round()), [(3, 4), (5,)], ["isin"],
   grad=False)
op("isin[invert]", lambda lib, a, b: lib.isin((a * 2).round(), (b * 2).round(), invert=True),
   lambda a, b: ~np.isin((a * 2).round(), (b * 2).round()), [(6,), (2, 2)], ["isin"],
   grad=False)
op("mode[distinct]", lambda lib, x: tuple(lib.mode(x, 1)),
   lambda x: (x.min(1), x.argmin(1)), [(3, 4)], ["gather"])
op("mode[ties].method", lambda lib, x: tuple(x.mode(0, keepdim=True)),
   lambda x: (np.array([[1.0, 5.0, -1.0]]), np.array([[3, 1, 3]])),
   [(4, 3)], ["gather"], grad=False,
   fixed=([[1.0, 5.0, -1.0], [2.0, 5.0, 2.0], [2.0, 0.5, 2.0], [1.0, 7.0, -1.0]],))


# statistics ------------------------------------------------------------------------------------

def _cov_weighted(x, a):
    return np.cov(x, fweights=[1, 2, 1, 3, 1], aweights=np.abs(a))


op("cov", lambda lib, x: lib.cov(x), lambda x: np.cov(x), [(3, 5)], ["matmul", "div"])
op("cov[1-D, correction=0].method", lambda lib, x: x.cov(correction=0),
   lambda x: np.cov(x, ddof=0), [(6,)], ["matmul"])
op("cov[weights]",
   lambda lib, x, a: lib.cov(x, fweights=lib.tensor([1, 2, 1, 3, 1]), aweights=a.abs()),
   _cov_weighted, [(2, 5), (5,)], ["matmul", "abs"])
op("corrcoef", lambda lib, x: lib.corrcoef(x), lambda x: np.corrcoef(x), [(3, 6)],
   ["clamp", "diagonal", "sqrt"])
op("corrcoef[1-D].method", lambda lib, x: x.corrcoef(), lambda x: np.float64(1.0), [(5,)],
   ["div"])


def _cdist(a, b, p):
    d = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(float)
    if p == math.inf:
        return d.max(-1)
    return (d ** p).sum(-1) ** (1 / p)


for _p, _prims in ((0, ["sub"]), (1, ["abs"]), (2, ["sqrt"]), (3, ["pow_scalar"]),
                   (0.5, ["pow_scalar"]), (1.5, ["pow_scalar"]), (math.inf, ["abs", "where"])):
    op(f"cdist[p={_p}]", lambda lib, a, b, p=_p: lib.cdist(a, b, p),
       lambda a, b, p=_p: _cdist(a, b, p), [(3, 4), (5, 4)], _prims, xfail=_CDIST_NO_SECOND)
op("cdist[batched]", lambda lib, a, b: lib.cdist(a, b), lambda a, b: _cdist(a, b, 2),
   [(2, 1, 3, 2), (4, 2)], ["sqrt"], xfail=_CDIST_NO_SECOND)
op("cdist[mm]", lambda lib, a, b: lib.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
   lambda a, b: _cdist(a, b, 2), [(3, 4), (5, 4)], ["matmul", "cat", "sqrt"], rtol=1e-4)
op("cdist[p=inf ties]", lambda lib, a, b: lib.cdist(a, b, math.inf),
   lambda a, b: _cdist(a, b, math.inf), [(2, 2), (2, 2)], ["abs"], grad=False,
   fixed=([[0.0, 1.0], [2.0, 2.0]], [[0.0, 1.0], [1.0, 1.0]]))


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    return np.trapezoid(y, x, dx, axis) if hasattr(np, "trapezoid") else np.trapz(y, x, dx, axis)


def _cumtrapz(y, dx, axis):
    y = np.moveaxis(y, axis, -1)
    return np.moveaxis(np.cumsum((y[..., 1:] + y[..., :-1]) * dx / 2, -1), -1, axis)


op("trapezoid", lambda lib, y: lib.trapezoid(y), lambda y: _trapezoid(y), [(3, 5)], ["sum"])
op("trapezoid[x]", lambda lib, y, x: lib.trapezoid(y, x.cumsum(0).exp(), dim=0),
   lambda y, x: _trapezoid(y, np.exp(np.cumsum(x)), axis=0), [(4, 3), (4,)], ["cumsum", "exp"])
op("trapz[dx]", lambda lib, y: lib.trapz(y, dx=0.5, dim=0),
   lambda y: _trapezoid(y, dx=0.5, axis=0), [(4, 3)], ["sum"])
op("cumulative_trapezoid", lambda lib, y: lib.cumulative_trapezoid(y, dx=2.0),
   lambda y: _cumtrapz(y, 2.0, -1), [(3, 5)], ["cumsum"])
op("cumulative_trapezoid[x]", lambda lib, y, x: lib.cumulative_trapezoid(y, x, dim=0),
   lambda y, x: _cumtrapz(y, np.diff(x), 0), [(4, 2), (4,)], ["cumsum"])
op("vander", lambda lib, x: lib.vander(x), lambda x: np.vander(x), [(4,)], ["cumprod"],
   xfail=_VANDER_NO_GRAD)
op("vander[N, increasing]", lambda lib, x: lib.vander(x, 3, increasing=True),
   lambda x: np.vander(x, 3, increasing=True), [(5,)], ["cumprod"], xfail=_VANDER_NO_GRAD)
op("combinations", lambda lib, x: lib.combinations(x),
   lambda x: np.array(list(itertools.combinations(x, 2))), [(4,)], ["index"])
op("combinations[r=3, with_replacement]", lambda lib, x: lib.combinations(x, 3, True),
   lambda x: np.array(list(itertools.combinations_with_replacement(x, 3))), [(3,)], ["index"])


def _renorm(x, p, axis, maxnorm):
    rest = tuple(k for k in range(x.ndim) if k != axis)
    norm = (np.abs(x) ** p).sum(rest, keepdims=True) ** (1 / p)
    return x * np.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)


op("renorm", lambda lib, x: lib.renorm(x, 2, 0, 1.5), lambda x: _renorm(x, 2, 0, 1.5),
   [(4, 3)], ["where", "sqrt"])
op("renorm[p=1, dim=1].method", lambda lib, x: x.renorm(1, 1, 2.0),
   lambda x: _renorm(x, 1, 1, 2.0), [(2, 3, 2)], ["where", "abs"])
op("renorm_", lambda lib, x: (x * 1).renorm_(3, -1, 1.0), lambda x: _renorm(x, 3, 1, 1.0),
   [(3, 4)], ["where"])
