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
``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from ..ops import sqrt
from . import _foreach
from .optimizer import Optimizer, check_lr, option_is


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        check_lr(lr)
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
                                *(("momentum_buffer",) if option_is(group, "momentum", "> 0")
                                  else ()),
                                *(("grad_avg",) if group["centered"] else ()))

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p, group)
            square_avg = state["square_avg"]
            state["step"].add_(1)
            if weight_decay != 0:
                grad = self._decayed(grad, p, weight_decay)
            square_avg.mul_(alpha).add_(grad * (1 - alpha) * grad)     # addcmul_, same order
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.add_((grad - grad_avg) * (1 - alpha))          # lerp_(grad, 1 - alpha)
                avg = sqrt(square_avg - grad_avg * grad_avg)            # addcmul(value=-1)
            else:
                avg = sqrt(square_avg)
            avg = avg + eps if group["differentiable"] else avg.add_(eps)   # sqrt keeps avg
            if option_is(group, "momentum", "> 0"):
                buf = state["momentum_buffer"]
                buf.mul_(momentum).add_(grad / avg)                     # addcdiv_, value 1
                p.add_(self._kept(buf), alpha=-lr)
            else:
                p.add_(grad * -lr / avg)                                # addcdiv_

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        centered, maximize = group["centered"], group["maximize"]
        fused, rest = _foreach.split(group, lambda p: self._state_for(p, group))
        for p, data, g, state in fused:
            _foreach.count_step(state)
            g, own = _foreach.gradient(data, g, maximize, weight_decay)
            square_avg = state["square_avg"]
            sq = square_avg._data
            np.multiply(sq, alpha, out=sq)                          # addcmul_, same order
            avg = np.multiply(g, 1 - alpha)
            np.multiply(avg, g, out=avg)
            np.add(sq, avg, out=sq)
            _foreach.bump(square_avg, 2)
            if centered:
                grad_avg = state["grad_avg"]
                ga = grad_avg._data
                np.subtract(g, ga, out=avg)                         # lerp_(grad, 1 - alpha)
                np.multiply(avg, 1 - alpha, out=avg)
                np.add(ga, avg, out=ga)
                _foreach.bump(grad_avg)
                np.multiply(ga, ga, out=avg)                        # addcmul(value=-1)
                np.subtract(sq, avg, out=avg)
                np.sqrt(avg, out=avg)
            else:
                np.sqrt(sq, out=avg)
            np.add(avg, eps, out=avg)
            if momentum > 0:
                buf = state["momentum_buffer"]
                np.multiply(buf._data, momentum, out=buf._data)     # addcdiv_, value 1
                np.add(buf._data, np.divide(g, avg, out=avg), out=buf._data)
                _foreach.bump(buf, 2)
                _foreach.add_scaled(data, buf._data, -lr, avg)
            else:
                update = np.multiply(g, -lr, out=g if own else None)    # addcdiv_
                np.add(data, np.divide(update, avg, out=update), out=data)
            _foreach.bump(p)
        return rest
