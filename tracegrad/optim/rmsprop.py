"""``RMSprop`` (Hinton's, with ``momentum``, ``centered``, L2 ``weight_decay``, ``maximize``).

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter:

    g += weight_decay * p
    v = v * alpha + (1 - alpha) * g * g
    a += (g - a) * (1 - alpha)                  (centered; lerp)
    avg = sqrt(v - a * a) | sqrt(v)   (centered | not), then avg += eps
    buf = buf * momentum + g / avg;  p -= lr * buf          (momentum > 0)
    p += -lr * g / avg                                      (momentum = 0)

``state["step"]`` is counted (a float32 scalar tensor) but not used, as in PyTorch.
"""
from ..ops import sqrt
from .optimizer import Optimizer, _no_grad_step


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _state_for(self, p, group):
        return self._lazy_state(p, "square_avg",
                                *(("momentum_buffer",) if group["momentum"] > 0 else ()),
                                *(("grad_avg",) if group["centered"] else ()))

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self._groups():
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            weight_decay, momentum = group["weight_decay"], group["momentum"]
            for p, grad in self._grads(group):
                state = self._state_for(p, group)
                square_avg = state["square_avg"]
                state["step"].add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg.mul_(alpha).add_(grad * (1 - alpha) * grad)     # addcmul_, same order
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg.add_((grad - grad_avg) * (1 - alpha))          # lerp_(grad, 1 - alpha)
                    avg = sqrt(square_avg - grad_avg * grad_avg)            # addcmul(value=-1)
                else:
                    avg = sqrt(square_avg)
                avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).add_(grad / avg)                     # addcdiv_, value 1
                    p.add_(buf, alpha=-lr)
                else:
                    p.add_(grad * -lr / avg)                                # addcdiv_
        return loss
