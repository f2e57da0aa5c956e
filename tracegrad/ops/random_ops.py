"""Random draws built on ``rand``/``randn``: ``bernoulli``, ``normal``, ``multinomial``.
``manual_seed`` and ``generator=`` govern them as they govern ``rand``, and a compiled
function draws afresh at each call (its ``random`` nodes stay ops).
"""
import math

from .. import dtypes
from .._hooks import state as _hook_state
from ..device import xp_of
from ..tensor import Tensor
from .core import op_error
from .declare import method
from .elementwise import where
from .more_ops import argsort, cumsum
from .reduce_ops import sum
from .rules import broadcast
from .shape_ops import narrow, unsqueeze


@method
def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p``), else 0, in ``input``'s dtype; no gradient."""
    from ..creation import rand
    prob = input if p is None else p
    u = rand(input.shape, generator=generator, dtype=input.dtype if input.dtype
             .is_floating_point else dtypes.get_default_dtype(), device=input.device)
    out = (u < prob).to(input.dtype)
    # PyTorch's result takes part in autograd with a zero gradient
    return out + input * 0 if input.requires_grad and input.dtype.is_floating_point else out


@method("bernoulli_")
def _bernoulli_(self, p=0.5, *, generator=None):
    return self.copy_(bernoulli(self, p, generator=generator))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Samples of N(mean, std**2). Tensor ``mean``/``std`` broadcast; their gradient is
    zero, as in PyTorch (a sample is not reparametrised)."""
    from ..creation import randn
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise op_error("normal", "normal() missing the 'size' argument for float mean and "
                                     "std", TypeError)
        z = randn(size, generator=generator, dtype=dtype, device=device)
        out = z * std + mean
        return out.requires_grad_(True) if requires_grad else out
    if isinstance(std, Tensor) and _hook_state.tracer is None and bool((std < 0).any()):
        raise op_error("normal", "normal expects all elements of std >= 0.0")
    shape = broadcast(*[t.shape for t in tensors])
    dt = dtypes.result_type(*tensors)
    z = randn(shape, generator=generator, dtype=dt, device=tensors[0].device)
    sample = (z * (std.detach() if isinstance(std, Tensor) else std)
              + (mean.detach() if isinstance(mean, Tensor) else mean))
    for t in tensors:       # zero gradients to mean and std
        sample = sample + t * 0
    return sample


@method
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices drawn by the (unnormalised) weights in the last dim of a 1-D or 2-D input.

    With replacement: the count of cumulative weights at or below a uniform draw. Without:
    the ``num_samples`` smallest of Exp(1) / w (the exponential race), so no category is
    drawn twice and zero weights only when nothing else is left (an error, as in PyTorch)."""
    from ..creation import rand
    from .elementwise import log
    if input.ndim not in (1, 2):
        raise op_error("multinomial", "prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise op_error("multinomial", "multinomial only supports floating-point dtypes for input")
    n = input.shape[-1]
    if num_samples <= 0:
        raise op_error("multinomial", "cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n:
        raise op_error("multinomial", "cannot sample n_sample > prob_dist.size(-1) samples "
                                      "without replacement")
    w = input.detach()
    if _hook_state.tracer is None:
        data = w._data
        if (data < 0).any() or not xp_of(data).isfinite(data).all():
            raise op_error("multinomial", "probability tensor contains either `inf`, `nan` or "
                                          "element < 0")
        nonzero = (data > 0).sum(-1)
        if (nonzero == 0).any():
            raise op_error("multinomial", "invalid multinomial distribution (sum of "
                                          "probabilities <= 0)")
        if not replacement and (nonzero < num_samples).any():
            raise op_error("multinomial", "invalid multinomial distribution (with "
                                          "replacement=False, not enough non-negative category "
                                          "to sample)")
    batch = tuple(w.shape[:-1])
    if replacement:
        cdf = cumsum(w, -1)
        cdf = cdf / narrow(cdf, -1, n - 1, 1)
        u = rand(batch + (num_samples,), generator=generator, dtype=w.dtype, device=w.device)
        below = unsqueeze(cdf, -2) <= unsqueeze(u, -1)
        idx = sum(below, -1)
        return where(idx > n - 1, n - 1, idx)
    u = rand(batch + (n,), generator=generator, dtype=w.dtype, device=w.device)
    positive = w > 0
    keys = where(positive, -log(1 - u) / where(positive, w, 1.0), math.inf)
    return narrow(argsort(keys, -1, stable=True), -1, 0, num_samples)


__all__ = ["bernoulli", "normal", "multinomial"]
