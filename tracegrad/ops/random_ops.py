"""Random draws built on ``rand``/``randn``: ``bernoulli``, ``normal``, ``multinomial``.
``manual_seed`` and ``generator=`` govern them as they govern ``rand``, and a compiled
function draws afresh at each call (its ``random`` nodes stay ops).
"""
import math

from .. import dtypes
from .._hooks import state as _hook_state
from ..device import xp_of
from ..layouts import check_layout
from ..tensor import Tensor
from .core import op_error
from .declare import method
from .elementwise import where
from .reduce_ops import sum
from .rules import broadcast
from .scan_sort import argsort, cumsum
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


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, layout=None,
           device=None, requires_grad=False):
    """Samples of N(mean, std**2). Tensor ``mean``/``std`` broadcast; their gradient is
    zero, as in PyTorch (a sample is not reparametrised)."""
    from ..creation import randn
    check_layout("normal", layout)
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


# In-place fills of older PyTorch code (``m.weight.data.normal_(0, 0.02)``). Each draws a
# fresh tensor from ``rand``/``randn``/``randint`` (so ``manual_seed``, ``generator=`` and
# compile's random nodes govern it as they govern those) and ``copy_``s it in, which bumps
# the version counter and is recorded by the tracer like any in-place write.

def _uniform(self, generator):
    """U[0, 1) in ``self``'s dtype (float64 draws for float64, else the default float)."""
    from ..creation import rand
    dt = self.dtype if self.dtype.is_floating_point else dtypes.get_default_dtype()
    return rand(self.shape, generator=generator, dtype=dt, device=self.device)


def _fill(self, sample):
    # the sample carries no history (PyTorch's fills are not differentiable); a leaf that
    # requires grad outside no_grad still gets copy_'s error, as in PyTorch
    return self.copy_(sample.detach())


def _need_float(self, name):
    if not self.dtype.is_floating_point:
        raise op_error(name, f"{name} expects a floating-point tensor, but got "
                             f"{self.dtype.name}", TypeError)


@method("normal_")
def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with N(mean, std**2)."""
    from ..creation import randn
    _need_float(self, "normal_")
    if std < 0:
        raise op_error("normal_", f"normal expects std >= 0.0, but found std {std}")
    return _fill(self, randn(self.shape, generator=generator, dtype=self.dtype,
                             device=self.device) * std + mean)


@method("uniform_")
def _uniform_(self, a=0.0, b=1.0, *, generator=None, **kw):
    """Fill with U[a, b) (PyTorch also spells the bounds ``from``/``to``)."""
    a, b = kw.pop("from", a), kw.pop("to", b)
    if kw:
        raise op_error("uniform_", f"uniform_() got an unexpected keyword argument "
                                   f"'{next(iter(kw))}'", TypeError)
    _need_float(self, "uniform_")
    if a > b:
        raise op_error("uniform_", f"uniform_ expects to return a [from, to) range, but found "
                                   f"from={a} > to={b}")
    return _fill(self, _uniform(self, generator) * (b - a) + a)


@method("exponential_")
def _exponential_(self, lambd=1.0, *, generator=None):
    """Fill with Exp(lambd): -log(1 - u) / lambd."""
    from .elementwise import log
    _need_float(self, "exponential_")
    if not lambd > 0:
        raise op_error("exponential_", f"exponential_ expects lambda > 0.0, but found "
                                       f"lambda={lambd}")
    return _fill(self, -log(1 - _uniform(self, generator)) / lambd)


@method("geometric_")
def _geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    from .elementwise import floor, log
    if not 0 < p < 1:
        raise op_error("geometric_", f"geometric_ expects p to be in (0, 1), but got p={p}")
    u = _uniform(self, generator)
    return _fill(self, floor(log(1 - u) / math.log1p(-p)) + 1)


@method("log_normal_")
def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std**2))."""
    from ..creation import randn
    from .elementwise import exp
    _need_float(self, "log_normal_")
    if not std > 0:
        raise op_error("log_normal_", f"log_normal_ expects std > 0.0, but found std={std}")
    return _fill(self, exp(randn(self.shape, generator=generator, dtype=self.dtype,
                                 device=self.device) * std + mean))


@method("cauchy_")
def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy(median, sigma): median + sigma * tan(pi * (u - 1/2))."""
    from .elementwise import cos, sin
    _need_float(self, "cauchy_")
    if not sigma > 0:
        raise op_error("cauchy_", f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    angle = (_uniform(self, generator) - 0.5) * math.pi
    return _fill(self, sin(angle) / cos(angle) * sigma + median)


def _random_bounds(dtype):
    """``random_()``'s range [0, high) for ``dtype``: every integer the dtype holds exactly
    (floats: up to 2**mantissa digits, inclusive), as PyTorch's."""
    if dtype is dtypes.bool:
        return 2
    if dtype.is_floating_point:
        digits = {"float16": 11, "bfloat16": 8, "float32": 24}.get(dtype.name, 53)
        return 2 ** digits + 1
    import numpy as np
    return int(np.iinfo(np.dtype(dtype.name)).max) + (0 if dtype.name == "int64" else 1)


@method("random_")
def _random_(self, *args, generator=None, **kw):
    """``random_()``: integers over the dtype's exact range; ``random_(to)``: [0, to);
    ``random_(from, to)``: [from, to) (``to=None``: up to the dtype's range)."""
    from ..creation import randint
    unknown = set(kw) - {"from", "to"}
    if unknown or len(args) > 2:
        raise op_error("random_", f"random_() takes (from, to), (to) or (); got {len(args)} "
                                  f"positional arguments and {sorted(kw)}", TypeError)
    if len(args) == 1 and not kw:
        low, high = 0, args[0]
    else:
        bounds = dict(zip(("from", "to"), args), **kw)
        low, high = bounds.get("from", 0), bounds.get("to")
        if high is None:
            high = _random_bounds(self.dtype)
    if low >= high:
        raise op_error("random_", f"random_ expects 'from' to be less than 'to', but got "
                                  f"from={low} >= to={high}")
    sample = randint(low, high, self.shape, generator=generator, device=self.device)
    return _fill(self, sample.to(self.dtype))


__all__ = ["bernoulli", "normal", "multinomial"]
