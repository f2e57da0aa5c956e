"""``Adadelta`` (Zeiler 2012) with L2 ``weight_decay`` and ``maximize``.

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so float32
parameters follow PyTorch's to rounding. Per parameter, at each step:

    g += weight_decay * p
    v = v * rho + (1 - rho) * g * g             (square_avg)
    delta = sqrt(u + eps) / sqrt(v + eps) * g   (u: acc_delta)
    u = u * rho + (1 - rho) * delta * delta
    p -= lr * delta

The state (``step``, a float32 scalar tensor, then ``square_avg`` and ``acc_delta``) is
made at a parameter's first step, as in PyTorch. ``foreach``, ``capturable`` and
``differentiable`` are accepted and kept in the groups; the update is the same for each.
"""
from ..ops import sqrt
from .optimizer import Optimizer, _no_grad_step


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self._groups():
            lr, rho, eps = group["lr"], group["rho"], group["eps"]
            weight_decay = group["weight_decay"]
            for p, grad in self._grads(group):
                state = self._lazy_state(p, "square_avg", "acc_delta")
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                state["step"].add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg.mul_(rho).add_(grad * (1 - rho) * grad)     # addcmul_, same order
                std = sqrt(square_avg + eps)
                delta = sqrt(acc_delta + eps) / std * grad
                acc_delta.mul_(rho).add_(delta * (1 - rho) * delta)    # addcmul_
                p.add_(delta, alpha=-lr)
        return loss
