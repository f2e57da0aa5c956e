"""More losses of ``nn.functional`` (which exports them): the margin, embedding, soft-margin,
Gaussian/Poisson NLL and triplet losses, with PyTorch 2.13's signatures, reductions (the
legacy ``size_average``/``reduce`` pair too, where PyTorch takes it) and errors.

Each is a composition of tracegrad ops. A hinge ``max(0, z)`` is ``clamp(z, min=0)`` where
PyTorch's formula is a ``clamp_min`` (its gradient passes at ``z = 0``) and ``where(z > 0,
...)`` where PyTorch's kernel tests ``z > 0`` (the multi-margin losses: no gradient at 0).
Checks that read tensor values (target ranges, negative variances) run in eager mode only.
"""
import math

from ... import creation
from ...ops import exp, gather, index_select, log, log1p, minimum, where
from ...ops.core import op_error
from ...ops.declare import backward_name
from ...ops.nn_ops import _tracing
from ._base import log_sigmoid
from ._loss import _reduce, _reduction
from ._more import pairwise_distance


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``."""
    reduction = _reduction(size_average, reduce, reduction, "margin_ranking_loss")
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise op_error("margin_ranking_loss",
                       f"margin_ranking_loss : All input tensors should have same dimension but "
                       f"got sizes: input1: {input1.shape}, input2: {input2.shape}, target: "
                       f"{target.shape} ")
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1`` (other
    targets add both, as PyTorch's formula does)."""
    reduction = _reduction(size_average, reduce, reduction, "hinge_embedding_loss")
    margin_term = where(target != 1, (margin - input).clamp(min=0), 0.0)
    self_term = where(target != -1, input, 0.0)
    return _reduce(margin_term + self_term, reduction)


_COSINE_EPS = 1e-12     # PyTorch's EPSILON in cosine_embedding_loss


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos`` where ``target == 1``, ``max(0, cos - margin)`` where ``target == -1``;
    ``cos = <x1, x2> / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12))`` as PyTorch computes it."""
    reduction = _reduction(size_average, reduce, reduction, "cosine_embedding_loss")
    dim = target.ndim
    if dim not in (0, 1):
        raise op_error("cosine_embedding_loss",
                       "0D or 1D target tensor expected, multi-target not supported")
    want = dim + 1
    if input1.ndim != want or input2.ndim != want:
        raise op_error("cosine_embedding_loss",
                       f"{dim}D target tensor expects {want}D input tensors, but found inputs "
                       f"with sizes {list(input1.shape)} and {list(input2.shape)}.")
    prod = (input1 * input2).sum(dim)
    mag1 = (input1 * input1).sum(dim) + _COSINE_EPS
    mag2 = (input2 * input2).sum(dim) + _COSINE_EPS
    cos = prod / (mag1 * mag2).sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, (cos - margin).clamp(min=0),
                                                     0.0)
    return _reduce(loss, reduction)


@backward_name("SoftMarginLossBackward0")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``."""
    reduction = _reduction(size_average, reduce, reduction, "soft_margin_loss")
    return _reduce(log1p(exp(-input * target)), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The mean over classes (the last dim) of the binary logistic loss of each class."""
    reduction = _reduction(size_average, reduce, reduction, "multilabel_soft_margin_loss")
    loss = -(target * log_sigmoid(input) + (1 - target) * log_sigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    return _reduce(loss.sum(class_dim) / input.shape[class_dim], reduction)


def _as_matrix(input, name):
    """``input`` as ``(N, C)``: a vector is one sample, a 0-dim input one sample of one class
    (whose loss is 0: the only class is the target), as PyTorch's kernels take them."""
    if input.ndim > 2 or input.ndim and input.shape[-1] == 0:
        raise op_error(name, f"Expected non-empty vector or matrix with optional 0-dim batch "
                             f"size, but got: {list(input.shape)}")
    return input.reshape((1,) * (2 - input.ndim) + tuple(input.shape))


def _check_range(target, low, high, message, name):
    if not _tracing() and target.numel() and (
            bool((target < low).any()) or bool((target >= high).any())):
        raise op_error(name, message)


@backward_name("MultiMarginLossBackward0")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Per sample ``sum_{i != y} w[y] max(0, margin - x[y] + x[i])^p / C`` (no gradient at
    the hinge's 0, as PyTorch's kernel)."""
    reduction = _reduction(size_average, reduce, reduction, "multi_margin_loss")
    if p not in (1, 2):
        raise op_error("multi_margin_loss", "only p == 1 and p == 2 supported", ValueError)
    if weight is not None and weight.ndim != 1:
        raise op_error("multi_margin_loss", "weight must be one-dimensional", ValueError)
    x = _as_matrix(input, "multi_margin_loss")
    n, c = x.shape
    if target.ndim > 1 or target.numel() != n:
        raise op_error("multi_margin_loss",
                       f"multi_margin_loss: target tensor should be 1-D with size equal to the "
                       f"number of input samples (batch size). Expected target size [{n}], but "
                       f"got {list(target.shape)}. Input has shape {list(input.shape)}.")
    t = target.reshape(n)
    _check_range(t, 0, c, "target out of range", "multi_margin_loss")
    z = margin - gather(x, 1, t.unsqueeze(1)) + x
    others = creation.arange(c, device=x.device) != t.unsqueeze(1)
    h = where((z > 0) & others, z, 0.0)
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * index_select(weight, 0, t).unsqueeze(1)
    loss = h.sum(1) / c
    # reduction="none" keeps the target's shape: (N,) for a 1-D target, () for a 0-dim one
    return _reduce(loss if target.ndim else loss.reshape(()), reduction)


@backward_name("MultilabelMarginLossBackward0")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample ``sum_{j, i} max(0, 1 - (x[y_j] - x[i])) / C`` over the target classes
    ``y_j`` (the entries of ``target`` before its first -1) and the non-target classes
    ``i`` (no gradient at the hinge's 0, as PyTorch's kernel)."""
    reduction = _reduction(size_average, reduce, reduction, "multilabel_margin_loss")
    x = _as_matrix(input, "multilabel_margin_loss")
    n, c = x.shape
    # a vector or 0-dim input takes a target of C entries (a vector, or 0-dim where C is 1)
    fits = (target.ndim <= 1 and target.numel() == c if input.ndim <= 1
            else tuple(target.shape) == tuple(input.shape))
    if not fits:
        raise op_error("multilabel_margin_loss", f"inconsistent target size: "
                                                 f"{list(target.shape)} for input of size: "
                                                 f"{list(input.shape)}")
    t = target.reshape(n, c)
    _check_range(t, -1, c, "argument #2 'target' is out of range", "multilabel_margin_loss")
    valid = (t < 0).long().cumsum(1) == 0            # before the first -1
    safe = where(valid, t, 0)
    classes = creation.arange(c, device=x.device)
    is_target = (valid.unsqueeze(2) & (safe.unsqueeze(2) == classes)).any(1)   # (N, C)
    z = 1 - gather(x, 1, safe).unsqueeze(2) + x.unsqueeze(1)                  # (N, J, C)
    keep = (z > 0) & valid.unsqueeze(2) & (~is_target).unsqueeze(1)
    loss = where(keep, z, 0.0).sum((1, 2)) / c
    return _reduce(loss if target.ndim == 2 else loss.reshape(()), reduction)


def _gaussian_error(message):
    return op_error("gaussian_nll_loss", message, ValueError)


def _gaussian_var(input, var):
    """``var`` checked and shaped to broadcast against ``input``, as PyTorch's rules."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise _gaussian_error("var has negative entry/entries")
        return var * creation.ones_like(input)
    if not _tracing() and bool((var < 0).any()):
        raise _gaussian_error("var has negative entry/entries")
    if var.shape == input.shape:
        return var
    if tuple(input.shape[:-1]) == tuple(var.shape):
        return var.unsqueeze(-1)
    if input.ndim == var.ndim and sum(
            y for x, y in zip(input.shape, var.shape) if x != y) == 1:
        return var
    raise _gaussian_error("var is of incorrect size")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``0.5 (log v + (input - target)^2 / v)`` (``+ 0.5 log 2 pi`` if ``full``), ``v`` the
    variance clamped at ``eps``: PyTorch clamps under no_grad, so ``var``'s gradient ignores
    the clamp (taken at the clamped value); so does this."""
    var = _gaussian_var(input, var)
    if reduction not in ("none", "mean", "sum"):
        raise _gaussian_error(reduction + " is not valid")
    v = where(var >= eps, var, var - var.detach() + eps)
    d = input - target
    loss = 0.5 * (log(v) + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """``exp(input) - target * input`` (``log_input``) or ``input - target log(input +
    eps)``; ``full`` adds Stirling's ``t log t - t + 0.5 log(2 pi t)`` where ``t > 1``. The
    target's gradient at ``t = 0`` with ``full`` is 0 here, NaN in PyTorch (0 * log 0)."""
    if size_average is not None or reduce is not None:
        reduction = _reduction(size_average, reduce, reduction, "poisson_nll_loss")
    if reduction not in ("none", "mean", "sum"):
        raise op_error("poisson_nll_loss", reduction + " is not a valid value for reduction",
                       ValueError)
    if log_input:
        loss = exp(input) - target * input
    else:
        loss = input - target * log(input + eps)
    if full:
        small = target <= 1
        t = where(small, 2.0, target)          # any t > 0: its term is dropped below
        stirling = t * log(t) - t + 0.5 * log(2 * math.pi * t)
        loss = loss + where(small, 0.0, stirling)
    return _reduce(loss, reduction)


def _check_triplet_dims(anchor, positive, negative, name):
    a, p, n = anchor.ndim, positive.ndim, negative.ndim
    if not a == p == n:
        raise op_error(name, f"The anchor, positive, and negative tensors are expected to have "
                             f"the same number of dimensions, but got: anchor {a}D, positive "
                             f"{p}D, and negative {n}D inputs")


def _check_margin(margin, name):
    if margin <= 0:
        raise op_error(name, f"margin must be greater than 0, got {margin}", ValueError)


def _triplet(anchor, positive, negative, distance, margin, swap, reduction):
    dist_pos = distance(anchor, positive)
    dist_neg = distance(anchor, negative)
    if swap:
        dist_neg = minimum(dist_neg, distance(positive, negative))
    return _reduce((margin + dist_pos - dist_neg).clamp(min=0), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the ``pairwise_distance`` of order
    ``p``; ``swap`` takes ``d(a, n) = min(d(a, n), d(p, n))``."""
    reduction = _reduction(size_average, reduce, reduction, "triplet_margin_loss")
    _check_margin(margin, "triplet_margin_loss")
    _check_triplet_dims(anchor, positive, negative, "triplet_margin_loss")
    return _triplet(anchor, positive, negative,
                    lambda x, y: pairwise_distance(x, y, p, eps), margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """``triplet_margin_loss`` with any ``distance_function`` (``pairwise_distance`` by
    default)."""
    if reduction not in ("mean", "sum", "none"):
        raise op_error("triplet_margin_with_distance_loss",
                       f"{reduction} is not a valid value for reduction", ValueError)
    _check_margin(margin, "triplet_margin_with_distance_loss")
    _check_triplet_dims(anchor, positive, negative, "triplet_margin_with_distance_loss")
    distance = pairwise_distance if distance_function is None else distance_function
    return _triplet(anchor, positive, negative, distance, margin, swap, reduction)
