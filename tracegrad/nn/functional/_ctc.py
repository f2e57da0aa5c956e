"""``nn.functional.ctc_loss``: the connectionist temporal classification loss.

The loss of a sample is ``-log p(target | log_probs)``, summed over every alignment of the
target (with blanks between and around its labels, repeats collapsed) to the input's
time steps. It is the forward (alpha) recursion over the extended target
``blank, l1, blank, l2, ..., blank``, written in tensor ops over time, in log space with a
``logsumexp`` that keeps all--inf sums finite in the backward, so autograd differentiates
it; samples of different lengths run together and each keeps its alpha at its own last
step.

PyTorch's backward is not the derivative of this loss in ``log_probs``: it returns
``exp(log_probs) - gamma`` (the derivative in the logits, when ``log_probs`` is their
``log_softmax``) where the true derivative is ``-gamma``. The two agree after a
``log_softmax``; to agree everywhere, the loss gets ``sum(exp(lp) - exp(lp).detach())``
over each sample's valid steps, which is 0 but adds PyTorch's ``exp(log_probs)`` term
to the gradient.
"""
import math

from ... import creation, dtypes, ops
from ...tensor import Tensor
from ...ops import where
from ...ops.core import op_error


def _as_lengths(lengths, name):
    """Python ints from a tensor, a list or a tuple of lengths."""
    if isinstance(lengths, Tensor):
        if lengths.is_floating_point():
            raise op_error("ctc_loss", f"ctc_loss(): {name} must be an integer tensor")
        return [int(v) for v in lengths.reshape(-1).tolist()]
    return [int(v) for v in (lengths if isinstance(lengths, (list, tuple)) else [lengths])]


def _padded_targets(targets, target_lengths, batch):
    """Targets as an (N, S) int64 tensor: padded rows stay, a concatenation is split."""
    longest = max(target_lengths, default=0)
    if targets.dim() == 2:
        return targets[:, :longest].long()
    rows, start = [], 0
    for length in target_lengths:
        row = targets[start:start + length].long()
        start += length
        pad = creation.zeros(longest - length, dtype=dtypes.int64)
        rows.append(ops.cat([row, pad]))
    return ops.stack(rows) if rows else creation.zeros(0, 0, dtype=dtypes.int64)


def _logsumexp(terms):
    """``log(sum(exp(terms)))`` over the last dim; an all--inf row gives -inf with a zero
    (not NaN) gradient."""
    peak = terms.detach().max(-1, keepdim=True)[0]
    peak = where(peak == -math.inf, 0.0, peak)
    total = (terms - peak).exp().sum(-1)
    finite = total > 0
    return where(finite, peak.squeeze(-1) + where(finite, total, 1.0).log(), -math.inf)


def _shifted(alpha, by):
    """``alpha`` moved ``by`` places along the extended target, -inf shifted in."""
    fill = creation.full((alpha.shape[0], by), -math.inf, dtype=alpha.dtype)
    return ops.cat([fill, alpha[:, :alpha.shape[1] - by]], 1)


def _alpha_loss(log_probs, extended, can_skip, input_lengths, extended_lengths):
    """Per-sample ``-log p``: the alpha recursion, read at each sample's last step."""
    steps, batch, _ = log_probs.shape
    width = extended.shape[1]
    emit = log_probs.gather(2, extended.unsqueeze(0).expand(steps, batch, width))
    start = creation.arange(width) < 2
    alpha = where(start.unsqueeze(0), emit[0], -math.inf)
    lengths = creation.tensor(input_lengths)
    last = where((lengths == 1).unsqueeze(1), alpha, -math.inf)
    for t in range(1, max(input_lengths, default=0)):
        skip = where(can_skip, _shifted(alpha, 2), -math.inf)
        terms = ops.stack([alpha, _shifted(alpha, 1), skip], -1)
        alpha = emit[t] + _logsumexp(terms)
        last = where((lengths == t + 1).unsqueeze(1), alpha, last)
    ends = creation.tensor(extended_lengths).unsqueeze(1)
    finals = ops.cat([last.gather(1, ends - 1),
                            where(ends >= 2, last.gather(1, (ends - 2).clamp(min=0)),
                                  -math.inf)], 1)
    return -_logsumexp(finals)


def _pytorch_gradient_term(log_probs, input_lengths):
    """0, with gradient ``exp(log_probs)`` on each sample's valid steps (see the module
    docstring)."""
    probs = log_probs.exp()
    steps = creation.arange(log_probs.shape[0]).unsqueeze(1)
    valid = steps < creation.tensor(input_lengths).unsqueeze(0)
    return where(valid.unsqueeze(2), probs - probs.detach(), 0.0).sum((0, 2))


def _check(log_probs, batch, input_lengths, target_lengths, targets, blank):
    classes = log_probs.shape[-1]
    if not 0 <= blank < classes:
        raise op_error("ctc_loss", "blank must be in label range")
    if len(input_lengths) != batch:
        raise op_error("ctc_loss", "input_lengths must be of size batch_size")
    if len(target_lengths) != batch:
        raise op_error("ctc_loss", "target_lengths must be of size batch_size")
    for length in input_lengths:
        if length > log_probs.shape[0]:
            raise op_error("ctc_loss", f"Expected input_lengths to have value at most "
                                       f"{log_probs.shape[0]}, but got value {length} (while "
                                       f"checking arguments for ctc_loss_cpu)")
    if targets.dim() == 2:
        for length in target_lengths:
            if length > targets.shape[1]:
                raise op_error("ctc_loss", f"Expected tensor to have size at least {length} "
                                           f"at dimension 1, but got size {targets.shape[1]} "
                                           f"for argument #2 'targets' (while checking "
                                           f"arguments for ctc_loss_cpu)")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The CTC loss of (T, N, C) (or unbatched (T, C)) log-probabilities against padded
    (N, S) or concatenated targets; ``mean`` divides each loss by its target length."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.dim() == 1 else targets
    batch = log_probs.shape[1]
    input_lengths = _as_lengths(input_lengths, "input_lengths")
    target_lengths = _as_lengths(target_lengths, "target_lengths")
    _check(log_probs, batch, input_lengths, target_lengths, targets, blank)
    padded = _padded_targets(targets, target_lengths, batch)
    blanks = creation.full(padded.shape, blank, dtype=dtypes.int64)
    extended = ops.cat([ops.stack([blanks, padded], -1).reshape(batch, -1),
                              creation.full((batch, 1), blank, dtype=dtypes.int64)], 1)
    repeated = ops.cat([creation.ones(batch, 2, dtype=dtypes.bool),
                              extended[:, 2:] == extended[:, :-2]], 1)
    can_skip = (extended != blank) & ~repeated
    extended_lengths = [2 * length + 1 for length in target_lengths]
    loss = _alpha_loss(log_probs, extended, can_skip, input_lengths, extended_lengths)
    loss = loss + _pytorch_gradient_term(log_probs, input_lengths)
    if zero_infinity:
        loss = where(loss == math.inf, 0.0, loss)
    if reduction == "mean":
        lengths = creation.tensor(target_lengths, dtype=loss.dtype).clamp(min=1)
        return (loss / lengths).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss
