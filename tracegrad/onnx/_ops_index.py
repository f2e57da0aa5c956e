"""The ONNX form of indexing: ``x[key]`` (basic and advanced), and writes through views.

Basic keys are one ``Slice`` (integers as slices of one, squeezed after; ``None`` an
``Unsqueeze``); one index tensor is a ``Gather``; several are broadcast, stacked and
``GatherND``, with their dims placed where NumPy puts them. A write ``x[key] = v`` (or an
in-place op on a view, which the trace functionalises) finds the flat positions of the
written region by applying the same view to ``0, 1, ...`` of the base, then scatters.
"""
import numpy as np

from .. import dtypes
from ._builder import INT64_MAX
from ._ops import EMIT, emits, slice_, unsupported

INT64_MIN = np.iinfo(np.int64).min


# indexing: x[key] ----------------------------------------------------------------------------

def _full_spec(spec, ndim):
    """``spec`` with its Ellipsis spelled out and whole slices for the dims it leaves."""
    consumed = sum(1 for e in spec if e is not None and e is not Ellipsis)
    whole = ("s", None, None, None)
    out = []
    for e in spec:
        if e is Ellipsis:
            out.extend([whole] * (ndim - consumed))
        else:
            out.append(e)
    if Ellipsis not in spec:
        out.extend([whole] * (ndim - consumed))
    return out


@emits("index")
def _index(b, n):
    x = n.inputs[0]
    spec = _full_spec(n.params["spec"], x.ndim)
    tensors = n.inputs[1:]
    advanced = any(type(e) is tuple and e[0] == "t" for e in spec)
    name = b.read(x)
    # slices first: each keeps its dim
    axes, starts, ends, steps = [], [], [], []
    axis = 0
    for e in spec:
        if e is None:
            continue
        if type(e) is tuple and e[0] == "s" and e[1:] not in ((None, None, None),
                                                               (None, None, 1)):
            start, stop, step = e[1:]
            step = 1 if step is None else step
            back = step < 0         # flip's reversed slice: from the end to before the start
            axes.append(axis)
            starts.append((INT64_MAX if back else 0) if start is None else start)
            ends.append((INT64_MIN if back else INT64_MAX) if stop is None else stop)
            steps.append(step)
        axis += 1
    if axes:
        name = slice_(b, name, axes, starts, ends, steps)
    if not advanced:
        return _basic_rest(b, n, name, spec)
    if None in spec:
        raise unsupported(n, "an index that mixes None with index tensors")
    # integers among index tensors are index tensors too (NumPy's rule)
    picks = [(axis, b.read(tensors[e[1]]) if type(e) is tuple else b.scalar(e, dtypes.int64))
             for axis, e in enumerate(spec) if type(e) is not tuple or e[0] == "t"]
    if len(picks) == 1:
        (axis, index), = picks
        return b.op("Gather", [name, index], axis=axis, hint=n.out.name)
    return _gather_nd(b, n, name, picks, x.ndim)


def _basic_rest(b, n, name, spec):
    """Integers drop their dim (a slice of one, squeezed), None adds one."""
    axis, squeeze, out_pos, new = 0, [], 0, []
    starts, ends, axes = [], [], []
    for e in spec:
        if e is None:
            new.append(out_pos)
            out_pos += 1
            continue
        if type(e) is not tuple:
            axes.append(axis)
            starts.append(e)
            ends.append(INT64_MAX if e == -1 else e + 1)
            squeeze.append(axis)
        else:
            out_pos += 1
        axis += 1
    if axes:
        name = slice_(b, name, axes, starts, ends)
        name = b.op("Squeeze", [name, b.ints(squeeze)])
    if new:
        name = b.op("Unsqueeze", [name, b.ints(new)])
    return name


def _gather_nd(b, n, name, picks, ndim):
    """Several index tensors: their dims first, the indices broadcast and stacked, GatherND;
    the result's index dims then go where NumPy puts them (in place when the indexed dims
    are adjacent, else first)."""
    axes = [a for a, _ in picks]
    rest = [a for a in range(ndim) if a not in axes]
    if axes + rest != list(range(ndim)):
        name = b.op("Transpose", [name], perm=axes + rest)
    shapes = [getattr(v, "shape", ()) for v in _index_values(n)]
    bshape = np.broadcast_shapes(*[tuple(int(d) for d in s) for s in shapes])
    shape = b.ints(bshape) if bshape else b.ints([])
    stacked = [b.op("Unsqueeze", [b.op("Expand", [b.cast(i, dtypes.int64), shape]),
                                  b.ints([-1])]) for _, i in picks]
    out = b.op("GatherND", [name, b.op("Concat", stacked, axis=-1)])
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    k = len(bshape)
    if adjacent and axes[0] > 0:        # index dims back to where the first indexed dim was
        lead = list(range(k, k + axes[0]))
        perm = lead + list(range(k)) + list(range(k + axes[0], k + len(rest)))
        out = b.op("Transpose", [out], perm=perm)
    return out


def _index_values(n):
    spec = _full_spec(n.params["spec"], n.inputs[0].ndim)
    tensors = n.inputs[1:]
    return [tensors[e[1]] if type(e) is tuple else e for e in spec
            if type(e) is not tuple or e[0] == "t"]


# writes through views: x[key] = v, and in-place ops on views -----------------------------------

@emits("view_scatter", "index_put")
def _scatter_into(b, n):
    """The base with a region replaced: the region's flat positions are found by applying
    the same view (or index) to the positions 0, 1, ... of the base, then ScatterElements."""
    from ..ir import Node, Value, infer_aval
    from ..ops.core import Aval
    base, src = n.inputs[0], n.inputs[1]
    shape = b.shape(base.shape)
    count = b.op("ReduceProd", [shape], keepdims=0)
    flat = b.op("Range", [b.scalar(0, dtypes.int64), count, b.scalar(1, dtypes.int64)])
    pos = Value(Aval(base.shape, dtypes.int64))
    b.env[pos] = b.op("Reshape", [flat, shape], hint="positions")
    steps = [(p.name, (), params) for p, params in n.params["steps"]] if n.op == "view_scatter" \
        else [("index", tuple(n.inputs[2:]), {"spec": n.params["spec"]})]
    for op, extra, params in steps:        # the view, applied to the positions
        ins = (pos,) + extra
        step = Node(op, ins, params, Value(infer_aval(op, ins, params)), n.site)
        if op not in EMIT:
            raise unsupported(n, f"a write through a '{op}' view")
        b.env[step.out] = EMIT[op](b, step)
        pos = step.out
    values = b.op("Expand", [b.as_dtype(src, n.out.dtype), b.shape(pos.shape)])
    minus_one = b.ints([-1])
    out = b.op("ScatterElements", [b.op("Reshape", [b.read(base), minus_one]),
                                   b.op("Reshape", [b.read(pos), minus_one]),
                                   b.op("Reshape", [values, minus_one])], axis=0)
    return b.op("Reshape", [out, shape], hint=n.out.name)


__all__ = []
