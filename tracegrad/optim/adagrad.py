"""``Adagrad`` (with ``lr_decay``, L2 ``weight_decay``, ``initial_accumulator_value``,
``maximize``).

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter, at step t:

    g += weight_decay * p
    clr = lr / (1 + (t - 1) * lr_decay)
    s += g * g
    p += -clr * g / (sqrt(s) + eps)

As in PyTorch, the state (``step``, a float32 scalar tensor, and ``sum``, filled
with ``initial_accumulator_value``) is made in the constructor for every
parameter, so ``state_dict()`` lists parameters that never got a gradient.
Sparse gradients are not supported (tracegrad has no sparse tensors).

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from .. import creation, dtypes
from ..ops import sqrt
from . import _foreach
from .optimizer import Optimizer, check_lr, scalar


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = creation.tensor(0.0, dtype=dtypes.float32)
                state["sum"] = creation.full_like(p, initial_accumulator_value)

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        weight_decay = group["weight_decay"]
        for p, grad in self._grads(group, params):
            state = self.state[p]
            state_sum = state["sum"]
            state["step"].add_(1)
            step = scalar(state["step"])
            if weight_decay != 0:
                grad = self._decayed(grad, p, weight_decay)
            clr = lr / (1 + (step - 1) * lr_decay)
            state_sum.add_(grad * grad)                 # addcmul_(value=1): 1 * g is exact
            std = sqrt(state_sum)
            std = std + eps if group["differentiable"] else std.add_(eps)  # sqrt keeps std
            p.add_(grad * -clr / std)                   # addcdiv_

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        fused, rest = _foreach.split(group, self.state.__getitem__)
        for p, data, g, state in fused:
            step = _foreach.count_step(state)
            g, own = _foreach.gradient(data, g, maximize, weight_decay)
            clr = lr / (1 + (step - 1) * lr_decay)
            state_sum = state["sum"]
            std = np.multiply(g, g)                     # addcmul_(value=1)
            np.add(state_sum._data, std, out=state_sum._data)
            _foreach.bump(state_sum)
            np.sqrt(state_sum._data, out=std)
            np.add(std, eps, out=std)
            update = np.multiply(g, -clr, out=g if own else None)   # addcdiv_
            np.add(data, np.divide(update, std, out=update), out=data)
            _foreach.bump(p)
        return rest
