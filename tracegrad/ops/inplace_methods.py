"""Makers of in-place ``Tensor`` methods, as PyTorch records each kind:

- one primitive (``_prim_inplace``): ``inplace`` (its node, the checks, the version bump);
- a composite (``_composite_inplace``, ``_scan_inplace``) or a comparison
  (``_compare_inplace``): computed on a snapshot of ``self`` and written with ``copy_`` by
  ``write_result``, so nothing the composite saved is the tensor being overwritten.

``torch_name`` gives PyTorch's name of a dtype, as its in-place errors say it.
"""
from .. import dtypes
from ..autograd.grad_mode import _state as _gm
from ..tensor import Tensor
from .elementwise_logic import where
from .inplace_views import check_inplace, inplace
from .op_errors import op_error

TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
               "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
               "uint8": "Byte", "bool": "Bool"}


def torch_name(dtype):
    """PyTorch's ScalarType name of ``dtype`` (``Float`` for float32), as its errors say."""
    return TORCH_NAMES.get(dtype.name, dtype.name.capitalize())


def _prim_inplace(prim, name, **params):
    """``Tensor.<name>(self[, other])``: ``prim`` written into ``self`` by ``core.inplace``."""
    def apply(self, *others):
        return inplace(prim, name, self, *others, **params)
    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = f"In-place ``{prim.name}``: writes into ``self``, returns it."
    return apply


def write_result(self, name, compute):
    """Write ``compute(snapshot)`` into ``self`` with PyTorch's in-place rules: the leaf check
    first (naming ``name``), a float result refused for an integer tensor and any non-bool
    result for a bool one, the broadcast shape equal to ``self``'s, then ``copy_`` (the version
    bump and the history). ``snapshot`` is ``self``, or a copy of it while recording, so that
    no node saves the tensor about to change."""
    check_inplace(self, name)
    snapshot = self.clone() if _gm.grad_enabled and (
        self._requires_grad or self._base is not None and self._base._requires_grad) else self
    out = compute(snapshot)
    res, dt = out.dtype, self.dtype
    if res.is_floating_point and not dt.is_floating_point or (
            res is not dtypes.bool and dt is dtypes.bool):
        raise op_error(name, f"result type {torch_name(res)} can't be cast to the desired output "
                             f"type {torch_name(dt)}")
    if tuple(out.shape) != tuple(self.shape):
        raise op_error(name, f"output with shape {list(self.shape)} doesn't match the broadcast "
                             f"shape {list(out.shape)}")
    return self.copy_(out)


def _composite_inplace(fn, name):
    """``Tensor.<name>(self, *args, **kwargs)``: ``fn(self, ...)`` written into ``self``."""
    def apply(self, *args, **kwargs):
        return write_result(self, name, lambda x: fn(x, *args, **kwargs))
    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = f"In-place ``{fn.__name__}``: writes into ``self``, returns it."
    return apply


C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
                "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
                "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
                "bool": "bool"}


def _scan_inplace(fn, name):
    """``Tensor.cumsum_(dim, *, dtype=None)``: ``dtype`` must be ``self``'s, as PyTorch's."""
    def apply(self, dim, *, dtype=None):
        if dtype is not None and dtypes.as_dtype(dtype) is not self.dtype:
            raise op_error(name, f"Bad in-place call: input tensor dtype "
                                 f"{C_TYPE_NAMES[self.dtype.name]} and output tensor dtype "
                                 f"{C_TYPE_NAMES[dtypes.as_dtype(dtype).name]} should match")
        return write_result(self, name, lambda x: fn(x, dim))
    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = f"In-place ``{fn.__name__}`` along ``dim``."
    return apply


def _compare_inplace(compare, name):
    """``Tensor.<name>(other)``: 1 where ``compare`` holds, else 0, written into ``self``.
    As PyTorch's (``EqBackward1``...) both operands get a zero gradient: a ``where`` whose
    condition is all True ties a floating ``other`` in without touching the values."""
    def apply(self, other):
        def compute(x):
            out = compare(x, other)
            if isinstance(other, Tensor) and other.requires_grad and _gm.grad_enabled \
                    and x.dtype.is_floating_point:
                from ..creation import ones_like
                out = where(ones_like(out), out.to(x.dtype), other)
            return out
        return write_result(self, name, compute)
    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = f"In-place ``{compare.__name__}``: 1 or 0 in ``self``'s dtype."
    return apply
