"""Composite ops: written once over primitives, so they need no derivative of their own.

They work on eager tensors and, unchanged, on traced values.
"""
import math

from .. import dtypes
from .core import bind, op_error
from .declare import backward_name, method
from .elementwise import (
    div, erf, exp, isinf, isnan, log, logical_not, mul, sigmoid, sqrt, sub, tanh, where,
)
from .norms import matrix_norm, vector_norm
from .reduce_ops import amax, sum
from .rules import norm_dims, reduction_dims
from .shape_ops import squeeze


def _reduced_count(input, dim):
    dims = reduction_dims(dim, input.ndim)
    return math.prod(input.shape[d] for d in dims)


@method
@backward_name(lambda input, dim=None, *_, **__: "MeanBackward1" if dim is not None
               else "MeanBackward0")
def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise op_error("mean", f"mean(): could not infer output dtype. Input dtype must be either "
                               f"a floating point or complex dtype. Got: "
                               f"{input.dtype.name.capitalize()}")
    return sum(input, dim, keepdim) / _reduced_count(input, dim)


@method
@backward_name("VarBackward0")
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance; ``correction`` (or ``unbiased``) defaults to Bessel's 1."""
    dim, unbiased = _legacy_unbiased(dim, unbiased)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if not input.dtype.is_floating_point:
        raise op_error("var", "std and var only support floating point and complex dtypes")
    n = _reduced_count(input, dim)
    centered = input - mean(input, dim, keepdim=True)
    return sum(centered * centered, dim, keepdim) / max(n - correction, 0)


@method
@backward_name("StdBackward0")
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """sqrt(var); std'(0) = 0 as in PyTorch, where sqrt'(0) = inf would give inf * 0 = NaN."""
    dim, unbiased = _legacy_unbiased(dim, unbiased)
    v = var(input, dim, unbiased, keepdim, correction=correction)
    zero = v == 0
    return where(zero, 0.0, sqrt(where(zero, 1.0, v)))


def _legacy_unbiased(dim, unbiased):
    """``var(x, True)``: PyTorch's older overload takes ``unbiased`` first; a bool is never a
    dim, so a bool in ``dim``'s place is that flag and the reduction is over everything."""
    if isinstance(dim, bool):
        return None, dim
    return dim, unbiased


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, unbiased = _legacy_unbiased(dim, unbiased)
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, unbiased = _legacy_unbiased(dim, unbiased)
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


@method
@backward_name("LogsumexpBackward0")
def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(x))) without overflow; the shift is constant, so it is detached."""
    if not input.dtype.is_floating_point:
        input = input.to(dtypes.get_default_dtype())
    if 0 in input.shape:        # no elements: nothing to shift by (amax of none is an error)
        out = log(sum(exp(input), dim, keepdim=True))   # -inf over an empty dim, as PyTorch's
        return out if keepdim else squeeze(out, norm_dims(dim, input.ndim))
    m = amax(input, dim, keepdim=True).detach()
    m = where(isinf(m), 0.0, m)
    out = log(sum(exp(input - m), dim, keepdim=True)) + m
    return out if keepdim else squeeze(out, norm_dims(dim, input.ndim))


@method
@backward_name("SoftmaxBackward0")
def softmax(input, dim=None, dtype=None, *, _stacklevel=None):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    if 0 in input.shape:        # no elements: nothing to shift by (amax of none is an error)
        return exp(input)
    e = exp(input - amax(input, dim, keepdim=True).detach())
    return e / sum(e, dim, keepdim=True)


@method
@backward_name("LogSoftmaxBackward0")
def log_softmax(input, dim=None, dtype=None, *, _stacklevel=None):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return input - logsumexp(input, dim, keepdim=True)


@method
@backward_name("GeluBackward0")
def gelu(input, approximate="none"):
    """x * Phi(x); ``approximate='tanh'`` uses the tanh formula."""
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (tanh(inner) + 1)
    if approximate != "none":
        raise op_error("gelu", f"approximate argument must be either none or tanh (got "
                               f"{approximate!r})")
    return input * 0.5 * (erf(input * (1 / math.sqrt(2.0))) + 1)


@method
@backward_name("SiluBackward0")
def silu(input):
    return input * sigmoid(input)


@method
@backward_name("SoftplusBackward0")
def softplus(input, beta=1.0, threshold=20.0):
    """``log1p(exp(beta x)) / beta``, or ``x`` where ``beta x > threshold``. The exp sees
    ``beta x`` clamped at the threshold: the branch ``where`` drops must stay finite, or its
    zero gradient times ``exp' = inf`` is NaN (for x > 710)."""
    from .elementwise import log1p
    scaled = input * beta
    # where, not clamp: clamp'(NaN) is 0, and PyTorch's softplus'(NaN) is NaN
    return where(scaled > threshold, input,
                 log1p(exp(where(scaled > threshold, threshold, scaled))) / beta)


@method
def square(input):
    return mul(input, input)


def rsub(input, other, alpha=1):
    return sub(other, mul(input, alpha) if alpha != 1 else input)


@method
def true_divide(input, other):
    return div(input, other)


@method
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``, one ``AddmmBackward0`` node (``nn_ops``)."""
    from .nn_ops import addmm as _addmm
    return _addmm(input, mat1, mat2, beta=beta, alpha=alpha)


@method
def lerp(input, end, weight):
    return input + (end - input) * weight


@method
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """PyTorch's ``torch.norm``: ``linalg.vector_norm`` for a number ``p`` and for 'fro' (the
    2-norm over ``dim``), ``linalg.matrix_norm`` for 'nuc'. So -inf is the smallest
    magnitude, 0 counts nonzeros, and the gradient at a zero input is 0, as there."""
    if out is not None:
        raise op_error("norm", "out= is not supported")
    if isinstance(dim, int):
        dim = (dim,)
    if p is None or p == "fro":
        return vector_norm(input, 2, dim, keepdim, dtype=dtype)
    if p == "nuc":
        return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if isinstance(p, str):
        raise op_error("norm", f"norm(): unsupported p={p!r} (a number, 'fro' or 'nuc')")
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


@method
def remainder(input, other):
    from .elementwise import remainder_p
    return bind(remainder_p, input, other)


@method
def floor_divide(input, other):
    return div(input, other, rounding_mode="floor")


@method
def isfinite(input):
    """True where ``input`` is neither inf nor NaN (every element of an integer tensor)."""
    return logical_not(isnan(input) | isinf(input))
