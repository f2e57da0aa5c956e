"""The gradient of a tensor read by many basic slices (``unbind`` over time steps,
``chunk``, ``x[t]`` in a loop): the slices' gradients added up in one buffer
(``index_backward_sum``), instead of a full-size ``index_backward`` (zeros with the slice
written) and a full-size add per slice.

The eager engine gathers them lazily: a basic index node gives its input a ``SliceGrads``
(``LAZY_VJP``), the gradients that reach that tensor add up in it, and it becomes one
tensor when the tensor's node runs. The compiled backward pass gathers them alike
(``passes/autodiff.py``).
"""
from ..autograd.engine import LAZY_VJP, LazyGradient
from .core import Primitive, bind
from .index_ops import build_key, index_backward, index_p


def _index_backward_sum_impl(xp, *grads, specs, shape):
    out = xp.zeros(shape, dtype=grads[0].dtype)
    for g, spec in zip(grads, specs):
        out[build_key(spec, ())] += g
    return out


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
