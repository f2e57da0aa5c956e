"""``Adamax``: Adam with the infinity norm (with L2 ``weight_decay`` and ``maximize``).

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter, at step t:

    g += weight_decay * p
    m += (g - m) * (1 - beta1)                  (lerp)
    u = max(u * beta2, |g| + eps)
    p += (-lr / (1 - beta1^t)) * m / u

The bias correction is computed in Python floats from ``state["step"]``, a
float32 scalar tensor as in PyTorch's state dicts.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from ..ops import maximum
from . import _foreach
from .optimizer import Optimizer, check_args, scalar


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        check_args(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _state_for(self, p):
        return self._lazy_state(p, "exp_avg", "exp_inf")

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p)
            exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
            state["step"].add_(1)
            if weight_decay != 0:
                grad = self._decayed(grad, p, weight_decay)
            exp_avg.add_((grad - exp_avg) * (1 - beta1))           # lerp_(grad, 1 - beta1)
            exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
            clr = lr / (1 - beta1 ** scalar(state["step"]))
            p.add_(exp_avg * -clr / exp_inf)                        # addcdiv_

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        maximize = group["maximize"]
        fused, rest = _foreach.split(group, self._state_for)
        for p, data, g, state in fused:
            step = _foreach.count_step(state)
            g, _ = _foreach.gradient(data, g, maximize, weight_decay)
            exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
            m, u = exp_avg._data, exp_inf._data
            tmp = np.subtract(g, m)                                 # lerp_(grad, 1 - beta1)
            np.multiply(tmp, 1 - beta1, out=tmp)
            np.add(m, tmp, out=m)
            _foreach.bump(exp_avg)
            np.multiply(u, beta2, out=u)
            np.add(np.absolute(g, out=tmp), eps, out=tmp)
            np.maximum(u, tmp, out=u)
            _foreach.bump(exp_inf, 2)
            clr = lr / (1 - beta1 ** step)
            np.multiply(m, -clr, out=tmp)                           # addcdiv_
            np.add(data, np.divide(tmp, u, out=tmp), out=data)
            _foreach.bump(p)
        return rest
