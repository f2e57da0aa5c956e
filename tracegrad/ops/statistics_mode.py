"""``mode``: the most frequent value along a dim and where it occurs, as PyTorch's CPU kernel.

A primitive picks the index (no gradient) and the values are gathered there, so their
gradient scatters to it, as PyTorch's. The value is the smallest of the most frequent;
among its copies the index is the one PyTorch's CPU kernel picks, the last of the run its
``std::sort`` leaves: the last copy in rows of up to 16 (an insertion sort), and for
longer rows with a tie that sort replayed (``_std_sort_order``).
"""
import numpy as np

from .. import dtypes
from .core import Primitive, bind, op_error
from .declare import method
from .index_ops import gather
from .more_ops import values_indices
from .reduce_more import running
from .rules import norm_dim
from .shape_ops import squeeze


def _std_sort_order(keys):
    """The positions of ``keys`` in the order libstdc++'s std::sort leaves (key, position)
    pairs compared by key alone, as PyTorch's CPU mode sorts a row: introsort (median-of-
    three quicksort down to runs of 16, heapsort past depth 2 log2 n), then insertion sort.
    Equal keys end up in an order of its own, which decides mode's index at a tie."""
    a = list(range(len(keys)))

    def less(i, j):
        return keys[i] < keys[j]

    def sift(first, hole, n, v):        # __adjust_heap
        top, child = hole, hole
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if n % 2 == 0 and child == (n - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], v):
            a[first + hole] = a[first + parent]
            hole, parent = parent, (parent - 1) // 2
        a[first + hole] = v

    def heapsort(first, last):
        n = last - first
        for parent in range((n - 2) // 2, -1, -1):
            sift(first, parent, n, a[first + parent])
        while last - first > 1:
            last -= 1
            v, a[last] = a[last], a[first]
            sift(first, 0, last - first, v)

    def loop(first, last, depth):
        while last - first > 16:
            if depth == 0:
                heapsort(first, last)
                return
            depth -= 1
            x, y, z, mid = first + 1, first + (last - first) // 2, last - 1, None
            if less(a[x], a[y]):
                mid = y if less(a[y], a[z]) else (z if less(a[x], a[z]) else x)
            else:
                mid = x if less(a[x], a[z]) else (z if less(a[y], a[z]) else y)
            a[first], a[mid] = a[mid], a[first]
            lo, hi = first + 1, last
            while True:
                while less(a[lo], a[first]):
                    lo += 1
                hi -= 1
                while less(a[first], a[hi]):
                    hi -= 1
                if not lo < hi:
                    break
                a[lo], a[hi] = a[hi], a[lo]
                lo += 1
            loop(lo, last, depth)
            last = lo

    n = len(a)
    if n > 1:
        loop(0, n, 2 * (n.bit_length() - 1))
    for i in range(1, n):          # insertion sort: stable, as libstdc++'s final pass
        v, j = a[i], i
        while j > 0 and less(v, a[j - 1]):
            a[j] = a[j - 1]
            j -= 1
        a[j] = v
    return a


def _mode_index_impl(xp, x, dim):
    """The index along ``dim`` of the mode: the smallest of the most frequent values, and
    of its copies the one PyTorch's sort puts last (the last one in rows of up to 16, where
    that sort is an insertion sort; longer rows with a tie replay its introsort)."""
    moved = xp.moveaxis(x, dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    n = rows.shape[1]
    order = xp.argsort(rows, axis=1, kind="stable")
    ranked = xp.take_along_axis(rows, order, axis=1)
    new_run = ranked[:, 1:] != ranked[:, :-1]
    pos = xp.arange(n)
    starts = xp.concatenate([xp.ones((rows.shape[0], 1), dtype=bool), new_run], axis=1)
    ends = xp.concatenate([new_run, xp.ones((rows.shape[0], 1), dtype=bool)], axis=1)
    run_start = running(xp, xp.maximum, xp.where(starts, pos, 0), 1)
    counts = xp.where(ends, pos - run_start + 1, 0)
    best = xp.argmax(counts, axis=1)
    idx = order[xp.arange(rows.shape[0]), best]
    if n > 16:
        for r in xp.nonzero(counts.max(axis=1) > 1)[0].tolist():
            keys = rows[r].tolist()
            idx[r] = _std_sort_order(keys)[int(best[r])]
    return xp.moveaxis(idx.reshape(moved.shape[:-1] + (1,)), -1, dim).astype(np.int64)


mode_index_p = Primitive(
    "mode_index", _mode_index_impl,
    dtype=lambda x, dim: dtypes.int64,
    shape=lambda s, dim: tuple(1 if d == dim else n for d, n in enumerate(s)), kind="other")


@method
def mode(input, dim=-1, keepdim=False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest at a tie)
    and where it occurs (PyTorch's pick among its copies); the gradient of values scatters
    there."""
    if input.ndim == 0:
        from ..creation import zeros
        return values_indices(input.clone(), zeros((), dtype=dtypes.int64,
                                                   device=input.device))
    d = norm_dim(dim, input.ndim)
    if input.shape[d] == 0:
        raise op_error("mode", f"mode(): Expected reduction dim {d} to have non-zero size.",
                       IndexError)
    idx = bind(mode_index_p, input.detach(), dim=d)
    values = gather(input, d, idx)
    if not keepdim:
        values, idx = squeeze(values, d), squeeze(idx, d)
    return values_indices(values, idx)

