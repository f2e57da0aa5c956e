"""``nn.Parameter``: a leaf tensor that a ``Module`` registers when it is assigned.

A ``Parameter`` is a ``Tensor`` subclass (so ``isinstance(p, nn.Parameter)``
holds and every tensor op accepts it). ``Parameter(data)`` shares ``data``'s
storage and version counter, as PyTorch's ``_make_subclass`` does, and
requires grad by default. Results of ops on a parameter are plain tensors.
"""
from ..creation import empty
from ..tensor import Tensor


class Parameter(Tensor):
    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): expected data to be a Tensor, but got "
                            f"{type(data).__name__}")
        p = cls._make(data._data, vc=data._vc)
        p.requires_grad_(requires_grad)
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        # a pickled parameter comes back as a parameter, holding a plain tensor's payload
        return (_rebuild_parameter, (Tensor.__reduce_ex__(self, proto), self._requires_grad))


def _rebuild_parameter(tensor_reduced, requires_grad):
    rebuild, args = tensor_reduced
    return Parameter(rebuild(*args), requires_grad)


def __getattr__(name):      # PyTorch's nn.parameter.UninitializedParameter/Buffer (nn/lazy.py)
    if name in ("UninitializedParameter", "UninitializedBuffer"):
        from . import lazy
        return getattr(lazy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
