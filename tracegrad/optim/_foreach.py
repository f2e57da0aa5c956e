"""The fused (``foreach``) eager step: an optimizer's update written with NumPy ufuncs on
the parameters' arrays, without a Tensor per operation.

The per-parameter step of an optimizer costs a dozen tracegrad ops a parameter, each one
dispatched, dtype-checked and version-checked; the fused step runs the same ufuncs, in the
same order on the same operands (so the results are bit for bit the loop's), straight on
``p._data``, ``p.grad._data`` and the state tensors' arrays, with ``out=`` into a few
temporaries, and bumps each written tensor's version counter as the loop's in-place ops
would (as many times), so ``_version`` reads the same after either step.

The fused step is eager only: inside ``tracegrad.compile``, or while a bind hook (a
profiler) watches the ops, the optimizer runs its per-parameter loop, which those record.
It takes the parameters it can run exactly: NumPy (CPU) arrays of a floating dtype whose
gradient and state tensors hold arrays of that same dtype; any other parameter (on a GPU,
0-d, whose gradient or state has another dtype, an inference tensor, whose writes raise
the loop's errors) is handed back to the loop.
"""
import numpy as np

from .. import _hooks
from ..tensor import Tensor

_FLOAT_KINDS = frozenset("f")       # NumPy kinds the fused path computes (float16/32/64)


def enabled(group):
    """Whether ``group``'s step may run fused: eager (no trace, no bind hook), ``foreach``
    not False (None, PyTorch's default, means fused here) or ``fused`` True (which wins
    over ``foreach=False`` in PyTorch too), not ``differentiable`` (whose step must record
    autograd history), and no option a tensor. The tracer is checked first, so that a
    traced group's options are never read (reading one bakes it in)."""
    if _hooks.tracer is not None or (_hooks.INSTALLED.n and _hooks.state.bind_hook is not None):
        return False
    if not isinstance(group, dict):     # a traced group (Optimizer._groups) that a trace
        return False                    # abandoned halfway hands back to eager
    return ((group.get("foreach") is not False or group.get("fused"))
            and not group.get("differentiable")
            and not any(map(_holds_tensor, group.values())))


def _holds_tensor(option):
    """Whether a group's option is (or holds, as ``betas`` may) a Tensor: a tensor learning
    rate is the loop's (its ops broadcast it); the fused ufuncs take Python numbers."""
    return isinstance(option, Tensor) or (
        type(option) is tuple and any(isinstance(x, Tensor) for x in option))


def split(group, make_state):
    """``(fused, rest)`` over the parameters of ``group`` with a gradient, in order:
    ``fused``, a list of ``(p, p's array, the gradient's array, p's state)`` for those the
    fused path runs exactly; ``rest``, the parameters left to the loop (among them 0-d
    ones: a ufunc over 0-d arrays returns a NumPy scalar, which ``out=`` can't take).
    ``make_state(p)`` gives p's state (making it at the first step, in the loop's order);
    its tensors must hold p's dtype (``_same_dtype``). It is called for the parameters left
    to the loop too, so that the state is made in the parameters' order, as PyTorch's state
    dicts list it.

    The parameters are not bucketed by (dtype, device): the ufuncs run one parameter at a
    time, each in its own dtype, and NumPy casts Python-float operands faster than it takes
    scalars cast ahead; only CPU arrays are fused, the rest go to the loop."""
    fused, rest = [], []
    for p in group["params"]:
        grad = p._grad
        if grad is None:
            continue
        data, g = p._data, grad._data
        state = make_state(p)
        if (type(data) is not np.ndarray or type(g) is not np.ndarray or not data.ndim
                or data.dtype.kind not in _FLOAT_KINDS or g.dtype != data.dtype
                or p.is_inference()):
            rest.append(p)
            continue
        if _same_dtype(state, data.dtype):
            fused.append((p, data, g, state))
        else:
            rest.append(p)
    return fused, rest


def _same_dtype(state, dtype):
    """Whether every tensor of ``state`` holds a NumPy array, of ``dtype`` unless 0-d (the
    counters ``step`` and NAdam's ``mu_product``, read as Python floats): the fused
    ufuncs' ``out=`` temporaries then round as the loop's ops do."""
    for t in state.values():
        if isinstance(t, Tensor):
            data = t._data
            if type(data) is not np.ndarray or (data.ndim and data.dtype != dtype):
                return False
    return True


def bump(t, n=1):
    """Count ``n`` in-place writes to ``t``, as ``ops.core.inplace`` counts each: its
    storage's version moves (its views see it), and a view records the version it wrote."""
    vc = t._vc
    vc.value += n
    if t._base is not None:
        t._view_version = vc.value


def count_step(state):
    """``state["step"] += 1`` (a 0-d float32 tensor, one version bump); the new count as a
    Python float, as ``scalar`` reads it in eager."""
    step = state["step"]
    data = step._data
    np.add(data, 1, out=data)
    bump(step)
    return data.item()


def gradient(data, g, maximize, weight_decay):
    """The gradient the update uses, as the loop's ``grad`` (negated with ``maximize``, plus
    ``weight_decay * p``), and whether it is a fresh array the caller may overwrite (not
    ``p.grad``'s own)."""
    own = False
    if maximize:
        g, own = np.negative(g), True
    if weight_decay != 0:
        decay = np.multiply(data, weight_decay)
        g, own = np.add(g, decay, out=decay), True     # grad + wd * p (addition commutes)
    return g, own


def decay_decoupled(p, data, lr, weight_decay):
    """AdamW's ``p.mul_(1 - lr * weight_decay)``, on the array."""
    np.multiply(data, 1 - lr * weight_decay, out=data)
    bump(p)


def adam_moments(state, g, beta1, beta2):
    """Adam's moment updates as the loop writes them: ``exp_avg.lerp_(grad, 1 - beta1)``
    and ``exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)``, in that order of
    ufuncs; returns the two arrays and the scratch array (of g's shape) the caller may
    reuse."""
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    m, v = exp_avg._data, exp_avg_sq._data
    tmp = np.subtract(g, m)
    np.multiply(tmp, 1 - beta1, out=tmp)
    np.add(m, tmp, out=m)
    np.multiply(v, beta2, out=v)
    np.multiply(g, 1 - beta2, out=tmp)
    np.multiply(tmp, g, out=tmp)
    np.add(v, tmp, out=v)
    bump(exp_avg)
    bump(exp_avg_sq, 2)
    return m, v, tmp


def add_scaled(data, x, alpha, scratch=None):
    """``data += x * alpha`` as ``add_(x, alpha=alpha)`` (the product rounded first, and
    skipped where ``alpha`` is 1, as ``add_`` skips it); ``scratch``, if given, an array
    of ``x``'s shape and dtype that may take the product."""
    if alpha != 1:
        x = np.multiply(x, alpha, out=scratch)
    np.add(data, x, out=data)


def new_tensor(data):
    """A state tensor holding ``data`` (an array that nothing else holds)."""
    return Tensor._make(data)
