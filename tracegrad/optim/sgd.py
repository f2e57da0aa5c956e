"""``SGD`` with momentum, dampening, Nesterov, weight decay and ``maximize``.

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding:

    g = grad (negated if maximize) + weight_decay * p
    buf = g (first step) | buf * momentum + (1 - dampening) * g
    g = g + momentum * buf (nesterov) | buf
    p -= lr * g

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from . import _foreach
from .optimizer import Optimizer, check_lr, option_is


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        has_momentum = option_is(group, "momentum", "!= 0")
        for p, grad in self._grads(group, params):
            if weight_decay != 0:
                grad = self._decayed(grad, p, weight_decay)
            if has_momentum:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    self._first_step()
                    buf = state["momentum_buffer"] = grad.detach().clone()
                else:
                    buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                grad = grad.add(self._kept(buf), alpha=momentum) if nesterov else buf
            p.add_(self._kept(grad), alpha=-lr)

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs on the arrays; returns the
        parameters it left to the loop."""
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], \
            group["maximize"]
        # without momentum there is no state: none is made (the loop makes none either)
        fused, rest = _foreach.split(group, self.state.__getitem__ if momentum != 0
                                     else lambda p: {})
        for p, data, g, state in fused:
            g, own = _foreach.gradient(data, g, maximize, weight_decay)
            if momentum != 0:
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = _foreach.new_tensor(g.copy())
                else:
                    b = buf._data
                    np.multiply(b, momentum, out=b)
                    _foreach.add_scaled(b, g, 1 - dampening)
                    _foreach.bump(buf, 2)
                if nesterov:
                    step = np.multiply(buf._data, momentum)
                    g, own = np.add(g, step, out=step), True
                else:
                    g, own = buf._data, False
            _foreach.add_scaled(data, g, -lr, g if own else None)
            _foreach.bump(p)
        return rest
