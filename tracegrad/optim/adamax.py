"""``Adamax``: Adam with the infinity norm (with L2 ``weight_decay`` and ``maximize``).

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter, at step t:

    g += weight_decay * p
    m += (g - m) * (1 - beta1)                  (lerp)
    u = max(u * beta2, |g| + eps)
    p += (-lr / (1 - beta1^t)) * m / u

The bias correction is computed in Python floats from ``state["step"]``, a
float32 scalar tensor as in PyTorch's state dicts.
"""
from ..ops import maximum
from .optimizer import Optimizer, _no_grad_step, check_args, scalar


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

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self._groups():
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            for p, grad in self._grads(group):
                state = self._state_for(p)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                state["step"].add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                exp_avg.add_((grad - exp_avg) * (1 - beta1))           # lerp_(grad, 1 - beta1)
                exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
                clr = lr / (1 - beta1 ** scalar(state["step"]))
                p.add_(exp_avg * -clr / exp_inf)                        # addcdiv_
        return loss
