"""Gradient clipping: ``clip_grad_norm_``, ``clip_grad_value_`` and their two halves.

The contract is PyTorch 2.x's (``torch/nn/utils/clip_grad.py``):

- ``parameters`` is one tensor or any iterable of them (a generator is read
  once); a parameter whose ``.grad`` is None is skipped.
- ``get_total_norm(tensors, p)`` is the p-norm of the per-tensor p-norms, so
  it equals the norm of all the tensors concatenated into one vector. It is a
  0-d tensor of the tensors' (promoted) dtype on the first tensor's device,
  ``tensor(0.)`` for no tensors, and raises when ``error_if_nonfinite`` and
  the norm is nan or inf.
- ``clip_grads_with_norm_`` multiplies every grad in place by
  ``min(max_norm / (total_norm + 1e-6), 1)``; it multiplies even when the
  coefficient is 1, as PyTorch does, so the grads round the same way.
- ``clip_grad_value_`` clamps every grad in place to ``[-clip_value, clip_value]``.

Everything runs under ``no_grad`` and writes into the existing grad tensors,
so ``p.grad`` keeps its identity and no autograd history is recorded.
``foreach`` is accepted for signature compatibility; there is one loop
implementation, so it changes nothing (PyTorch's result does not depend on it).
"""
import math
import types
import warnings

from ...autograd.grad_mode import no_grad
from ...creation import tensor
from ...ops import abs, amax, amin, clamp, logical_or, pow, sqrt, stack, sum
from ...tensor import Tensor

_NONFINITE = ("The total norm of order {} for gradients from `parameters` is non-finite, so it "
              "cannot be clipped. To disable this error and scale the gradients by the "
              "non-finite norm anyway, set `error_if_nonfinite=False`")


def _as_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _vector_norm(x, ord):
    """``torch.linalg.vector_norm(x, ord)`` over all elements, for a float ``ord``."""
    # tracegrad.norm covers only fro/1/inf/p > 0; vector_norm also defines 0 and -inf
    if ord == 2.0:
        return sqrt(sum(x * x))
    if ord == 1.0:
        return sum(abs(x))
    if ord == math.inf:
        return amax(abs(x), ())
    if ord == -math.inf:
        return amin(abs(x), ())
    if ord == 0.0:
        return sum(x != 0).to(x.dtype)   # the number of non-zero elements
    return pow(sum(pow(abs(x), ord)), 1.0 / ord)


@no_grad()
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of ``tensors`` viewed as one vector (a 0-d tensor)."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    device = tensors[0].device
    norms = [_vector_norm(t, norm_type).to(device) for t in tensors]
    total_norm = _vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and bool(logical_or(total_norm.isnan(), total_norm.isinf())):
        raise RuntimeError(_NONFINITE.format(norm_type))
    return total_norm


@no_grad()
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the grads of ``parameters`` in place by ``min(max_norm / (total_norm + 1e-6), 1)``."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return
    # always multiply: a branch on the coefficient would sync a GPU, and PyTorch doesn't branch
    coef = clamp(max_norm / (total_norm + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device))


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Clip the grads of ``parameters`` to total norm ``max_norm``; returns the norm before."""
    is_generator = isinstance(parameters, types.GeneratorType)
    parameters = _as_list(parameters)
    if is_generator and not parameters:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                      stacklevel=3)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated spelling of ``clip_grad_norm_`` (warns with a ``FutureWarning``)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp the grads of ``parameters`` in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.clamp_(min=-clip_value, max=clip_value)
