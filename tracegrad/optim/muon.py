"""``Muon``: momentum, then the update orthogonalised by a Newton-Schulz iteration, for 2-D
parameters only (PyTorch 2.13's ``torch.optim.Muon``, same options, errors and state).

Per parameter (PyTorch's single-tensor step, op for op):

    buf = lerp(buf, g, 1 - momentum)
    u = lerp(g, buf, momentum) (nesterov) | buf
    u = NS(u)                                       (in bfloat16, below)
    p *= 1 - lr * weight_decay
    p -= adjust(lr, p.shape) * u

NS(u): X = bf16(u), transposed when tall; X /= max(||X||_F, eps); ``ns_steps`` times
G = X X^T, X = a X + (b G + c G G) X. PyTorch runs it in bfloat16 (each ``addmm`` and
``matmul`` accumulates in float32 and rounds its result once). tracegrad has no bfloat16, so
the iteration runs in float32 with each of PyTorch's bfloat16 results rounded to bfloat16's 8
significant bits (``_round_bf16``); the results then follow PyTorch's to the rounding of a
few bfloat16 values, where float32 accumulation in another order lands on the other side of a
bfloat16 rounding boundary.
"""
import math

import struct

from ..ops import addmm
from .optimizer import Optimizer, scalar

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5

_SPLIT = float(2 ** 16 + 1)     # Veltkamp's constant: float32's 24 bits split into 8 + 16


def _round_bf16(x):
    """x (float32) rounded to the nearest bfloat16 value, kept in float32: Veltkamp's split
    (c = 65537 x; hi = c - (c - x)) leaves the high 8 significant bits, rounded to nearest
    (a tie, lower 16 bits exactly 0x8000, may round away from even), with plain float32 ops
    so it traces and compiles as any other. |x| must stay below 5e33 (65537 x finite)."""
    c = x * _SPLIT
    return c - (c - x)


def _bf16_float(v):
    """The Python float ``v`` rounded to bfloat16 (as PyTorch casts a scalar bound)."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000      # to nearest, ties to even
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps):
    """The Newton-Schulz orthogonalisation of a 2-D ``grad``, as PyTorch's, in emulated
    bfloat16 (float32 tensors holding bfloat16 values)."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    tall = grad.size(0) > grad.size(1)
    x = _round_bf16(grad.float())
    if tall:
        x = x.T
    norm = _round_bf16(x.norm()).clamp(min=_bf16_float(eps))
    x = _round_bf16(x / norm)
    for _ in range(ns_steps):
        gram = _round_bf16(x @ x.T)
        update = _round_bf16(addmm(gram, gram, gram, beta=b, alpha=c))
        x = _round_bf16(addmm(x, update, x, beta=a))
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn, param_shape):
    """The learning rate scaled for the matrix's shape (A x B): Keller Jordan's
    sqrt(max(1, A / B)) ("original", the default) or Moonshot's 0.2 sqrt(max(A, B))
    ("match_rms_adamw")."""
    A, B = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, A / B))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(A, B))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C), eps=EPS,
                 ns_steps=DEFAULT_NS_STEPS, adjust_lr_fn=None):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def _single_group(self, group, params=None):
        """The per-parameter step (Tensor ops) over ``params`` (all of the group's if None)."""
        lr = group["lr"]
        lr = scalar(lr) if hasattr(lr, "numel") else lr
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        for p, grad in self._grads(group, params):
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            state = self.state[p]
            if "momentum_buffer" not in state:
                self._first_step()
                state["momentum_buffer"] = grad.new_zeros(grad.shape)
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - momentum)
            update = grad.lerp(buf, momentum) if group["nesterov"] else buf
            update = _zeropower_via_newtonschulz(update, group["ns_coefficients"],
                                                 group["ns_steps"], group["eps"])
            adjusted_lr = _adjust_lr(lr, group["adjust_lr_fn"], p.shape)
            p.mul_(1 - lr * weight_decay)
            p.add_(update, alpha=-adjusted_lr)


__all__ = ["Muon"]
