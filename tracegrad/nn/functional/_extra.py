"""The rest of ``nn.functional``'s layers: ``embedding_bag``, ``max_unpool1d/2d/3d``,
``lp_pool1d/2d/3d``, ``alpha_dropout``, ``feature_alpha_dropout``, ``channel_shuffle`` and
``gumbel_softmax``.

Each is a composition of tracegrad ops, so it differentiates and traces like user code.
``embedding_bag`` finds each looked-up row's bag from ``offsets`` with comparisons (no data
read on the host), so a compiled call works for any indices; ``max_unpool`` scatters into
zeros. The formulas follow PyTorch's kernels (``lp_pool`` is PyTorch's Python code; the
alpha dropouts are ATen's ``_dropout_impl``); signatures, defaults and errors are PyTorch
2.13's. The random ones draw from ``tracegrad.rand``, a random op under a tracer.
"""
import math
import warnings

from ... import creation, dtypes, ops
from ...autograd.grad_mode import no_grad
from ...ops import index_select, log1p, log, relu, where
from ...ops.core import op_error
from ._base import embedding
from ._pool import avg_pool1d, avg_pool2d, avg_pool3d


def _ntuple(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


# embedding_bag -------------------------------------------------------------------------------


def _bags(input, offsets, include_last_offset):
    """``(flat indices, bag starts, end or None)``: a 2-D input is bags of its row length;
    with ``include_last_offset`` the last offset is where the last bag ends."""
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated "
                             f"is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets)}")
        rows, width = input.shape
        offsets = creation.arange(0, rows * width, width, dtype=input.dtype)
        return input.reshape(-1), offsets, None
    if input.dim() != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.dim() != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    if include_last_offset:     # CSR: the last offset ends the last bag
        return input, offsets[:-1], offsets[-1]
    return input, offsets, None


def _membership(flat, offsets, end, padding_idx):
    """A (bags, lookups) boolean matrix: lookup j belongs to bag b (and is not padding)."""
    positions = creation.arange(flat.shape[0])
    bag_of = (positions.unsqueeze(1) >= offsets.unsqueeze(0)).long().sum(1) - 1
    if end is not None:         # past the end: in no bag
        bag_of = where(positions >= end, -1, bag_of)
    member = bag_of.unsqueeze(0) == creation.arange(offsets.shape[0]).unsqueeze(1)
    if padding_idx is not None:
        member = member & (flat != padding_idx).unsqueeze(0)
    return member


def _scaled_by_frequency(rows, flat):
    """``rows`` whose gradient is divided by how often its index occurs in the batch (the
    documented meaning, as ``F.embedding``'s; PyTorch 2.13's CPU bag kernel divides by
    other counts, see the tests)."""
    counts = (flat.unsqueeze(1) == flat.unsqueeze(0)).sum(1, keepdim=True).to(rows.dtype)
    scaled = rows / counts
    return scaled + (rows - scaled).detach()


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of ``weight`` rows, without building the (bags, len,
    dim) lookups; an empty bag gives zeros."""
    if weight.dtype == dtypes.int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.", stacklevel=2)
        input, weight = weight, input
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) "
                         f"is not None, then it must have the same shape as the input "
                         f"({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse gradients are not supported by "
                                  "tracegrad")
    if padding_idx is not None:
        num = weight.shape[0]
        if not -num <= padding_idx < num:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx = padding_idx + num if padding_idx < 0 else padding_idx
    flat, offsets, end = _bags(input, offsets, include_last_offset)
    if max_norm is not None:
        with no_grad():     # renormalises the looked-up rows of weight in place
            embedding(flat, weight, max_norm=max_norm, norm_type=norm_type)
    rows = index_select(weight, 0, flat)
    if scale_grad_by_freq:
        rows = _scaled_by_frequency(rows, flat)
    member = _membership(flat, offsets, end, padding_idx)
    if mode == "max":
        picked = where(member.unsqueeze(2), rows.unsqueeze(0), -math.inf)
        best = picked.max(1)[0] if flat.shape[0] else picked.sum(1)
        return where(member.any(1, keepdim=True), best, 0.0)
    counts = member.to(weight.dtype)
    if per_sample_weights is not None:
        counts = counts * per_sample_weights.reshape(1, -1)
    out = counts @ rows
    if mode == "mean":
        out = out / member.sum(1, keepdim=True).clamp(min=1).to(weight.dtype)
    return out


# max_unpool ----------------------------------------------------------------------------------


def _unpool_size(input, kernel_size, stride, padding, output_size):
    nd = len(kernel_size)
    default = [(input.shape[input.dim() - nd + d] - 1) * stride[d] + kernel_size[d]
               - 2 * padding[d] for d in range(nd)]
    if output_size is None:
        return default
    output_size = list(output_size)
    if len(output_size) == nd + 2:
        output_size = output_size[2:]
    if len(output_size) != nd:
        raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                         f"elements, but it has a length of '{len(output_size)}'")
    for d in range(nd):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                             f'{low} and {high})')
    return output_size


def _max_unpool(name, nd, input, indices, kernel_size, stride, padding, output_size):
    kernel_size = _ntuple(kernel_size, nd)
    stride = _ntuple(stride if stride is not None else kernel_size, nd)
    padding = _ntuple(padding, nd)
    if input.dim() not in (nd + 1, nd + 2):
        raise op_error(name, f"{name}: Expected {nd + 1}D or {nd + 2}D input, but got input "
                             f"of size: {list(input.shape)}")
    if indices.shape != input.shape:
        raise op_error(name, f"Expected shape of indices to be same as that of the input "
                             f"tensor ({list(input.shape)}) but got indices tensor with shape: "
                             f"{list(indices.shape)}")
    size = _unpool_size(input, kernel_size, stride, padding, output_size)
    lead = tuple(input.shape[:input.dim() - nd])
    flat_in = input.reshape(lead + (-1,))
    zeros = creation.zeros(lead + (math.prod(size),), dtype=input.dtype)
    index = indices.reshape(lead + (-1,))
    summed = zeros.scatter_add(len(lead), index, flat_in)
    # overlapping windows can pick one element twice: PyTorch writes it once (the picks are
    # equal), and hands each pick the output's whole gradient there, which is summed's
    picks = creation.zeros_like(zeros).scatter_add(len(lead), index, creation.ones_like(flat_in))
    out = summed - (summed - summed / picks.clamp(min=1)).detach()
    return out.reshape(lead + tuple(size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of ``max_pool1d``: each value written at its index, zeros elsewhere."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of ``max_pool2d``: each value written at its index, zeros elsewhere."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of ``max_pool3d``: each value written at its index, zeros elsewhere."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)


# lp_pool ---------------------------------------------------------------------------------


def _lp_pool(avg_pool, nd, input, norm_type, kernel_size, stride, ceil_mode):
    """PyTorch's: the p-th root of (window size * the mean of x**p); a negative mean (odd p)
    is sent to 0 with a zero gradient."""
    window = math.prod(_ntuple(kernel_size, nd))
    if stride is not None:
        out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (ops.sign(out) * relu(out.abs())).mul(window).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(avg_pool1d, 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(avg_pool2d, 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(avg_pool3d, 3, input, norm_type, kernel_size, stride, ceil_mode)


# alpha dropout -------------------------------------------------------------------------------

_SELU_ALPHA = 1.7580993408473766     # -selu's negative saturation, ATen's alpha


def _alpha_dropout(input, p, training, inplace, feature):
    """ATen's: ``x * keep * a + (keep - 1) * alpha * a + alpha * a * p`` with
    ``a = 1/sqrt((alpha^2 p + 1)(1 - p))``, keeping a SELU network's mean and variance."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else input * 0.0
    if feature:
        if input.dim() < 2:
            raise op_error("feature_alpha_dropout", "Feature dropout requires at least 2 "
                                                    "dimensions in the input")
        shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    else:
        shape = tuple(input.shape)
    keep = (creation.rand(shape, dtype=input.dtype) >= p).to(input.dtype)
    a = 1.0 / math.sqrt((_SELU_ALPHA ** 2 * p + 1) * (1 - p))
    shift = (keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    scale = keep * a
    if inplace:
        return input.mul_(scale).add_(shift)
    return input * scale + shift


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's self-normalisation: dropped units are set to SELU's
    saturation value and the result rescaled (note ``training=False`` by default)."""
    return _alpha_dropout(input, p, training, inplace, feature=False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """``alpha_dropout`` of whole channels (dim 1), one draw per (sample, channel)."""
    return _alpha_dropout(input, p, training, inplace, feature=True)


# channel shuffle, gumbel softmax -------------------------------------------------------------


def channel_shuffle(input, groups):
    """Channels (dim 1) read as a (groups, C/groups) grid, transposed: ShuffleNet's shuffle."""
    if input.dim() <= 2:
        raise op_error("channel_shuffle", f"channel_shuffle expects input with > 2 dims, but got "
                                          f"input with sizes "
                                          f"{list(input.shape)}")
    if groups <= 0:
        raise op_error("channel_shuffle", f"Number of groups to divide channels in must be "
                                          f"positive. Value of groups:{groups}")
    n, c = input.shape[:2]
    if c % groups:
        raise op_error("channel_shuffle", f"Number of channels must be divisible by groups. "
                                          f"Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    grid = input.reshape((n, groups, c // groups) + rest)
    return grid.transpose(1, 2).reshape(input.shape)


native_channel_shuffle = channel_shuffle


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """``softmax((logits + g) / tau)`` with Gumbel(0, 1) noise ``g``; ``hard`` returns the
    one-hot argmax in the forward and the soft sample's gradient (straight-through)."""
    uniform = creation.rand_like(logits)
    exponential = -log1p(-uniform)
    gumbels = (logits - log(exponential)) / tau
    y_soft = gumbels.softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = creation.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
