"""Elementwise primitives: one block each, with VJP and NumPy/CUDA templates.

The family sits in four modules, each importing only those before it:

- ``elementwise_logic``: comparisons, bitwise and logical ops, ``where``, and ``binary``,
  the declaration of a binary primitive computed by one ufunc;
- ``elementwise_math``: unary math (exp, log, sin, tanh, sigmoid, erf, neg, abs, sign,
  relu) and the rounding ops;
- ``elementwise_arithmetic``: add, sub, mul, div, maximum/minimum, pow, fmod, remainder and
  division with a rounding mode, with their in-place methods;
- this module: clamp, dtype/device conversion and clone; every name of the family stays
  importable from here.

Rules follow PyTorch at non-differentiable points: relu'(0) = 0, abs'(0) = 0,
sqrt'(0) = inf, clamp passes the gradient on its bounds, maximum/minimum split
the gradient evenly on ties.

A declaration with ``public=True`` defines its function in the declaring module (``exp``,
``mul``, ... are generated, not written out); ``method=`` and ``inplace_method=`` put it on
``Tensor``. Functions with logic of their own follow the primitives.
"""
import numpy as np

from .. import dtypes
from ..device import as_device, to_device
from ..tensor import Tensor, parse_to_args
from . import prim_node
from .core import LINEAR, Primitive, bind, inplace, op_error
from .declare import method
from .elementwise_arithmetic import (  # noqa: F401 - the arithmetic, named here too
    add, add_p, div, div_p, div_rounding_p, fmod, fmod_p, maximum, maximum_p, minimum,
    minimum_p, mul, mul_p, pow, pow_p, pow_scalar_p, remainder_p, sub, sub_p,
)
from .elementwise_logic import (  # noqa: F401 - comparisons and logic, named here too
    _keep, and_p, binary, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, eq, eq_p, ge,
    ge_p, gt, gt_p, isinf, isinf_p, isnan, isnan_p, le, le_p, logical_and, logical_not,
    logical_not_p, logical_or, lt, lt_p, ne, ne_p, not_p, or_p, where, where_p, xor_p,
)
from .elementwise_math import (  # noqa: F401 - the unary math, named here too
    _as_float, _erf, abs, abs_p, absolute, ceil, ceil_p, cos, cos_p, erf, erf_p, exp, exp_p,
    expm1, expm1_p, floor, floor_p, literal_value, log, log1p, log1p_p, log_p, neg, neg_p,
    negative, relu, relu_p, round, round_p, rsqrt, rsqrt_p, sigmoid, sigmoid_backward_p,
    sigmoid_p, sign, sign_p, sin, sin_p, sqrt, sqrt_p, tanh, tanh_backward_p, tanh_p,
    threshold_backward_p, trunc, trunc_p, unary_float,
)
from .rules import promote, same_shape


def _clamp_impl(xp, x, min, max, out=None):
    """NumPy's clip: a NaN bound makes NaN, as in PyTorch. CuPy's clip compares instead
    (a NaN bound is ignored there), so on a GPU it is maximum then minimum."""
    if min is not None and max is not None:
        if xp is np:
            return xp.clip(x, min, max, out=out)
        return xp.minimum(xp.maximum(x, min, out=out), max, out=out)
    if min is not None:
        return xp.maximum(x, min, out=out)
    return xp.minimum(x, max, out=out)


def _clamp_grad(g, x, min, max):
    keep = None
    if min is not None:
        keep = x >= min
    if max is not None:
        keep = x <= max if keep is None else logical_and(keep, x <= max)
    return where(keep, g, 0.0)


def _clamp_c(self, min, max):
    """clip's C form: NaN and -0.0 pass through as in NumPy's clip, and a NaN bound
    (``b != b``) makes NaN, as there."""
    if min is not None:
        self = f"({self} < {min} || {min} != {min} ? {min} : {self})"
    if max is not None:
        self = f"({self} > {max} || {max} != {max} ? {max} : {self})"
    return self


clamp_p = Primitive(
    "clamp", _clamp_impl, dtype=lambda x, min, max: promote(x, *(v for v in (min, max)
                                                                if v is not None)),
    shape=same_shape, vjp=(lambda g, x, out, min, max: _clamp_grad(g, x, min, max),),
    jvp=(lambda t, x, out, min, max: _clamp_grad(t, x, min, max),),
    saves=("self",), np="np.clip({self}, {min}, {max})",
    np_out="np.clip({self}, {min}, {max}, out={out})", c=_clamp_c, kind="elementwise",
    inplace=lambda xp, x, min, max: _clamp_impl(xp, x, min, max, out=x))


def _convert_impl(xp, x, dtype, device, src_device):
    # cast where the data is (a GPU source is CuPy's current device), then copy: a cast after
    # the copy would run on the current device, not the destination
    if dtype is not None and x.dtype != dtype.np:
        x = x.astype(dtype.np)
    if device is not None and device != src_device:
        x = to_device(x, device)
    return x


# a float's conversion to bool is x != 0 (NaN is true), as NumPy's astype(bool)
convert_p = Primitive(
    "convert", lambda xp, x, dtype, device, src_device: _convert_impl(xp, x, dtype, device,
                                                                      src_device),
    dtype=lambda x, dtype, device, src_device: dtype or x.dtype, shape=same_shape,
    vjp=(lambda g, x, out, dtype, device, src_device:
         convert(g, device=src_device) if device is not None and device != src_device else g,),
    jvp=LINEAR, node="ToCopyBackward0", np="{self}.astype({dtype})",
    np_out="np.copyto({out}, {self}, casting='unsafe')", c="{self}", operands=_keep,
    kind="elementwise")

clone_p = Primitive("clone", lambda xp, x: x.copy(), dtype=promote, shape=same_shape,
                    vjp=(lambda g, x, out: g,), jvp=LINEAR, np="{self}.copy()",
                    np_out="np.copyto({out}, {self})", c="{self}", kind="elementwise")


@method
def clamp(input, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise op_error("clamp", "At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensors(input, min, max)
    return bind(clamp_p, input, min=min, max=max)


def _clamp_tensors(x, lo, hi):
    """clamp with tensor bounds, as PyTorch's: NaN where x or a bound is NaN, ``hi`` where
    lo > hi, and each operand's gradient where PyTorch's clamp_backward_min_max puts it
    (x on ties). Each ``where`` picks one operand, so its mask is that operand's gradient."""
    keep = x >= lo if lo is not None else None
    if hi is not None:
        keep = x <= hi if keep is None else logical_and(keep, x <= hi)
    to_lo = x < lo if lo is not None else None
    if lo is not None and hi is not None:
        to_lo = logical_and(to_lo, lo < hi)
    to_hi = None
    if hi is not None:
        to_hi = x > hi if lo is None else logical_or(x > hi, hi < lo)
    # neither kept nor clamped: some operand is NaN (an integer tensor has none)
    out = x if not x.dtype.is_floating_point else float("nan")
    if to_hi is not None:
        out = where(to_hi, hi, out)
    if to_lo is not None:
        out = where(to_lo, lo, out)
    return where(keep, x, out)


clip = clamp


@method("clamp_")
def _clamp_(self, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise op_error("clamp_", "At least one of 'min' or 'max' must not be None")
    return inplace(clamp_p, "clamp_", self, min=min, max=max)


@method("clamp_min")
def _clamp_min(self, min):  # noqa: A002
    return clamp(self, min=min)


@method("clamp_max")
def _clamp_max(self, max):  # noqa: A002
    return clamp(self, max=max)


def convert(input, dtype=None, device=None, copy=False):
    """The op behind ``Tensor.to``: a new dtype and/or device (differentiable)."""
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
    src = input.device
    if device is not None:
        device = as_device(device)
        if device == src:
            device = None
    if (dtype is None or dtype is input.dtype) and device is None:
        return clone(input) if copy else input
    return bind(convert_p, input, dtype=dtype, device=device, src_device=src)


@method("to")
def _to(self, *args, **kwargs):
    """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(other_tensor)``."""
    copy = kwargs.pop("copy", False)
    dev, dt = parse_to_args(args, kwargs)
    return convert(self, dtype=dt, device=dev, copy=copy)


@method
def clone(input, *, memory_format=None):
    return bind(clone_p, input)


prim_node.convert = convert     # ``to_copy`` is ``convert`` (prim_node sits below)
