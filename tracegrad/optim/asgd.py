"""``ASGD``: averaged stochastic gradient descent (Polyak and Juditsky 1992), with L2
``weight_decay`` and ``maximize``.

The update is PyTorch's single-tensor (``foreach=False``) one, op for op. Per parameter,
at step t (``eta`` and ``mu`` as they were after the previous step):

    g += weight_decay * p
    p *= 1 - lambd * eta                        (decay)
    p -= eta * g
    ax = p if mu == 1 else ax + (p - ax) * mu   (the running average of the parameters)
    eta = lr / (1 + lambd * lr * t) ** alpha
    mu = 1 / max(1, t - t0)

The state is PyTorch's: ``step``, ``eta`` (the group's ``lr`` at first) and ``mu`` (1),
float32 scalar tensors (written as float32 values even once a state dict loaded into
float64 parameters made them float64), then ``ax``, zeros like the parameter; ``eta`` and
``mu`` are read as Python floats in eager and as tensors inside ``tracegrad.compile``,
where the ``mu == 1`` test becomes a ``where``. ``capturable`` and ``differentiable`` are
accepted and kept in the groups; the update is the same either way.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from .. import _hooks
from ..ops import where
from ..tensor import Tensor
from . import _foreach
from .optimizer import Optimizer, _no_grad_step, check_lr, scalar
from .rprop import as_number


def _store(t, value):
    """Write ``value`` (a Python number, or a tensor inside a trace) into the 0-d ``t``,
    rounded to float32 first, as PyTorch writes ``torch.as_tensor(value)`` (a tensor of the
    default dtype): a state loaded into float64 parameters holds float32 values too."""
    if isinstance(value, Tensor):
        t.copy_(value.float())
    else:
        t.fill_(float(np.float32(value)))


def _at_least_one(x):
    """``max(1, x)``, for a number or (inside a trace) a 0-d tensor."""
    return x.clamp(min=1) if isinstance(x, Tensor) else max(1, x)


class ASGD(Optimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _state_for(self, p, index):
        """p's state, made at its first step with ``eta`` the lr of group ``index`` (read
        from the group itself: a traced group's lr is an input tensor)."""
        if self.state.get(p):
            return self._lazy_state(p)
        lr = as_number(self.param_groups[index]["lr"])
        return self._lazy_state(p, "ax", eta=lr, mu=1.0)

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for index, group in enumerate(self._groups()):
            rest = self._fused_group(group, index) if _foreach.enabled(group) else None
            self._single_group(group, index, rest)
        return loss

    def _single_group(self, group, index, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, lambd, alpha = group["lr"], group["lambd"], group["alpha"]
        t0, weight_decay = group["t0"], group["weight_decay"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p, index)
            eta, mu, ax = state["eta"], state["mu"], state["ax"]
            state["step"].add_(1)
            if weight_decay != 0:
                grad = self._decayed(grad, p, weight_decay)
            eta_value = scalar(eta)
            p.mul_(1 - lambd * eta_value)
            p.add_(grad * -eta_value)                               # add_(alpha=-eta)
            self._average(p, ax, mu)
            step = scalar(state["step"])
            _store(eta, lr / ((1 + lambd * lr * step) ** alpha))
            _store(mu, 1 / _at_least_one(step - t0))

    @staticmethod
    def _average(p, ax, mu):
        """``ax``: a copy of ``p`` while ``mu`` is 1, then the running average."""
        if _hooks.tracer is None:
            if mu.item() != 1:
                ax.add_(p.sub(ax).mul_(mu))
            else:
                ax.copy_(p)
        else:
            ax.copy_(where(mu != 1, ax + (p - ax) * mu, p))

    def _fused_group(self, group, index):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays;
        returns the parameters left to the loop."""
        lr, lambd, alpha = as_number(group["lr"]), group["lambd"], group["alpha"]
        t0, weight_decay, maximize = group["t0"], group["weight_decay"], group["maximize"]
        fused, rest = _foreach.split(group, lambda p: self._state_for(p, index))
        for p, data, g, state in fused:
            step = _foreach.count_step(state)
            g, own = _foreach.gradient(data, g, maximize, weight_decay)
            eta, mu, ax = state["eta"], state["mu"], state["ax"]
            eta_value = eta._data.item()
            np.multiply(data, 1 - lambd * eta_value, out=data)
            _foreach.add_scaled(data, g, -eta_value, g if own else None)
            _foreach.bump(p, 2)
            mu_value = mu._data.item()
            if mu_value != 1:
                a = ax._data
                np.add(a, np.multiply(np.subtract(data, a), mu._data), out=a)
            else:
                np.copyto(ax._data, data)
            _foreach.bump(ax)
            eta._data[...] = np.float32(lr / ((1 + lambd * lr * step) ** alpha))
            mu._data[...] = np.float32(1 / max(1, step - t0))
            _foreach.bump(eta)
            _foreach.bump(mu)
        return rest
