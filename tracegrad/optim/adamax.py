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
from .. import creation, dtypes
from ..ops import maximum
from .optimizer import Optimizer, _no_grad_step


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _state_for(self, p):
        state = self.state[p]
        if not state:
            state["step"] = creation.tensor(0.0, dtype=dtypes.float32)
            state["exp_avg"] = creation.zeros_like(p)
            state["exp_inf"] = creation.zeros_like(p)
        return state

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                state = self._state_for(p)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                state["step"].add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                exp_avg.add_((grad - exp_avg) * (1 - beta1))           # lerp_(grad, 1 - beta1)
                exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
                clr = lr / (1 - beta1 ** state["step"].item())
                p.add_(exp_avg * -clr / exp_inf)                        # addcdiv_
        return loss
