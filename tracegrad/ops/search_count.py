"""PyTorch's searching and counting ops: ``searchsorted``, ``bucketize``, ``bincount``,
``histc``, ``histogram``, ``isin``, ``equal`` and ``unique_consecutive`` (``mode`` is in
``statistics.py``).

Their results are integers, booleans or counts, which have no gradient, so each is a
primitive without a VJP rule (or eager NumPy).

Sizes: ``histc`` and ``histogram`` have ``bins`` entries whatever the data, so they
compile into the graph. ``bincount`` (``max(input) + 1`` entries) and
``unique_consecutive`` (one entry per run) do not: they end the graph with
``graph_break`` (``data_dependent.py``) and run on NumPy eagerly.

The counting follows PyTorch's CPU kernels: ``histc`` maps a value to its bin by
``(x - min) * bins / (max - min)`` in the input's dtype, ``histogram`` by a search of its
edges, both with the last bin closed on the right; values outside the range and NaNs are
skipped. ``searchsorted`` compares as PyTorch's binary search does, so a NaN boundary
counts as below every value and a NaN value as above every boundary.
"""
import math
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..device import xp_of
from ..tensor import Tensor
from .core import Primitive, bind, op_error
from .data_dependent import graph_break
from .declare import method
from .elementwise import eq
from .index_ops import gather
from .reduce_ops import all as all_
from .rules import norm_dim

histogram_result = namedtuple("histogram", ["hist", "bin_edges"])
_C_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half", "int64": "long int"}


def _as_tensor(value, like=None):
    from ..creation import tensor
    if isinstance(value, Tensor):
        return value
    device = like.device if isinstance(like, Tensor) else None
    return tensor(value, device=device)


def scalar_name(dtype):
    """PyTorch's name of a dtype in messages: ``Float``, ``Double``, ``Long``."""
    return dtypes.type_name(dtype)[len("tracegrad."):-len("Tensor")]


# searchsorted and bucketize -----------------------------------------------------------------

def _binary_search(xp, rows, vals, right):
    """PyTorch's lower (upper) bound of each row of ``vals`` in the same row of ``rows``,
    all rows at once: a NaN boundary counts as below every value, a NaN value as above
    every boundary (its comparisons are false), where NumPy's searchsorted sorts NaN last."""
    start = xp.zeros(vals.shape, dtype=np.int64)
    end = xp.full(vals.shape, rows.shape[1], dtype=np.int64)
    active = start < end
    while active.any():
        mid = (start + end) // 2
        mid_val = xp.take_along_axis(rows, xp.minimum(mid, rows.shape[1] - 1), axis=1)
        go_right = ~(mid_val > vals) if right else ~(mid_val >= vals)
        start = xp.where(active & go_right, mid + 1, start)
        end = xp.where(active & ~go_right, mid, end)
        active = start < end
    return start


def _searchsorted_impl(xp, seq, values, right, out_int32):
    dtype = np.int32 if out_int32 else np.int64
    if seq.ndim == 1:
        rows, vals = seq.reshape(1, -1), values.reshape(1, -1)
    else:
        n = math.prod(seq.shape[:-1])
        rows = seq.reshape(n, seq.shape[-1])
        vals = values.reshape(n, values.shape[-1])
    return _binary_search(xp, rows, vals, right).reshape(values.shape).astype(dtype)


searchsorted_p = Primitive(
    "searchsorted", _searchsorted_impl, args=("sorted_sequence", "self"),
    dtype=lambda s, v, right, out_int32: dtypes.int32 if out_int32 else dtypes.int64,
    shape=lambda s, v, **_: tuple(v), kind="other")


def _check_batch(seq, values):
    if seq.ndim == 0:
        raise op_error("searchsorted", "torch.searchsorted(): boundaries tensor should have "
                                       "positive dimension, but got 0 dimension")
    if seq.ndim > 1 and values.ndim == 0:
        raise op_error("searchsorted", f"torch.searchsorted(): input value can be a scalar only "
                                       f"when boundaries tensor dimension is 1, but we got "
                                       f"boundaries tensor dim({seq.ndim}) and input value's "
                                       f"dim(0) numel(1)")
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise op_error("searchsorted", f"torch.searchsorted(): boundaries tensor should be 1 "
                                       f"dimension or the first N-1 dimensions of boundaries "
                                       f"tensor and input value tensor must match, but we got "
                                       f"boundaries tensor {list(seq.shape)} and input value "
                                       f"tensor {list(values.shape)}")


def _sorted_by(seq, sorter):
    if tuple(sorter.shape) != tuple(seq.shape):
        raise op_error("searchsorted", f"torch.searchsorted(): boundary and sorter must have the "
                                       f"same size, but got boundary tensor {list(seq.shape)}"
                                       f"and got sorter tensor {list(sorter.shape)}")
    if sorter.dtype is not dtypes.int64:
        raise op_error("searchsorted", f"torch.searchsorted(): sorter must be a tensor of long "
                                       f"dtype but got dtype {scalar_name(sorter.dtype)}")
    n = seq.shape[-1]
    if sorter.numel() and bool(((sorter < 0) | (sorter >= n)).any()):
        raise op_error("searchsorted", "torch.searchsorted(): sorter index out of range")
    return gather(seq, -1, sorter)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Where each value would go in the last dim of ``sorted_sequence`` (1-D, or with the
    values' leading dims) to keep it sorted: the first such place, or with ``right`` (or
    ``side="right"``) the last. ``sorter``: the indices that sort an unsorted sequence."""
    if side is not None:
        if side not in ("left", "right"):
            raise op_error("searchsorted", f"torch.searchsorted(): side can only be 'left' or "
                                           f"'right' but got {side}")
        if right and side == "left":
            raise op_error("searchsorted", "torch.searchsorted(): side and right can't be set "
                                           "to opposites, got side of left while right was True")
        right = side == "right"
    values = _as_tensor(input, sorted_sequence)
    _check_batch(sorted_sequence, values)
    seq = sorted_sequence if sorter is None else _sorted_by(sorted_sequence, sorter)
    if seq.dtype is not values.dtype:
        common = dtypes.result_type(seq, values)
        seq, values = seq.to(common), values.to(common)
    return bind(searchsorted_p, seq.detach(), values.detach(), right=bool(right),
                out_int32=bool(out_int32))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value: ``i`` with ``boundaries[i-1] < x <= boundaries[i]`` (with
    ``right``: ``boundaries[i-1] <= x < boundaries[i]``)."""
    if boundaries.ndim != 1:
        raise op_error("bucketize", f"boundaries tensor must be 1 dimension, but got "
                                    f"dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# bincount: its length depends on the data ------------------------------------------------------

@method
def bincount(input, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs (the sum of their ``weights`` if given)."""
    graph_break("bincount")
    if minlength < 0:
        raise op_error("bincount", "minlength should be >= 0")
    if input.dtype is dtypes.bool or input.dtype.is_floating_point:
        raise op_error("bincount", f'"bincount_cpu" not implemented for '
                                   f"'{scalar_name(input.dtype)}'", NotImplementedError)
    data = input._data
    xp = xp_of(data)
    if input.ndim != 1 or (data.size and int(data.min()) < 0):
        raise op_error("bincount", "bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise op_error("bincount", "weights should be 1-d and have the same length as input")
    length = max(minlength, int(data.max()) + 1 if data.size else 0)
    if weights is None:
        return Tensor._make(xp.bincount(data, minlength=length).astype(np.int64))
    out_dtype = np.float32 if weights.dtype is dtypes.float32 else np.float64
    out = xp.zeros(length, dtype=out_dtype)
    xp.add.at(out, data, weights._data.astype(out_dtype))     # in order, as PyTorch adds
    return Tensor._make(out)


# histc and histogram ----------------------------------------------------------------------------

def _torch_linspace(xp, lo, hi, steps, dtype):
    """PyTorch's CPU linspace in ``dtype``: from both ends towards the middle, each point
    one fused multiply-add (its vectorized kernel's), emulated in a wider float. Computed by
    NumPy (CuPy has no long double) and moved to ``xp``'s device: ``steps`` is a bin count."""
    start, end = dtype.type(lo), dtype.type(hi)
    if steps == 1:
        return xp.full(1, start, dtype=dtype)
    step = (end - start) / dtype.type(steps - 1)
    wide = np.float64 if dtype.itemsize < 8 else np.longdouble
    i = np.arange(steps)
    from_start = wide(start) + wide(step) * i.astype(wide)
    from_end = wide(end) - wide(step) * (steps - 1 - i).astype(wide)
    edges = np.where(i < steps // 2, from_start, from_end).astype(dtype)
    return edges if xp is np else xp.asarray(edges)


def _histc_range(xp, x, lo, hi):
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"histc: torch.histc: range of [{lo:g}, {hi:g}] is not finite")
    if not lo < hi:
        raise RuntimeError("histc: torch.histc: max must be larger than min")
    return lo, hi


def _histc_impl(xp, x, bins, lo, hi):
    lo, hi = _histc_range(xp, x, lo, hi)
    edges = _torch_linspace(xp, lo, hi, bins + 1, x.dtype)
    left, right = edges[0], edges[-1]
    flat = x.reshape(-1)
    kept = flat[(flat >= left) & (flat <= right)]
    pos = ((kept - left) * bins / (right - left)).astype(np.int64)
    pos = xp.minimum(pos, bins - 1)
    return xp.bincount(pos, minlength=bins).astype(x.dtype)


histc_p = Primitive(
    "histc", _histc_impl, dtype=lambda x, **_: x.dtype, shape=lambda s, bins, **_: (bins,),
    kind="other")


def _float_only(name, input, kernel):
    if not input.dtype.is_floating_point:
        raise op_error(name, f'"{kernel}" not implemented for '
                             f"'{scalar_name(input.dtype)}'", NotImplementedError)


def _check_bins(name, bins):
    if bins <= 0:
        raise op_error(name, f"torch.histogram(): bins must be > 0, but got {bins} for "
                             f"dimension 0")


@method
def histc(input, bins=100, min=0, max=0):  # noqa: A002 - PyTorch's names
    """Counts of ``bins`` equal bins over ``[min, max]`` (the data's range when
    ``min == max``); values outside are not counted."""
    _float_only("histc", input, "histogram_cpu")
    _check_bins("histc", bins)
    return bind(histc_p, input.detach(), bins=int(bins), lo=float(min), hi=float(max))


def _histogram_edges_impl(xp, x, bins, lo, hi):
    if lo is None:
        lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"histogram: torch.histogramdd: dimension 0's range [{lo:g}, "
                           f"{hi:g}] is not finite")
    if lo > hi:
        raise RuntimeError(f"histogram: torch.histogramdd: min should not exceed max, but got "
                           f"min {lo:g} max {hi:g} for dimension 0")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return _torch_linspace(xp, lo, hi, bins + 1, x.dtype)


histogram_edges_p = Primitive(
    "histogram_edges", _histogram_edges_impl, dtype=lambda x, **_: x.dtype,
    shape=lambda s, bins, **_: (bins + 1,), kind="other")


def _histogram_impl(xp, x, edges, weight, density):
    n = edges.shape[0] - 1
    flat, w = x.reshape(-1), weight.reshape(-1)
    kept = (flat >= edges[0]) & (flat <= edges[-1])
    pos = xp.searchsorted(edges, flat[kept], side="right") - 1
    pos = xp.minimum(pos, n - 1)
    hist = xp.zeros(n, dtype=x.dtype)
    xp.add.at(hist, pos, w[kept])
    if density:
        hist = hist / hist.sum()
        hist = hist / xp.diff(edges)
    return hist.astype(x.dtype, copy=False)


histogram_count_p = Primitive(
    "histogram_count", _histogram_impl, args=("self", "bins", "weight"),
    dtype=lambda x, e, w, **_: x.dtype, shape=lambda s, e, w, **_: (e[0] - 1,), kind="other")


@method
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """``(hist, bin_edges)``: counts (or ``weight`` sums; a density with ``density``) of the
    values in ``bins`` equal bins over ``range`` (the data's), or in the given edges."""
    _float_only("histogram", input, "histogramdd")
    x = input.detach()
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            raise op_error("histogram", f"torch.histogramdd: bins tensor should have one "
                                        f"dimension, but got {bins.ndim} dimensions in the "
                                        f"bins tensor for dimension 0")
        if bins.dtype is not x.dtype:
            raise op_error("histogram", f"torch.histogramdd: input tensor and bins tensors "
                                        f"should have the same dtype, but got input with dtype "
                                        f"{_C_NAMES.get(x.dtype.name, x.dtype.name)} and bins for"
                                        f" dimension 0 with dtype "
                                        f"{_C_NAMES.get(bins.dtype.name, bins.dtype.name)}")
        _check_bins("histogram", bins.shape[0] - 1)
        edges = bins.detach()
    else:
        _check_bins("histogram", bins)
        lo, hi = (None, None) if range is None else (float(range[0]), float(range[1]))
        edges = bind(histogram_edges_p, x, bins=int(bins), lo=lo, hi=hi)
    if weight is None:
        from ..creation import ones_like
        weight = ones_like(x)
    elif tuple(weight.shape) != tuple(input.shape):
        raise op_error("histogram", f"torch.histogramdd: if weight tensor is provided it should "
                                    f"have the same shape as the input tensor excluding its "
                                    f"innermost dimension, but got input with shape "
                                    f"{list(input.reshape(-1, 1).shape)} and weight with shape "
                                    f"{list(weight.shape)}")
    hist = bind(histogram_count_p, x, edges, weight.detach().to(x.dtype), density=bool(density))
    return histogram_result(hist, edges)


# membership and equality ------------------------------------------------------------------------

isin_p = Primitive(
    "isin", lambda xp, a, b, invert: xp.isin(a, b, invert=invert),
    args=("elements", "test_elements"), dtype=lambda a, b, **_: dtypes.bool,
    shape=lambda a, b, **_: tuple(a), kind="other")


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of ``elements`` is among ``test_elements`` (``invert``: is not).
    ``assume_unique`` is a speed hint only; the result is the same."""
    a = _as_tensor(elements, test_elements)
    b = _as_tensor(test_elements, elements)
    for t in (a, b):
        if t.dtype is dtypes.bool:
            raise op_error("isin", "Unsupported input type encountered for isin(): Bool")
    common = dtypes.result_type(a, b)
    return bind(isin_p, a.detach().to(common), b.detach().to(common), invert=bool(invert))


def equal(input, other):
    """True when both have the same shape and equal elements (NaN equals nothing)."""
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"equal(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(all_(eq(input.detach(), other.detach())).item())


# unique_consecutive: its length depends on the data ----------------------------------------------

@method
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive elements (or slices along ``dim``) once; with
    ``return_inverse`` the run of each element, with ``return_counts`` each run's length."""
    graph_break("unique_consecutive")
    data = input._data
    xp = xp_of(data)
    if dim is None:
        flat = data.reshape(-1)
        starts = xp.concatenate([flat[:1] == flat[:1], flat[1:] != flat[:-1]])
        values = flat[starts]
        inverse_shape = data.shape
    else:
        dim = norm_dim(dim, max(input.ndim, 1))
        if data.size == 0 and data.shape[dim] != 0:
            raise op_error("unique_consecutive", "There are 0 sized dimensions, and they aren't "
                                                 "selected, so unique cannot be applied")
        moved = xp.moveaxis(data, dim, 0)
        rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
        changed = (rows[1:] != rows[:-1]).any(axis=1) if rows.shape[0] else \
            xp.zeros(0, dtype=bool)
        starts = xp.concatenate([xp.ones(min(rows.shape[0], 1), dtype=bool), changed])
        values = xp.moveaxis(moved[starts], 0, dim)
        inverse_shape = (data.shape[dim],)
    inverse = xp.cumsum(starts) - 1
    out = [Tensor._make(xp.ascontiguousarray(values))]
    if return_inverse:
        out.append(Tensor._make(inverse.reshape(inverse_shape).astype(np.int64)))
    if return_counts:
        bounds = xp.concatenate([xp.nonzero(starts)[0], [starts.shape[0]]])
        out.append(Tensor._make(xp.diff(bounds).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


__all__ = ["searchsorted", "bucketize", "bincount", "histc", "histogram", "isin", "equal",
           "unique_consecutive"]
