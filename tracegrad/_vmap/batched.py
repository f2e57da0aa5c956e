"""The batched value of ``vmap``: a tensor of one vmap level, and the levels in force.

A ``BatchedTensor`` is what the function under ``vmap`` sees: a ``Tensor`` whose shape,
dtype and device are the logical ones (one example's), holding the physical tensor
``_value`` (every example, the batch dimension first) and the ``_level`` it belongs to.
Nested vmaps nest the wrappers: a level-2 tensor's ``_value`` is a level-1 tensor or a
plain one, so the plain tensor at the bottom has one leading dim per level, outermost level
first. Operations on batched tensors reach the level's bind hook (``transform.py``), which
runs one batched primitive on the physical tensors (``rules.py``).

Its ``_data`` is a read-only zero array of the logical shape and dtype (a stride-0 view),
so the metadata code of composites (``x.shape``, ``x.ndim``, ``x.dtype``) reads the logical
values; no primitive ever computes on it, because the level's hook takes every op first.
"""
import threading

import numpy as np

from ..tensor import Size, Tensor

__all__ = ["BatchedTensor", "wrap", "levels", "current", "unwrap_all", "wrap_all"]


class _Levels(threading.local):
    stack = ()          # the active levels of this thread, outermost first


_levels = _Levels()


class Level:
    """One active ``vmap`` call: its number, batch size and randomness mode; its bind hook,
    and the bind and draw hooks below it."""
    __slots__ = ("id", "size", "randomness", "hook", "below", "below_draw")

    def __init__(self, id, size, randomness):
        self.id, self.size, self.randomness = id, size, randomness


def levels():
    """The active vmap levels of this thread, outermost first."""
    return _levels.stack


def current():
    """The innermost active level, or None."""
    return _levels.stack[-1] if _levels.stack else None


def push(level):
    _levels.stack = _levels.stack + (level,)


def pop():
    _levels.stack = _levels.stack[:-1]


class BatchedTensor(Tensor):
    """A tensor of one vmap level (see the module docstring)."""
    __slots__ = ("_value", "_level")

    @property
    def shape(self):
        return Size(self._data.shape)

    @property
    def device(self):
        return self._value.device

    @property
    def is_cuda(self):
        return self._value.is_cuda

    @property
    def is_cpu(self):
        return self._value.is_cpu

    @property
    def grad_fn(self):
        return self._value.grad_fn

    def _grad_edge(self):
        raise RuntimeError("vmap: backward() of a batched tensor inside vmap is not supported "
                           "(each example would add into one .grad); use tracegrad.func.grad "
                           "or tracegrad.autograd.grad, which give per-example gradients")

    def detach(self):
        return wrap(self._value.detach(), self._level)

    @property
    def data(self):
        return wrap(self._value.data, self._level)

    def requires_grad_(self, requires_grad=True):
        self._value.requires_grad_(requires_grad)
        self._requires_grad = self._value.requires_grad
        return self

    def __repr__(self):
        return f"BatchedTensor(lvl={self._level}, bdim=0, value=\n{self._value!r}\n)"

    __str__ = __repr__

    def _data_dependent(self, what):
        raise RuntimeError(f"vmap: It looks like you're calling {what} on a Tensor. We don't "
                           f"support vmap over {what}: its value differs per batch element. "
                           f"Rewrite it with tensor operations (torch.where, ...)")

    def item(self):
        self._data_dependent(".item()")

    def tolist(self):
        self._data_dependent(".tolist()")

    def numpy(self, *, force=False):
        self._data_dependent(".numpy()")

    def __bool__(self):
        self._data_dependent("data-dependent control flow (bool(tensor))")

    def __float__(self):
        self._data_dependent("float(tensor)")

    def __int__(self):
        self._data_dependent("int(tensor)")

    def __index__(self):
        self._data_dependent("a tensor as an index (__index__)")


def wrap(value, level):
    """``value`` (every example, batch first) as a tensor of vmap level ``level``."""
    logical = tuple(value.shape[1:])
    proxy = np.broadcast_to(np.zeros((), value._data.dtype), logical)
    t = Tensor._make.__func__(BatchedTensor, proxy, dtype=value.dtype,
                              requires_grad=value.requires_grad)
    t._value, t._level = value, level
    return t


def batched_at(x, level_id):
    """Whether ``x`` is a tensor of vmap level ``level_id``."""
    return type(x) is BatchedTensor and x._level == level_id


def unwrap_all(x):
    """``(plain, ids)``: the plain tensor at the bottom of ``x``'s wrappers and the levels it
    is batched at, outermost first (its leading dims, in that order)."""
    ids = []
    while type(x) is BatchedTensor:
        ids.append(x._level)
        x = x._value
    return x, tuple(reversed(ids))


def wrap_all(plain, ids):
    """The inverse of ``unwrap_all``."""
    for i in ids:
        plain = wrap(plain, i)
    return plain


def to_levels(x, active):
    """``x`` as a plain tensor batched at every level of ``active`` (outermost first): leading
    dims of the levels ``x`` lacks are inserted by broadcasting (a view, no copy)."""
    from ..ops.shape_ops import broadcast_to, reshape
    plain, ids = unwrap_all(x)
    if ids == tuple(lv.id for lv in active):
        return plain
    have = dict(zip(ids, plain.shape))
    rest = tuple(plain.shape[len(ids):])
    lead_now = tuple(have.get(lv.id, 1) for lv in active)
    plain = reshape(plain, lead_now + rest)
    return broadcast_to(plain, tuple(lv.size for lv in active) + rest)
