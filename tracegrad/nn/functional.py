"""``nn.functional``: activations, linear, dropout, normalisation, embedding and losses.

Every function is a composition of tracegrad ops, so it has no derivative
of its own and traces into the compiler's IR like user code does. Formulas
follow PyTorch's kernels where the form matters for rounding or for a
gradient at a kink (noted where they do). Randomness (dropout) comes from
``tracegrad.rand_like`` so a tracer sees it as a random op.
"""
import math
import warnings

import tracegrad

from ..autograd.grad_mode import no_grad
from ..ops import (
    abs, exp, gather, gelu as _gelu, index_select, log, log1p, log_softmax as _log_softmax,
    masked_fill, matmul, minimum, norm, relu as _relu, rsqrt, sigmoid as _sigmoid,
    silu as _silu, softmax as _softmax, softplus as _softplus, tanh as _tanh, where,
)
from ..ops.core import op_error

# activations ------------------------------------------------------------------------------


def relu(input, inplace=False):
    return input.relu_() if inplace else _relu(input)


def gelu(input, approximate="none"):
    return _gelu(input, approximate=approximate)


def sigmoid(input):
    return _sigmoid(input)


def tanh(input):
    return _tanh(input)


def silu(input, inplace=False):
    return input.mul_(_sigmoid(input)) if inplace else _silu(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _softplus(input, beta, threshold)


def log_sigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), which never overflows. At x = 0 the
    tie rule of ``minimum`` gives 1/2 and ``abs'(0) = 0``, so the slope is PyTorch's 1/2."""
    return minimum(input, 0.0) - log1p(exp(-abs(input)))


def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return _log_softmax(input, dim, dtype=dtype)


# linear, dropout, embedding ------------------------------------------------------------------


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``."""
    out = matmul(input, weight.t())
    return out if bias is None else out + bias


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``; the
    identity when not training or when ``p == 0``."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:        # 1/(1-p) would be inf; every element is dropped
        scale = tracegrad.zeros_like(input)
    else:
        keep = tracegrad.rand_like(input) >= p           # P(keep) = 1 - p
        scale = keep.to(input.dtype) * (1.0 / (1.0 - p))
    return input.mul_(scale) if inplace else input * scale


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer ``input``: shape ``input.shape + (dim,)``.
    Positions equal to ``padding_idx`` send no gradient to the weight."""
    if input.is_floating_point() or input.dtype is tracegrad.bool:
        raise op_error("embedding", f"Expected tensor for argument #1 'indices' to have one of "
                                    f"the following scalar types: Long, Int; but got "
                                    f"{input.type()} instead (while checking arguments for "
                                    f"embedding)")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not "
                                  "supported by tracegrad")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx + num if padding_idx < 0 else padding_idx
    flat = input.reshape(-1)
    if max_norm is not None:
        with no_grad():     # PyTorch renormalises the looked-up rows in place
            rows = index_select(weight, 0, flat)
            norms = norm(rows, norm_type, dim=1, keepdim=True)
            scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            weight[flat] = rows * scale
    out = index_select(weight, 0, flat).reshape(*input.shape, weight.shape[1])
    if padding_idx is not None:
        pad = (input == padding_idx).unsqueeze(-1)
        out = where(pad, out.detach(), out)
    return out


# normalisation -------------------------------------------------------------------------------


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise over every dim but the channel dim 1.

    Training normalises with the batch mean and biased variance and, when running stats are
    given, updates them in place (without autograd) with the unbiased variance:
    ``running = (1 - momentum) * running + momentum * batch_stat``. Otherwise the running
    stats normalise.
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (got {input.ndim}D input)")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise op_error("batch_norm", f"{name} should contain {c} elements not {t.numel()}")
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        n = input.numel() // c
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {input.shape}")
        dims = (0,) + tuple(range(2, input.ndim))
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        out = centered * rsqrt(var + eps)
        if running_mean is not None and running_var is not None:
            with no_grad():
                running_mean.mul_(1 - momentum).add_(mean.reshape(c) * momentum)
                running_var.mul_(1 - momentum).add_(var.reshape(c) * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise op_error("batch_norm", "running_mean and running_var must be defined in "
                                         "evaluation mode")
        out = (input - running_mean.reshape(shape)) * rsqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims (biased variance)."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) \
        else tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        raise op_error("layer_norm", f"Given normalized_shape={list(normalized_shape)}, expected "
                                     f"input with shape [*, {', '.join(map(str, normalized_shape))}"
                                     f"], but got input of size{list(input.shape)}")
    dims = tuple(range(input.ndim - k, input.ndim))
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    out = centered * rsqrt((centered * centered).mean(dims, keepdim=True) + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


# losses ---------------------------------------------------------------------------------------


def _reduction(size_average, reduce, reduction, name):
    if size_average is not None or reduce is not None:     # the deprecated pair of flags
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", stacklevel=3)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{name}: {reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _reduction(size_average, reduce, reduction, "mse_loss")
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", stacklevel=2)
    diff = input - target
    loss = diff * diff
    return _reduce(loss if weight is None else loss * weight, reduction)


def _check_nll_shapes(input, target):
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim == 1:
        if target.ndim != 0:
            raise op_error("nll_loss", f"expected a 0-D target for a 1-D input of class scores, "
                                       f"got target of size {list(target.shape)}")
        return
    if target.ndim == 0 or input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 0}).")
    want = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != want:
        raise op_error("nll_loss", f"Expected target size {list(want)}, got "
                                   f"{list(target.shape)}")


def _nll_terms(input, target, weight, ignore_index):
    """Per-position ``-w[t] * input[t]`` and ``w[t]`` (both 0 where ``t == ignore_index``)."""
    if target.is_floating_point() or target.dtype is tracegrad.bool:
        raise op_error("nll_loss", f"expected scalar type Long but found {target.type()} for "
                                   f"the class-index target")
    _check_nll_shapes(input, target)
    class_dim = 0 if input.ndim == 1 else 1
    ignored = target == ignore_index
    safe = masked_fill(target, ignored, 0)        # any valid class: its term is zeroed below
    picked = gather(input, class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim)
    kept = (~ignored).to(input.dtype)
    if weight is not None:
        kept = index_select(weight, 0, safe.reshape(-1)).reshape(safe.shape) * kept
    return -(picked * kept), kept


def _divide_by_total(total_loss, total_weight):
    """``total_loss / total_weight``; NaN when every target was ignored, as in PyTorch, with a
    zero gradient (a plain 0/0 would make the gradient NaN too)."""
    empty = total_weight == 0
    return where(empty, math.nan, total_loss / where(empty, 1.0, total_weight))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """The negative log-likelihood of class indices; ``mean`` divides by the summed weights
    of the positions not ignored."""
    reduction = _reduction(size_average, reduce, reduction, "nll_loss")
    loss, w = _nll_terms(input, target, weight, ignore_index)
    if reduction == "mean":
        return _divide_by_total(loss.sum(), w.sum())
    return _reduce(loss, reduction)


def _class_weight(weight, input):
    """``weight`` shaped to broadcast along the class dim of ``input``."""
    if input.ndim == 1:
        return weight
    return weight.reshape((1, -1) + (1,) * (input.ndim - 2))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over the class dim, then the NLL of class indices (``target`` integer) or
    the cross entropy with class probabilities (``target`` floating, same shape as input)."""
    reduction = _reduction(size_average, reduce, reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise op_error("cross_entropy", f"label_smoothing must be between 0.0 and 1.0. Got: "
                                        f"{label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = _log_softmax(input, class_dim)
    if target.is_floating_point():
        if target.shape != input.shape:
            raise op_error("cross_entropy", f"expected class-probability target of the input's "
                                            f"shape {list(input.shape)}, got "
                                            f"{list(target.shape)}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        terms = logp * target
        if weight is not None:
            terms = terms * _class_weight(weight, input)
        if reduction == "none":
            return -terms.sum(class_dim)
        total = -terms.sum()
        return total / (input.numel() / n_classes) if reduction == "mean" else total
    loss, w = _nll_terms(logp, target, weight, ignore_index)
    nll = _divide_by_total(loss.sum(), w.sum()) if reduction == "mean" \
        else _reduce(loss, reduction)
    if label_smoothing == 0:
        return nll
    # PyTorch's smoothing term: the (weighted) sum of -log p over all classes
    smooth = -((logp * _class_weight(weight, input)) if weight is not None else logp)
    smooth = masked_fill(smooth.sum(class_dim), target == ignore_index, 0.0)
    if reduction == "mean":
        # w is the target weight, or 1, at each position not ignored
        smooth = _divide_by_total(smooth.sum(), w.sum())
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """``-(t log x + (1 - t) log(1 - x))`` with each log clamped at -100, as PyTorch does."""
    reduction = _reduction(size_average, reduce, reduction, "binary_cross_entropy")
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         f"size.")
    loss = (target - 1) * log1p(-input).clamp(min=-100) - target * log(input).clamp(min=-100)
    return _reduce(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """``(1 - t) x - log_sigmoid(x)`` (times ``1 + (pos_weight - 1) t`` on the log term):
    PyTorch's stable formula, so large logits neither overflow nor lose precision."""
    reduction = _reduction(size_average, reduce, reduction, "binary_cross_entropy_with_logits")
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    log_sig = log_sigmoid(input)
    if pos_weight is not None:
        log_sig = log_sig * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input - log_sig
    return _reduce(loss if weight is None else loss * weight, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction, "l1_loss")
    return _reduce(abs(input - target), reduction)


def one_hot(tensor, num_classes=-1):
    """Integer ``tensor`` as int64 one-hot rows; ``num_classes=-1`` takes max + 1."""
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1
    classes = tracegrad.arange(num_classes, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()

