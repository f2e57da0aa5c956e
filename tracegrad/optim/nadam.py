"""``NAdam``: Adam with Nesterov momentum (Dozat), with the momentum-decay schedule, L2 or
decoupled ``weight_decay`` and ``maximize``.

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter, at step t:

    p *= 1 - lr * weight_decay                  (decoupled) | g += weight_decay * p
    mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))
    mu_prod *= mu_t                             (state["mu_product"], from 1)
    m += (g - m) * (1 - beta1)                  (lerp)
    v = v * beta2 + (1 - beta2) * g * g
    denom = sqrt(v / (1 - beta2^t)) + eps
    p += (-lr * (1 - mu_t) / (1 - mu_prod)) * g / denom
    p += (-lr * mu_{t+1} / (1 - mu_prod * mu_{t+1})) * m / denom

``step`` and ``mu_product`` are float32 scalar tensors as in PyTorch's state
dicts; ``mu_product`` is multiplied in float32, as PyTorch does, and read back
as a Python float for the step sizes.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from ..ops import sqrt
from . import _foreach
from .optimizer import Optimizer, check_args, scalar


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        check_args(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _state_for(self, p):
        return self._lazy_state(p, "exp_avg", "exp_avg_sq", mu_product=1.0)

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        momentum_decay = group["momentum_decay"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            mu_product = state["mu_product"]
            state["step"].add_(1)
            step = scalar(state["step"])
            bias_correction2 = 1 - beta2 ** step
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = self._decayed(grad, p, weight_decay)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product.mul_(mu)
            exp_avg.add_((grad - exp_avg) * (1 - beta1))           # lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).add_(grad * (1 - beta2) * grad)  # addcmul_, same order
            if group["differentiable"]:
                self._differentiable_update(p, grad, self._kept(exp_avg),
                                            self._kept(exp_avg_sq) / bias_correction2,
                                            mu_product, mu, mu_next, lr, eps)
                continue
            denom = sqrt(exp_avg_sq / bias_correction2).add_(eps)
            mu_product_value = scalar(mu_product)
            mu_product_next = mu_product_value * mu_next
            p.add_(grad * (-lr * (1.0 - mu) / (1.0 - mu_product_value)) / denom)  # addcdiv_
            p.add_(exp_avg * ((-lr * mu_next) / (1.0 - mu_product_next)) / denom)

    @staticmethod
    def _differentiable_update(p, grad, exp_avg, v_hat, mu_product, mu, mu_next, lr, eps):
        """PyTorch's differentiable update: out of place where the loop writes in place
        (what ``sqrt`` keeps for its backward), and the coefficients computed on the
        ``mu_product`` tensor (in its float32, as PyTorch's are; a number over a tensor as
        PyTorch computes it, the tensor's reciprocal times the number)."""
        denom = sqrt(v_hat) + eps
        mu_product_next = mu_product * mu_next
        p.add_(grad * ((1.0 - mu_product).reciprocal() * (-lr * (1.0 - mu))) / denom)
        p.add_(exp_avg * ((1.0 - mu_product_next).reciprocal() * (-lr * mu_next)) / denom)

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        momentum_decay, maximize = group["momentum_decay"], group["maximize"]
        decoupled = weight_decay != 0 and group["decoupled_weight_decay"]
        fused, rest = _foreach.split(group, self._state_for)
        for p, data, g, state in fused:
            step = _foreach.count_step(state)
            if decoupled:
                _foreach.decay_decoupled(p, data, lr, weight_decay)
            g, own = _foreach.gradient(data, g, maximize, 0 if decoupled else weight_decay)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product = state["mu_product"]
            np.multiply(mu_product._data, mu, out=mu_product._data)
            _foreach.bump(mu_product)
            m, v, denom = _foreach.adam_moments(state, g, beta1, beta2)
            np.divide(v, 1 - beta2 ** step, out=denom)
            np.add(np.sqrt(denom, out=denom), eps, out=denom)
            mu_product_value = mu_product._data.item()
            mu_product_next = mu_product_value * mu_next
            update = np.multiply(g, -lr * (1.0 - mu) / (1.0 - mu_product_value),
                                 out=g if own else None)            # addcdiv_
            np.add(data, np.divide(update, denom, out=update), out=data)
            np.multiply(m, (-lr * mu_next) / (1.0 - mu_product_next), out=update)
            np.add(data, np.divide(update, denom, out=update), out=data)
            _foreach.bump(p, 2)
        return rest
