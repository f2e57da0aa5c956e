"""``nn.Parameter``: a leaf tensor that a ``Module`` registers when it is assigned.

A ``Parameter`` is a ``Tensor`` subclass (so ``isinstance(p, nn.Parameter)``
holds and every tensor op accepts it). ``Parameter(data)`` shares ``data``'s
storage and version counter, as PyTorch's ``_make_subclass`` does, and
requires grad by default. Results of ops on a parameter are plain tensors.

``UninitializedParameter``/``UninitializedBuffer``: the placeholders of lazy modules
(``nn.lazy``), tensors with no shape until ``materialize(shape)``.
"""
from .. import creation
from ..autograd.grad_mode import no_grad
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


class _UninitializedMixin:
    """A tensor with no shape yet: ``materialize(shape)`` gives it storage and its final
    class."""

    __slots__ = ()

    def materialize(self, shape, device=None, dtype=None):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        with no_grad():
            self.data = creation.empty(shape, dtype=dtype or self.dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. "
                           "This error usually happens in `load_state_dict` when trying to "
                           "load an uninitialized parameter into an initialized one. Call "
                           "`forward` to initialize the parameters before accessing their "
                           "attributes.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__


class UninitializedParameter(_UninitializedMixin, Parameter):
    """A parameter whose shape is not known yet (see the module docstring)."""
    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        p = cls._make(creation.empty(0, dtype=dtype)._data)
        p.requires_grad_(requires_grad)
        return p


class UninitializedBuffer(_UninitializedMixin, Tensor):
    """A buffer whose shape is not known yet (see the module docstring)."""
    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        t = cls._make(creation.empty(0, dtype=dtype)._data)
        t.requires_grad_(requires_grad)
        return t

    def __init__(self, *args, **kwargs):
        pass
