"""``Adadelta`` (Zeiler 2012) with L2 ``weight_decay`` and ``maximize``.

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so float32
parameters follow PyTorch's to rounding. Per parameter, at each step:

    g += weight_decay * p
    v = v * rho + (1 - rho) * g * g             (square_avg)
    delta = sqrt(u + eps) / sqrt(v + eps) * g   (u: acc_delta)
    u = u * rho + (1 - rho) * delta * delta
    p -= lr * delta

The state (``step``, a float32 scalar tensor, then ``square_avg`` and ``acc_delta``) is
made at a parameter's first step, as in PyTorch. ``capturable`` is accepted and kept in
the groups; the update is the same either way.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from ..ops import sqrt
from . import _foreach
from .optimizer import Optimizer, check_lr


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        weight_decay = group["weight_decay"]
        for p, grad in self._grads(group, params):
            state = self._lazy_state(p, "square_avg", "acc_delta")
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            state["step"].add_(1)
            if weight_decay != 0:
                grad = self._decayed(grad, p, weight_decay)
            square_avg.mul_(rho).add_(grad * (1 - rho) * grad)     # addcmul_, same order
            std = sqrt(square_avg + eps)
            delta = sqrt(acc_delta + eps) / std * grad
            acc_delta.mul_(rho).add_(delta * (1 - rho) * delta)    # addcmul_
            p.add_(delta, alpha=-lr)

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        fused, rest = _foreach.split(group, lambda p: self._lazy_state(p, "square_avg",
                                                                       "acc_delta"))
        for p, data, g, state in fused:
            _foreach.count_step(state)
            g, _ = _foreach.gradient(data, g, maximize, weight_decay)
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            v, u = square_avg._data, acc_delta._data
            np.multiply(v, rho, out=v)                              # addcmul_, same order
            std = np.multiply(g, 1 - rho)
            np.multiply(std, g, out=std)
            np.add(v, std, out=v)
            _foreach.bump(square_avg, 2)
            np.sqrt(np.add(v, eps, out=std), out=std)
            delta = np.add(u, eps)
            np.sqrt(delta, out=delta)
            np.divide(delta, std, out=delta)
            np.multiply(delta, g, out=delta)
            np.multiply(u, rho, out=u)                              # addcmul_
            np.multiply(delta, 1 - rho, out=std)
            np.multiply(std, delta, out=std)
            np.add(u, std, out=u)
            _foreach.bump(acc_delta, 2)
            _foreach.add_scaled(data, delta, -lr, std)
            _foreach.bump(p)
        return rest
