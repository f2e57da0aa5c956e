"""More of ``nn.functional``: the remaining activations (``relu6``, ``hardtanh``, ``selu``,
``celu``, ``softsign``, ``softmin``, ``threshold``, the shrinks, ``rrelu`` and the in-place
forms), the distances ``pairwise_distance`` and ``pdist``, ``rms_norm`` and ``bilinear``.

Each is a composition of tracegrad ops, so it differentiates (twice), and traces, like user
code. Where PyTorch's slope at a kink differs from what a plain formula gives, the
``where`` below is chosen to give PyTorch's (noted at each one). Signatures, defaults and
errors are PyTorch 2.13's.
"""
import math

from ... import creation, ops
from ...type_info import finfo
from ...ops import abs, index_select, matmul, norm, rsqrt, tanh, where
from ...ops.core import op_error
from ...ops.declare import backward_name
from ._base import _inplace, _scaled_elu, _softmax_dim, elu, leaky_relu, softmax


# activations ------------------------------------------------------------------------------


def _hardtanh(input, min_val, max_val):
    # where, not clamp: PyTorch's slope is 0 on both bounds (clamp passes it there); an
    # integer input keeps its dtype, as PyTorch's does, with the bounds truncated to integers
    if not input.is_floating_point():
        min_val, max_val = int(min_val), int(max_val)
    return where(input <= min_val, min_val, where(input >= max_val, max_val, input))


@backward_name("HardtanhBackward0")
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)`` with slope 0 at both bounds, as in PyTorch."""
    if min_val > max_val:
        raise op_error("hardtanh", "min_val cannot be greater than max_val", ValueError)
    if inplace:
        return _inplace(input, lambda x: _hardtanh(x, min_val, max_val))
    return _hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """``hardtanh(x, 0, 6)``: slope 0 at 0 and at 6, as in PyTorch."""
    return hardtanh(input, 0.0, 6.0, inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@backward_name("EluBackward0")
def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with PyTorch's constants; slope ``scale * alpha`` at 0."""
    def fn(x):
        return _scaled_elu(x, _SELU_ALPHA, _SELU_SCALE, 1.0)
    return _inplace(input, fn) if inplace else fn(input)


def selu_(input):
    return selu(input, inplace=True)


@backward_name("CeluBackward0")
def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * expm1(x / alpha))``; slope 1 at 0."""
    if alpha == 0:
        raise op_error("celu", "ZeroDivisionError: alpha cannot be 0 for CELU")

    def fn(x):
        return _scaled_elu(x, alpha, 1.0, 1.0 / alpha)
    return _inplace(input, fn) if inplace else fn(input)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def softsign(input):
    """``x / (1 + |x|)`` (PyTorch's composite: slope 1 at 0)."""
    return input / (abs(input) + 1)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x, dim)``."""
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim, _stacklevel + 1)
    return softmax(-input, dim, dtype=dtype)


def _threshold(input, threshold, value):
    return where(input <= threshold, value, input)      # NaN stays NaN, as in PyTorch


@backward_name("ThresholdBackward0")
def threshold(input, threshold, value, inplace=False):
    """``x`` where ``x > threshold``, else ``value``; slope 0 at the threshold."""
    if inplace:
        return _inplace(input, lambda x: _threshold(x, threshold, value))
    return _threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return _inplace(input, lambda x: _threshold(x, threshold, value))


@backward_name("HardshrinkBackward0")
def hardshrink(input, lambd=0.5):
    """0 on ``[-lambd, lambd]`` (slope 0 at both ends, as in PyTorch), else ``x``."""
    return where(_in_band(input, lambd), 0.0, input)


def _in_band(input, lambd):
    """``-lambd <= x <= lambd`` (false for NaN, which both shrinks pass through)."""
    return (input >= -lambd) & (input <= lambd)


def _check_lambd(input, lambd):
    if lambd < 0:
        top = finfo(input.dtype).max
        raise op_error("softshrink", f"lambda must be in range [0, {top:g}] for input dtype "
                                     f"{_type_name(input)}, but found {lambd:g}")


def _type_name(input):
    return {"float32": "Float", "float64": "Double", "float16": "Half",
            "bfloat16": "BFloat16"}.get(input.dtype.name, input.dtype.name)


@backward_name("SoftshrinkBackward0")
def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0 (slope 0 at
    ``+-lambd``, as in PyTorch)."""
    _check_lambd(input, lambd)
    return where(_in_band(input, lambd), 0.0, where(input > 0, input - lambd, input + lambd))


def tanhshrink(input):
    """``x - tanh(x)``."""
    return input - tanh(input)


def _rrelu(input, lower, upper, training):
    if not training:
        return leaky_relu(input, (lower + upper) / 2)
    slope = creation.rand_like(input) * (upper - lower) + lower
    return where(input > 0, input, input * slope)


@backward_name("RreluWithNoiseBackward0")
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a slope drawn from U(lower, upper) per element (from the default
    generator) in training, ``(lower + upper) / 2`` otherwise; the slope at 0 is the
    negative one, as in PyTorch."""
    if lower > upper:
        raise op_error("rrelu", "Lower bound should be less than or equal to the upper bound")
    if inplace:
        return _inplace(input, lambda x: _rrelu(x, lower, upper, training))
    return _rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def relu_(input):
    return input.relu_()


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


# distances ---------------------------------------------------------------------------------


@backward_name("NormBackward1")
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``norm_p(x1 - x2 + eps)`` over the last dim of the broadcast inputs (PyTorch's rule;
    the gradient at a zero difference is 0, as PyTorch's norm's)."""
    last = max(x1.ndim, x2.ndim) - 1
    return norm(x1 - x2 + eps, p, last, keepdim)


@backward_name("PdistBackward0")
def pdist(input, p=2):
    """The p-norm distances between the rows of an ``(N, M)`` input, pairs ``i < j`` in
    row-major order: ``N (N - 1) / 2`` values."""
    if input.ndim != 2:
        raise op_error("pdist", f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise op_error("pdist", "pdist only supports non-negative p values")
    n = input.shape[0]
    i, j = ops.triu_indices(n, n, 1, device=input.device)
    diff = index_select(input, 0, i) - index_select(input, 0, j)
    return _max_distance(diff) if p == math.inf else norm(diff, p, 1)


def _max_distance(diff):
    """``max |diff|`` over dim 1 with PyTorch's pdist gradient: ``sign(diff)`` to every
    element that ties for the max (a norm splits it between them)."""
    size = abs(diff)
    top = size.amax(1, keepdim=True).detach()
    ties = (size == top).to(diff.dtype)
    return top.squeeze(1) + ((size - size.detach()) * ties).sum(1)


# rms_norm, bilinear ------------------------------------------------------------------------


def _check_rms_shapes(input, normalized_shape, weight):
    k = len(normalized_shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise op_error("rms_norm", f"Given normalized_shape={list(normalized_shape)}, expected "
                                   f"input with shape [*{', '.join(map(str, normalized_shape))}]"
                                   f", but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != normalized_shape:
        raise op_error("rms_norm", f"Expected weight to be of same shape as normalized_shape, "
                                   f"but got weight of shape {list(weight.shape)} and "
                                   f"normalized_shape = {list(normalized_shape)}")


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape`` dims;
    ``eps=None`` is the input dtype's machine epsilon, as in PyTorch."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) \
        else tuple(normalized_shape)
    _check_rms_shapes(input, normalized_shape, weight)
    if eps is None:
        eps = finfo(input.dtype).eps
    dims = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    out = input * rsqrt((input * input).mean(dims, keepdim=True) + eps)
    return out if weight is None else out * weight


def _check_bilinear(input1, input2, weight, bias):
    def fail(message):
        return op_error("bilinear", f"bilinear(): {message}")
    if input1.ndim != input2.ndim:
        raise fail(f"input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise fail(f"input batch dimensions do not match at dim {d}: got "
                       f"{input1.shape[d]} and {input2.shape[d]}")
    if input1.shape[-1] != weight.shape[1]:
        raise fail(f"input1 size does not match weight size: got {input1.shape[-1]} but "
                   f"expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise fail(f"input2 size does not match weight size: got {input2.shape[-1]} but "
                   f"expected {weight.shape[2]}")
    if bias is not None and bias.shape[0] != weight.shape[0]:
        raise fail(f"bias size does not match weight size: got {bias.shape[0]} but expected "
                   f"{weight.shape[0]}")


def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1 @ weight[o] @ x2 + bias_o`` over any leading (batch) dims, with
    ``weight`` of shape ``(out, in1, in2)``."""
    _check_bilinear(input1, input2, weight, bias)
    left = matmul(input1.unsqueeze(-2).unsqueeze(-2), weight).squeeze(-2)   # (..., out, in2)
    out = (left * input2.unsqueeze(-2)).sum(-1)
    return out if bias is None else out + bias


__all__ = [
    "hardtanh", "hardtanh_", "relu6", "selu", "selu_", "celu", "celu_", "softsign", "softmin",
    "threshold", "threshold_", "hardshrink", "softshrink", "tanhshrink", "rrelu", "rrelu_",
    "relu_", "elu_", "leaky_relu_", "pairwise_distance", "pdist", "rms_norm", "bilinear",
]
