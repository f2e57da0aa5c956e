"""The gradient of a tensor read by many basic slices (``unbind`` over time steps,
``chunk``, ``x[t]`` in a loop): the slices' gradients added up in one buffer
(``index_backward_sum``), instead of a full-size ``index_backward`` (zeros with the slice
written) and a full-size add per slice.

The eager engine gathers them lazily: a basic index node gives its input a ``SliceGrads``
(``LAZY_VJP``), the gradients that reach that tensor add up in it, and it becomes one
tensor when the tensor's node runs. The compiled backward pass gathers them alike
(``passes/autodiff.py``).
"""
import functools
import math

from ..autograd.engine import LAZY_VJP, LazyGradient
from .core import Primitive, bind
from .index_ops import build_key, index_backward, index_p


def _index_backward_sum_impl(xp, *grads, specs, shape):
    shape = tuple(shape)
    if _tiles(specs, shape):            # each element written once: no zeros, no adds
        joined = _joined(specs, shape)
        if joined is not None and all(g.dtype == grads[0].dtype for g in grads):
            axis, order, stacked = joined   # side by side along one axis: one copy
            parts = [grads[i] for i in order]
            return xp.stack(parts, axis) if stacked else xp.concatenate(parts, axis)
        out = xp.empty(shape, dtype=grads[0].dtype)
        for g, spec in zip(grads, specs):
            out[build_key(spec, ())] = g
        return out
    out = xp.zeros(shape, dtype=grads[0].dtype)
    for g, spec in zip(grads, specs):
        out[build_key(spec, ())] += g
    return out


def joined(specs, shape):
    """``(axis, order, stacked)`` (as ``_joined``) where the slices ``specs`` tile an array of
    ``shape`` side by side along one axis: the sum of their gradients is then the gradients
    concatenated (stacked, for int indices) in that order; None otherwise."""
    return _joined(specs, shape) if _tiles(specs, shape) else None


@functools.lru_cache(maxsize=256)
def _tiles(specs, shape):
    """Whether the slices ``specs`` of an array of ``shape`` cover it exactly once (the
    gates of an LSTM's [B, 4H] pre-activations, the steps of ``unbind``): then the sum is
    the slices written side by side."""
    if not all(type(n) is int for n in shape):
        return False
    boxes = [_box(spec, shape) for spec in specs]
    if any(b is None for b in boxes):
        return False
    volume = sum(math.prod(hi - lo for lo, hi in b) for b in boxes)
    if volume != math.prod(shape):
        return False
    return all(any(a[0] >= b[1] or b[0] >= a[1] for a, b in zip(p, q))
               for i, p in enumerate(boxes) for q in boxes[i + 1:])


@functools.lru_cache(maxsize=256)
def _joined(specs, shape):
    """For tiling ``specs`` that differ along one axis only (an LSTM's gates, ``unbind``'s
    steps): ``(axis, order, stacked)``, the gradients in the order they lie along it,
    ``stacked`` where each is one int index there (its axis removed); else None."""
    boxes = [_box(spec, shape) for spec in specs]
    differ = [a for a in range(len(shape)) if len({b[a] for b in boxes}) > 1]
    if len(differ) != 1:
        return None
    axis = differ[0]
    kinds = set()
    for spec in specs:
        for a, item in enumerate(spec):
            kind = "int" if type(item) is int else "slice"
            if a == axis:
                kinds.add(kind)
            elif kind == "int":
                return None     # another axis removed: the parts' axes would shift
    if len(kinds) != 1 or any(len(spec) <= axis for spec in specs):
        return None
    order = tuple(sorted(range(len(boxes)), key=lambda i: boxes[i][axis][0]))
    return axis, order, kinds == {"int"}


def _box(spec, shape):
    """Per axis ``(start, stop)`` of a basic index of unit steps (ints and slices), or None."""
    box, axis = [], 0
    for s in spec:
        if axis >= len(shape):
            return None
        n = shape[axis]
        if type(s) is int:
            k = s + n if s < 0 else s
            box.append((k, k + 1))
        elif type(s) is tuple and s[0] == "s" and s[3] in (None, 1) \
                and all(v is None or type(v) is int for v in s[1:3]):
            start, stop, _ = slice(s[1], s[2]).indices(n)
            box.append((start, max(start, stop)))
        else:
            return None
        axis += 1
    return tuple(box) + tuple((0, n) for n in shape[axis:])


# The sum of index_backward(g_i, spec_i, shape) over basic specs, in one buffer: the gradient
# of a tensor read by many slices (unbind, chunk, x[t] in a loop), which would otherwise
# take a full-size zeros and a full-size add per slice. Compiled backward passes gather the
# slices' gradients into it (passes/autodiff.py).
index_backward_sum_p = Primitive(
    "index_backward_sum", _index_backward_sum_impl, args=("*grads",),
    dtype=lambda *gs, specs, shape: gs[0].dtype, shape=lambda *s, specs, shape: tuple(shape),
    vjp=lambda g, *gs, out, specs, shape: tuple(bind(index_p, g, spec=s) for s in specs),
    kind="other")


def index_backward_sum(grads, specs, shape):
    """``sum_i index_backward(grads[i], (), specs[i], shape)`` for basic ``specs``."""
    return bind(index_backward_sum_p, *grads, specs=tuple(specs), shape=tuple(shape))


class SliceGrads(LazyGradient):
    """The gradient of a tensor read by basic slices, as the engine gathers it: the slices'
    gradients (with their specs) and any dense gradient that reached the tensor too; made
    one tensor (``index_backward_sum``) only when the tensor's node runs."""
    __slots__ = ("parts", "shape", "dense")

    def __init__(self, parts, shape, dense=None):
        self.parts, self.shape, self.dense = parts, shape, dense

    def plus(self, other):
        if isinstance(other, SliceGrads):
            if other.shape != self.shape:
                return self.tensor() + other.tensor()
            dense = (self.dense if other.dense is None else other.dense if self.dense is None
                     else self.dense + other.dense)
            return SliceGrads(self.parts + other.parts, self.shape, dense)
        return SliceGrads(self.parts, self.shape,
                          other if self.dense is None else self.dense + other)

    def tensor(self):
        if len(self.parts) == 1:
            g, spec = self.parts[0]
            out = index_backward(g, (), spec, self.shape)
        else:
            out = index_backward_sum([g for g, _ in self.parts], [s for _, s in self.parts],
                                     self.shape)
        return out if self.dense is None else self.dense + out


def _lazy_index_vjp(node, grads):
    """The engine's rule for a basic index node (``x[t]``, ``unbind``, ``chunk``): its
    input's gradient as a ``SliceGrads``, so that the many slices of one tensor add up in
    one buffer. None (apply the node as usual) for an index with tensors, a freed node, or
    a gradient of another shape or dtype than the node's output."""
    g = grads[0]
    if (len(node.next_functions) != 1 or node.saved is None or g is None
            or node.in_meta is None):
        return None
    shape, dtype = node.in_meta[0]
    out_shape, out_dtype = node._out_meta[0][:2]
    data = g._data
    if data.shape != out_shape or data.dtype != out_dtype or out_dtype != dtype:
        return None
    return [SliceGrads([(g, node.params["spec"])], shape)]


LAZY_VJP[index_p] = _lazy_index_vjp
