"""``Adam`` (with ``amsgrad``, ``maximize``, L2 ``weight_decay``) and ``AdamW`` (decoupled
weight decay).

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter, at step t:

    p *= 1 - lr * weight_decay                  (AdamW)   | g += weight_decay * p   (Adam)
    m += (g - m) * (1 - beta1)                  (lerp)
    v = v * beta2 + (1 - beta2) * g * g
    v_max = max(v_max, v)                       (amsgrad; v_max replaces v below)
    denom = sqrt(v) / sqrt(1 - beta2^t) + eps
    p += (-lr / (1 - beta1^t)) * m / denom

The bias corrections are computed in Python floats from ``state["step"]``, a
float32 scalar tensor as in PyTorch's state dicts.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from ..ops import maximum, sqrt
from . import _foreach
from .optimizer import Optimizer, check_args, scalar


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        check_args(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _state_for(self, p, amsgrad):
        return self._lazy_state(p, "exp_avg", "exp_avg_sq",
                                *(("max_exp_avg_sq",) if amsgrad else ()))

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p, amsgrad)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            state["step"].add_(1)
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(p, alpha=weight_decay)
            exp_avg.add_((grad - exp_avg) * (1 - beta1))           # lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).add_(grad * (1 - beta2) * grad)  # addcmul_, same order
            step = scalar(state["step"])
            bias_correction1 = 1 - beta1 ** step
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            step_size = lr / bias_correction1
            if amsgrad:
                max_sq = state["max_exp_avg_sq"]
                max_sq.copy_(maximum(max_sq, exp_avg_sq))
                denom = (sqrt(max_sq) / bias_correction2_sqrt).add_(eps)
            else:
                denom = (sqrt(exp_avg_sq) / bias_correction2_sqrt).add_(eps)
            p.add_(exp_avg * -step_size / denom)                    # addcdiv_

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays,
        through two temporaries a parameter; returns the parameters left to the loop."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        decoupled = weight_decay != 0 and group["decoupled_weight_decay"]
        fused, rest = _foreach.split(group, lambda p: self._state_for(p, amsgrad))
        for p, data, g, state in fused:
            step = _foreach.count_step(state)
            if decoupled:
                _foreach.decay_decoupled(p, data, lr, weight_decay)
            g, _ = _foreach.gradient(data, g, maximize, 0 if decoupled else weight_decay)
            m, v, tmp = _foreach.adam_moments(state, g, beta1, beta2)
            if amsgrad:
                max_sq = state["max_exp_avg_sq"]
                v = np.maximum(max_sq._data, v, out=max_sq._data)
                _foreach.bump(max_sq)
            step_size = lr / (1 - beta1 ** step)
            denom = np.sqrt(v, out=tmp)
            np.divide(denom, (1 - beta2 ** step) ** 0.5, out=denom)
            np.add(denom, eps, out=denom)
            update = np.multiply(m, -step_size)                     # addcdiv_
            np.divide(update, denom, out=update)
            np.add(data, update, out=data)
            _foreach.bump(p)
        return rest


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), default 1e-2."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
