"""``RAdam``: Adam with the variance rectification (Liu et al.), with L2 or decoupled
``weight_decay`` and ``maximize``.

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter, at step t:

    p *= 1 - lr * weight_decay                  (decoupled) | g += weight_decay * p
    m += (g - m) * (1 - beta1)                  (lerp)
    v = v * beta2 + (1 - beta2) * g * g
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
    r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
    p -= m / (1 - beta1^t) * lr * sqrt(1 - beta2^t) / (sqrt(v) + eps) * r    (rho_t > 5)
    p -= m / (1 - beta1^t) * lr                                              (otherwise)

While the variance estimate is too short (rho_t <= 5, the first steps) the
step is plain bias-corrected momentum SGD. The scalars are Python floats from
``state["step"]``, a float32 scalar tensor as in PyTorch's state dicts.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from ..ops import sqrt
from . import _foreach
from .optimizer import Optimizer, check_args, scalar


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        check_args(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _state_for(self, p):
        return self._lazy_state(p, "exp_avg", "exp_avg_sq")

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            state["step"].add_(1)
            step = scalar(state["step"])
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = self._decayed(grad, p, weight_decay)
            exp_avg.add_((grad - exp_avg) * (1 - beta1))           # lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).add_(grad * (1 - beta2) * grad)  # addcmul_, same order
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            bias_corrected_exp_avg = self._kept(exp_avg) / bias_correction1
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                        / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                root = sqrt(exp_avg_sq)         # which sqrt keeps for its backward
                root = root + eps if group["differentiable"] else root.add_(eps)
                adaptive_lr = bias_correction2 ** 0.5 / root
                p.sub_(bias_corrected_exp_avg * lr * adaptive_lr * rect)  # add_(alpha=-1)
            else:
                p.sub_(bias_corrected_exp_avg * lr)

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        maximize = group["maximize"]
        decoupled = weight_decay != 0 and group["decoupled_weight_decay"]
        rho_inf = 2 / (1 - beta2) - 1
        fused, rest = _foreach.split(group, self._state_for)
        for p, data, g, state in fused:
            step = _foreach.count_step(state)
            if decoupled:
                _foreach.decay_decoupled(p, data, lr, weight_decay)
            g, _ = _foreach.gradient(data, g, maximize, 0 if decoupled else weight_decay)
            m, v, tmp = _foreach.adam_moments(state, g, beta1, beta2)
            bias_correction2 = 1 - beta2 ** step
            update = np.divide(m, 1 - beta1 ** step)
            np.multiply(update, lr, out=update)
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                        / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                adaptive_lr = np.add(np.sqrt(v, out=tmp), eps, out=tmp)
                np.divide(bias_correction2 ** 0.5, adaptive_lr, out=adaptive_lr)
                np.multiply(update, adaptive_lr, out=update)
                np.multiply(update, rect, out=update)
            np.subtract(data, update, out=data)
            _foreach.bump(p)
        return rest
