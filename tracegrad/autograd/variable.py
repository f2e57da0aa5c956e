"""``Variable``: the deprecated wrapper, kept so old code runs.

``Variable(t, requires_grad=...)`` returns a tensor sharing ``t``'s storage.
``volatile=True`` only warns, as PyTorch's does: it was removed, and has no effect
(``with tracegrad.no_grad():`` is what it meant).
"""
import warnings


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        from ..tensor import Tensor
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad=False, volatile=False):
        from ..creation import tensor as make_tensor
        from ..tensor import Tensor
        if data is None:
            data = make_tensor([])
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        t = Tensor._make(data._data, vc=data._vc)
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "tracegrad.no_grad():` instead.", UserWarning, stacklevel=2)
        if requires_grad:
            t.requires_grad_(True)
        return t
