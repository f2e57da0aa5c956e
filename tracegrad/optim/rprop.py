"""``Rprop``: resilient backpropagation, a per-entry step size driven by the gradient's sign.

The update is PyTorch's single-tensor (``foreach=False``) one, op for op. Per parameter
entry, at each step (g the gradient, negated with ``maximize``; ``prev`` the last one):

    s = sign(g * prev)
    step_size *= etaplus where s > 0, etaminus where s < 0 (1 where s == 0),
    then clamped to ``step_sizes`` (min, max)
    g = 0 where s < 0                           (no move after a sign change)
    p -= sign(g) * step_size
    prev = g

The state (``step``, a float32 scalar tensor, then ``prev``, zeros, and ``step_size``, the
group's ``lr`` at the first step) is made at a parameter's first step, as in PyTorch: the
``lr`` is read only then. ``capturable`` and ``differentiable`` are accepted and kept in
the groups; the update is the same either way.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from .. import creation
from ..ops import where
from ..tensor import Tensor
from . import _foreach
from .optimizer import Optimizer, _no_grad_step, check_lr


def as_number(value):
    """A group option as a Python number (a tensor option's value)."""
    return value.item() if isinstance(value, Tensor) else value


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _state_for(self, p, index):
        """p's state, made at its first step with ``step_size`` the lr of group ``index``
        (read from the group itself: a traced group's lr is an input tensor)."""
        state = self._lazy_state(p, "prev")
        if "step_size" not in state:
            lr = as_number(self.param_groups[index]["lr"])
            state["step_size"] = creation.full_like(p, lr)
        return state

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for index, group in enumerate(self._groups()):
            rest = self._fused_group(group, index) if _foreach.enabled(group) else None
            self._single_group(group, index, rest)
        return loss

    def _single_group(self, group, index, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p, index)
            prev, step_size = state["prev"], state["step_size"]
            state["step"].add_(1)
            sign = (grad * prev).sign()
            factor = where(sign > 0, etaplus,
                           where(sign < 0, etaminus, where(sign == 0, 1.0, sign)))
            step_size.mul_(factor).clamp_(step_size_min, step_size_max)
            grad = where(sign < 0, 0.0, grad)
            p.sub_(grad.sign() * step_size)                         # addcmul_(value=-1)
            prev.copy_(grad)

    def _fused_group(self, group, index):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        maximize = group["maximize"]
        fused, rest = _foreach.split(group, lambda p: self._state_for(p, index))
        for p, data, g, state in fused:
            _foreach.count_step(state)
            g, _ = _foreach.gradient(data, g, maximize, 0)
            prev, step_size = state["prev"], state["step_size"]
            sign = np.sign(np.multiply(g, prev._data))
            negative = sign < 0
            factor = sign.copy()
            factor[sign > 0] = etaplus
            factor[negative] = etaminus
            factor[sign == 0] = 1.0
            s = step_size._data
            np.multiply(s, factor, out=s)
            np.clip(s, step_size_min, step_size_max, out=s)
            _foreach.bump(step_size, 2)
            g = np.where(negative, g.dtype.type(0), g)
            np.subtract(data, np.multiply(np.sign(g, out=factor), s, out=factor), out=data)
            _foreach.bump(p)
            np.copyto(prev._data, g)
            _foreach.bump(prev)
        return rest
