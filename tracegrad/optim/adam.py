"""``Adam`` (with ``amsgrad``, ``maximize``, L2 ``weight_decay``) and ``AdamW`` (decoupled
weight decay).

The update is PyTorch's single-tensor (``foreach=False``) one, op for op, so
float32 parameters follow PyTorch's to rounding. Per parameter, at step t:

    p *= 1 - lr * weight_decay                  (AdamW)   | g += weight_decay * p   (Adam)
    m += (g - m) * (1 - beta1)                  (lerp)
    v = v * beta2 + (1 - beta2) * g * g
    v_max = max(v_max, v)                       (amsgrad; v_max replaces v below)
    denom = sqrt(v) / sqrt(1 - beta2^t) + eps
    p += (-lr / (1 - beta1^t)) * m / denom

The bias corrections are computed in Python floats from ``state["step"]``, a
float32 scalar tensor as in PyTorch's state dicts.

``foreach`` (None or True) runs the step fused (``_foreach``: the same ufuncs on the
arrays, bit for bit the loop's); False runs the per-parameter loop.
"""
import numpy as np

from ..ops import maximum, sqrt
from . import _foreach
from ..tensor import Tensor
from .optimizer import Optimizer, check_args, scalar


def _check_tensor_options(lr, betas, foreach, capturable):
    """PyTorch's errors for a tensor ``lr`` or ``betas``: not with ``foreach=True`` unless
    ``capturable``, and both betas tensors or neither."""
    if isinstance(lr, Tensor) and foreach and not capturable:
        raise ValueError("lr as a Tensor is not supported for capturable=False and "
                         "foreach=True")
    is_tensor = [isinstance(b, Tensor) for b in betas]
    if is_tensor[0] != is_tensor[1]:
        raise ValueError("betas must be either both floats or both Tensors")
    for i, beta in enumerate(betas):
        if is_tensor[i] and foreach and not capturable:
            raise ValueError(f"betas[{i}] as a Tensor is not supported for capturable=False "
                             f"and foreach=True")
        if is_tensor[i] and beta.numel() != 1:
            raise ValueError(f"Tensor betas[{i}] must be 1-element")


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_tensor_options(lr, betas, foreach, capturable)
        check_args(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _state_for(self, p, amsgrad):
        return self._lazy_state(p, "exp_avg", "exp_avg_sq",
                                *(("max_exp_avg_sq",) if amsgrad else ()))

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        for p, grad in self._grads(group, params):
            state = self._state_for(p, amsgrad)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            state["step"].add_(1)
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = self._decayed(grad, p, weight_decay)
            exp_avg.add_((grad - exp_avg) * (1 - beta1))           # lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).add_(grad * (1 - beta2) * grad)  # addcmul_, same order
            if group["differentiable"]:
                self._differentiable_update(p, state, group)
                continue
            step = scalar(state["step"])
            bias_correction1 = 1 - beta1 ** step
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            step_size = lr / bias_correction1
            if amsgrad:
                max_sq = state["max_exp_avg_sq"]
                max_sq.copy_(maximum(max_sq, exp_avg_sq))
                denom = (sqrt(max_sq) / bias_correction2_sqrt).add_(eps)
            else:
                denom = (sqrt(exp_avg_sq) / bias_correction2_sqrt).add_(eps)
            p.add_(exp_avg * -step_size / denom)                    # addcdiv_

    @staticmethod
    def _differentiable_update(p, state, group):
        """PyTorch's differentiable update: the bias corrections computed on the ``step``
        tensor (in its float32, as PyTorch's are; a number over a tensor as PyTorch computes
        it, the tensor's reciprocal times the number), and copies where the loop would let
        an in-place write reach a value the backward keeps."""
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        step = state["step"]
        step_size_neg = -((1 - beta1 ** step).reciprocal() * lr)
        bias_correction2_sqrt = sqrt(1 - beta2 ** step)
        v = state["exp_avg_sq"]
        if group["amsgrad"]:
            v = state["max_exp_avg_sq"]
            v.copy_(maximum(v.clone(), state["exp_avg_sq"]))
        denom = (sqrt(v) / (bias_correction2_sqrt * step_size_neg)).add_(
            step_size_neg.reciprocal() * eps)
        p.add_(state["exp_avg"].clone() / denom)                    # addcdiv_

    def _fused_group(self, group):
        """The fused step (``_foreach``): the loop's ufuncs, in its order, on the arrays,
        through two temporaries a parameter; returns the parameters left to the loop."""
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        decoupled = weight_decay != 0 and group["decoupled_weight_decay"]
        fused, rest = _foreach.split(group, lambda p: self._state_for(p, amsgrad))
        for p, data, g, state in fused:
            step = _foreach.count_step(state)
            if decoupled:
                _foreach.decay_decoupled(p, data, lr, weight_decay)
            g, _ = _foreach.gradient(data, g, maximize, 0 if decoupled else weight_decay)
            m, v, tmp = _foreach.adam_moments(state, g, beta1, beta2)
            if amsgrad:
                max_sq = state["max_exp_avg_sq"]
                v = np.maximum(max_sq._data, v, out=max_sq._data)
                _foreach.bump(max_sq)
            step_size = lr / (1 - beta1 ** step)
            denom = np.sqrt(v, out=tmp)
            np.divide(denom, (1 - beta2 ** step) ** 0.5, out=denom)
            np.add(denom, eps, out=denom)
            update = np.multiply(m, -step_size)                     # addcdiv_
            np.divide(update, denom, out=update)
            np.add(data, update, out=data)
            _foreach.bump(p)
        return rest


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), default 1e-2."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
