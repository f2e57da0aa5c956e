"""``Adafactor`` (Shazeer and Stern 2018) as PyTorch 2.13's ``torch.optim.Adafactor``.

The second moment of a parameter of two or more dimensions is kept factored over its last
two: a row variance (the last dimension averaged away) and a column variance (the one
before it), whose outer product, divided by the rows' mean, estimates it; a vector (or a
0-d parameter) keeps the full ``variance``. Per parameter, at step t (g the gradient,
negated with ``maximize``; ``eps1`` None means the parameter dtype's machine epsilon):

    beta2_t = t ** beta2_decay                  (the weight of the new mean square)
    rho = min(lr, 1 / sqrt(t))
    alpha = max(eps2, rms(p)) * rho             (rms(x) = norm(x) / sqrt(numel))
    p *= 1 - lr * weight_decay                  (decoupled, as AdamW's)
    row_var = lerp(row_var, mean(g * g, -1), beta2_t)     col_var: over -2 alike
    var = row_var @ col_var / max(mean(row_var, -2), eps1) | lerp(variance, g * g, beta2_t)
    u = g / sqrt(max(var, eps1 ** 2))
    p -= alpha / max(1, rms(u) / d) * u

The update is PyTorch's single-tensor one, op for op (the mean squares as squared norms
over the dimension's size, ``lerp`` as ATen's: ``a + w * (b - a)`` for ``|w| < 0.5``, else
``b - (b - a) * (1 - w)``, ``w`` in the tensor's dtype). The norms PyTorch reads with
``.item()`` are read as Python floats in eager and as float64 tensors inside
``tracegrad.compile``, so a compiled step needs no data-dependent branch. The state
(``step``, a float32 scalar tensor, then ``row_var`` and ``col_var`` or ``variance``) is
PyTorch's. ``foreach`` is accepted and kept in the groups; the step is the loop's.
"""
import numpy as np

from .. import _hooks, creation, dtypes
from ..ops import maximum, minimum, where
from ..tensor import Tensor
from .optimizer import Optimizer, _no_grad_step, scalar
from .rprop import as_number


def _pick(fn, pick, a, b):
    """``pick(a, b)`` for numbers; ``fn`` (``minimum`` or ``maximum``) where either is a
    tensor (inside a trace), the number as a float64 constant."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return pick(a, b)
    a, b = (x if isinstance(x, Tensor) else creation.tensor(float(x), dtype=dtypes.float64)
            for x in (a, b))
    return fn(a, b)


def _lerp_(t, end, weight):
    """``t.lerp_(end, weight)`` as ATen computes it, ``weight`` a number or a 0-d tensor."""
    if isinstance(weight, Tensor):
        w = weight.to(t.dtype)
        t.copy_(where(w.abs() < 0.5, t + w * (end - t), end - (end - t) * (1 - w)))
        return
    w = t._data.dtype.type(weight)          # the weight in t's dtype, as ATen's opmath
    if abs(w) < 0.5:
        t.add_(float(w) * (end - t))
    else:
        t.copy_(end - (end - t) * float(1 - w))


def _mean_square(grad, dim):
    """``(g * g).mean(dim)`` kept, as PyTorch computes it: the norm squared over the size."""
    norm = grad.norm(dim=dim, keepdim=True)
    return norm * norm / grad.shape[dim]


def _rms(t):
    """``norm(t) / sqrt(numel)``: a Python float in eager, a float64 tensor in a trace."""
    return scalar(t.norm()) / (t.numel() ** 0.5)


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _state_for(self, p, grad):
        """p's state, made at its first step: ``step``, then ``row_var`` and ``col_var``
        (the shape with its last, or next-to-last, dimension 1) or ``variance``."""
        state = self.state[p]
        if not state:
            self._first_step()
            state["step"] = creation.tensor(0.0, dtype=dtypes.float32)
            if grad.dim() > 1:
                shape = list(grad.shape)
                state["row_var"] = creation.zeros(shape[:-1] + [1], dtype=grad.dtype)
                state["col_var"] = creation.zeros(shape[:-2] + [1, shape[-1]],
                                                  dtype=grad.dtype)
            else:
                state["variance"] = creation.zeros_like(grad)
        return self._lazy_state(p)          # registers the state's tensors with a trace

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self._groups():
            self._single_group(group)
        return loss

    def _single_group(self, group):
        """The per-parameter step (Tensor ops)."""
        lr, beta2_decay, d = group["lr"], group["beta2_decay"], group["d"]
        eps1, eps2 = group["eps"]
        weight_decay = group["weight_decay"]
        if _hooks.tracer is None:           # a tensor lr's value (traced: an input)
            lr = as_number(lr)
        for p, grad in self._grads(group):
            state = self._state_for(p, grad)
            if eps1 is None:                # PyTorch's: the first parameter's dtype decides
                eps1 = float(np.finfo(p._data.dtype).eps)
            state["step"].add_(1)
            step = scalar(state["step"])
            beta2_t = step ** beta2_decay
            rho = _pick(minimum, min, lr, 1 / (step ** 0.5))
            alpha = _pick(maximum, max, eps2, _rms(p)) * rho
            if weight_decay != 0:
                p.mul_(1 - lr * weight_decay)
            var_estimate = self._second_moment(state, grad, beta2_t, eps1)
            update = var_estimate.clamp(min=eps1 * eps1).rsqrt()
            update = update * grad
            denom = _pick(maximum, max, 1.0, _rms(update) / d)
            p.add_(update * (-alpha / denom))                   # add_(alpha=-alpha/denom)

    @staticmethod
    def _second_moment(state, grad, beta2_t, eps1):
        """The estimate of E[g * g], its state updated: factored, or the full variance."""
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            _lerp_(row_var, _mean_square(grad, -1), beta2_t)
            _lerp_(col_var, _mean_square(grad, -2), beta2_t)
            return (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
        variance = state["variance"]
        _lerp_(variance, grad * grad, beta2_t)
        return variance.clone()
