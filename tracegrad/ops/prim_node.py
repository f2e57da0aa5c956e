"""The backward half of the primitive table: ``Aval`` and the backward node ``PrimNode``.

``PrimNode.apply`` calls a primitive's VJP rules on the saved inputs and undoes
broadcasting and dtype promotion once, for every rule (``sum_to_shape``, ``to_copy``), so
that rules never do it. ``binding._record`` builds the node when an op runs eagerly.
"""
from .. import dtypes
from ..autograd.anomaly_mode import _Anomaly, forward_stack
from ..autograd.graph import FREED_ERROR, Node, SavedTensor, _seq

_PLAIN = ()     # PrimNode.apply: the inputs need no reduction nor cast (see binding._record)


class Aval:
    """An abstract value: what the shape/dtype rules and the IR know of a tensor."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Aval({self.shape}, {self.dtype})"

    def __eq__(self, other):
        return isinstance(other, Aval) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))


class PrimNode(Node):
    """The backward node of one primitive application."""
    __slots__ = ("prim", "params", "saved", "in_meta")

    def __init__(self, next_functions, out_meta, prim, params, in_meta, saved):
        # Node.__init__'s fields, set here: one call less on the hot path
        self.next_functions, self._out_meta, self._seq = next_functions, out_meta, next(_seq)
        self._pre_hooks = self._post_hooks = self._tensor_pre_hooks = self._retain_grad = None
        self._anomaly_trace = forward_stack() if _Anomaly.enabled else None
        self._metadata = None
        self.prim, self.params, self.in_meta, self.saved = prim, params, in_meta, saved

    def apply(self, grads):
        saved = self.saved
        if saved is None:
            raise RuntimeError(FREED_ERROR)
        g = grads[0]
        prim = self.prim
        in_meta = self.in_meta
        last = saved[-1]
        out = last.unpack(self) if last is not None else None
        if in_meta is None:     # elementwise, its tensor inputs all like the output (_record)
            om = self._out_meta[0]
            if g is not None and g._data.dtype is om[1] and g._data.shape == om[0]:
                in_meta = _PLAIN    # nothing to undo
            else:               # a gradient of another dtype or shape reached the node
                in_meta = [om[:2] if s is None or type(s) is SavedTensor else None
                           for s in saved[:-1]]
        ins = []
        for s in saved[:-1]:
            ins.append(s.unpack(self) if type(s) is SavedTensor else s)
        if prim.reads_avals:    # an unsaved input: its shape and dtype, which rules may read
            for i, (s, m) in enumerate(zip(saved, in_meta)):
                if s is None and m is not None:
                    ins[i] = Aval(m[0], dtypes.from_numpy(m[1]))
        nexts = self.next_functions
        params = self.params
        if prim.vjp_all:         # one rule for all inputs (variadic primitives)
            raw = prim.vjp(g, *ins, out=out, **params)
        elif prim.out_positional and not params:    # the commonest call, the cheapest way
            raw = []
            for rule, (fn, _) in zip(prim.vjp, nexts):
                raw.append(None if fn is None or rule is None else rule(g, *ins, out))
        else:
            raw = []
            for rule, (fn, _) in zip(prim.vjp, nexts):
                raw.append(None if fn is None or rule is None else rule(g, *ins, out=out,
                                                                         **params))
        if in_meta is _PLAIN:
            return raw
        res = []
        for r, (fn, _), meta in zip(raw, nexts, in_meta):
            if r is None or fn is None:
                res.append(None)
                continue
            data = r._data
            if data.shape != meta[0]:
                r = sum_to_shape(r, meta[0])
            if data.dtype is not meta[1] and data.dtype != meta[1]:
                r = to_copy(r, dtype=dtypes.from_numpy(meta[1]))
            res.append(r)
        return res

    def release(self):
        self.saved = None

    def __getattr__(self, name):
        if name.startswith("_saved_"):
            key = name[7:]
            if self.saved is None:
                raise RuntimeError(FREED_ERROR)
            if key == "result" and self.prim.saves_result:
                return self.saved[-1].unpack(self)
            if key in self.prim.args and key in self.prim.saves:
                s = self.saved[self.prim.args.index(key)]
                return s.unpack(self) if type(s) is SavedTensor else s
            if key in self.params:
                return self.params[key]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


# The ops that ``sum_to_shape`` and ``to_copy`` are made of, declared by the primitive
# families above this module, which set them when imported: ``reduce_ops`` ``reduce_sum``,
# ``shape_ops`` ``reshape``, ``elementwise`` ``convert``.
reduce_sum = reshape = convert = None


def sum_to_shape(g, shape):
    """Undo broadcasting: sum ``g`` down to ``shape`` (the adjoint of broadcast_to)."""
    lead = g.ndim - len(shape)
    if lead < 0:    # an assigned value may have leading 1s that NumPy drops: y[0] = w[None]
        return reshape(sum_to_shape(g, shape[-lead:]), shape)
    dims = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    if dims:
        g = reduce_sum(g, dims, keepdim=True)
    if lead:
        g = reshape(g, shape)
    return g


def to_copy(t, dtype=None, device=None, copy=False):
    return convert(t, dtype=dtype, device=device, copy=copy)
