"""The loss functions of ``nn.functional`` (which exports them): PyTorch's names,
reductions and errors, each a composition of tracegrad ops."""
import math
import warnings

from ... import dtypes
from ...ops import (
    abs, exp, gather, index_select, log, log1p, log_softmax as _log_softmax, masked_fill, where,
)
from ...ops.core import op_error
from ...ops.nn_ops import _tracing
from ...tensor import Tensor
from ...ops.declare import backward_name
from ._base import log_sigmoid


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


@backward_name("MseLossBackward0")
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
    if target.is_floating_point() or target.dtype is dtypes.bool:
        raise op_error("nll_loss", f"expected scalar type Long but found {target.type()} for "
                                   f"the class-index target")
    _check_nll_shapes(input, target)
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != n_classes):
        raise op_error("nll_loss", f"weight tensor should be defined either for all "
                                   f"{n_classes} classes or no classes but got weight tensor "
                                   f"of shape: {list(weight.shape)}")
    ignored = target == ignore_index
    if not _tracing() and type(target) is Tensor:   # (a host read; a vmap's batch reads none)
        invalid = ~ignored & ((target < 0) | (target >= n_classes))
        if bool(invalid.any()):
            raise op_error("nll_loss", f"Target {int(target[invalid][0].item())} is out of "
                                       f"bounds.", IndexError)
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


@backward_name("NllLossBackward0")
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


@backward_name("MulBackward1", collapse=False)
def _scaled(input, value):
    """``input * value`` for a number ``value``: PyTorch's ``mul.Scalar``, whose node is
    ``MulBackward1`` (a Python number in ``x * 2`` becomes a tensor: ``MulBackward0``)."""
    return input * value


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
    if not target.is_floating_point() and label_smoothing == 0:
        # PyTorch's nodes: NllLossBackward0 over LogSoftmaxBackward0
        return nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
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
    # PyTorch's label smoothing, node for node: (1 - s) * nll + smooth * (s / classes), where
    # smooth is the (weighted) sum of -log p over the classes, 0 where the target is ignored
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    ignored = target == ignore_index
    smooth = (-(logp * _class_weight(weight, input)).sum(class_dim) if weight is not None
              else -logp.sum(class_dim))
    smooth = masked_fill(smooth, ignored, 0.0)
    if reduction == "mean":
        if weight is not None:      # the targets' weights, as nll_loss divides by
            picked = weight.detach().gather(0, where(ignored, 0, target).reshape(-1))
            total = where(ignored.reshape(-1), 0.0, picked).sum()
        else:
            total = (~ignored).sum()
        smooth = smooth.sum() / total
    elif reduction == "sum":
        smooth = smooth.sum()
    return _scaled(nll, 1 - label_smoothing) + _scaled(smooth, label_smoothing / n_classes)


@backward_name("BinaryCrossEntropyBackward0")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """``-(t log x + (1 - t) log(1 - x))`` with each log clamped at -100, and PyTorch's
    gradient, ``(x - t) / max(x (1 - x), 1e-12)``. Where ``x (1 - x) >= 1e-12`` that is the
    formula's own derivative; nearer 0 or 1 (a saturated sigmoid gives exactly 1.0 in
    float32) the formula's is ``0 * inf``, NaN, so there the loss is its value plus a
    linear term with PyTorch's slope."""
    reduction = _reduction(size_average, reduce, reduction, "binary_cross_entropy")
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         f"size.")

    def loss_at(x):
        return (target - 1) * log1p(-x).clamp(min=-100) - target * log(x).clamp(min=-100)
    x = input.detach()
    if not _tracing() and type(x) is Tensor and x.numel() and not bool(     # (a host read)
            ((x >= 0) & (x <= 1)).all()):
        raise op_error("binary_cross_entropy", "all elements of input should be between 0 "
                                               "and 1")
    inside = x * (1 - x) >= _BCE_EPS
    at_edge = loss_at(x) + (input - x) * ((x - target) / _BCE_EPS).detach()
    loss = where(inside, loss_at(where(inside, input, 0.5)), at_edge)
    return _reduce(loss if weight is None else loss * weight, reduction)


# PyTorch's floor on x (1 - x) in binary_cross_entropy's gradient: 1e-12 as a float32
_BCE_EPS = 9.999999960041972e-13


@backward_name("BinaryCrossEntropyWithLogitsBackward0")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """``(1 - t) softplus(x) + p t softplus(-x)``, ``p`` the pos_weight (1 without): PyTorch's
    ``(1 - t) x + (1 + (p - 1) t) softplus(-x)`` rearranged so that no term cancels another.
    Neither the loss nor its gradient, ``(1 - t) sigmoid(x) - p t sigmoid(-x)``, loses
    precision for a large logit of either sign: the gradient for ``t = 0`` is ``sigmoid(x)``
    itself, not ``1 - sigmoid(-x)``, which is 0 in float32 from ``x = -17`` down."""
    reduction = _reduction(size_average, reduce, reduction, "binary_cross_entropy_with_logits")
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    loss_if_0 = -log_sigmoid(-input)        # softplus(x): the loss where t = 0
    loss_if_1 = -log_sigmoid(input)         # softplus(-x): the loss where t = 1
    weight_1 = target if pos_weight is None else target * pos_weight
    loss = (1 - target) * loss_if_0 + weight_1 * loss_if_1
    return _reduce(loss if weight is None else loss * weight, reduction)


def _warn_target_size(input, target):
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", stacklevel=3)


@backward_name("SmoothL1LossBackward0")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` for ``|d| < beta``, else ``|d| - 0.5 beta``; ``beta = 0`` is L1."""
    _warn_target_size(input, target)
    reduction = _reduction(size_average, reduce, reduction, "smooth_l1_loss")
    if beta < 0:
        raise op_error("smooth_l1_loss", "smooth_l1_loss does not support negative values for "
                                         "beta.")
    d = input - target
    if beta == 0.0:
        return _reduce(abs(d), reduction)
    z = abs(d)
    return _reduce(where(z < beta, d * d * 0.5 / beta, z - 0.5 * beta), reduction)


@backward_name("HuberLossBackward0")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d^2`` for ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    _warn_target_size(input, target)
    reduction = _reduction(None, None, reduction, "huber_loss")
    if delta <= 0:
        raise op_error("huber_loss", "huber_loss does not support non-positive values for "
                                     "delta.")
    d = input - target
    z = abs(d)
    loss = where(z < delta, d * d * 0.5, (z - 0.5 * delta) * delta)
    if weight is not None:
        if weight.shape != input.shape:
            raise ValueError("Weights and input must have the same size.")
        loss = loss * weight
    return _reduce(loss, reduction)


def _xlogy_self(t):
    """``t log t`` with 0 at ``t = 0`` (and no NaN gradient there)."""
    zero = t == 0
    return where(zero, 0.0, t * log(where(zero, 1.0, t)))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise ``target (log target - input)`` (``exp(target) (target - input)`` with
    ``log_target``); ``batchmean`` sums and divides by the batch size. The target's gradient
    at ``target = 0`` is 0 here, NaN in PyTorch (its ``xlogy`` backward divides 0 by 0)."""
    if size_average is not None or reduce is not None:
        reduction = _reduction(size_average, reduce, reduction, "kl_div")
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                          "the support size.'batchmean' divides only by the batch size, and "
                          "aligns with the KL div math definition.'mean' will be changed to "
                          "behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        if reduction not in ("none", "mean", "sum", "batchmean"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
    if not input.is_floating_point() or not target.is_floating_point():
        raise op_error("kl_div", "kl_div: Integral inputs not supported.")
    if log_target:
        loss = exp(target) * (target - input)
    else:
        loss = _xlogy_self(target) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim != 0 else total
    return _reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(size_average, reduce, reduction, "l1_loss")
    return _reduce(abs(input - target), reduction)
