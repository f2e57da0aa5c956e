"""``nn.init``: PyTorch's parameter initialisers, drawing from tracegrad's generators.

Each fills its tensor in place under ``no_grad`` (so it works on parameters
that require grad) and returns it. Random ones draw from ``generator`` or,
by default, the generator ``tracegrad.manual_seed`` seeds. The fan and gain
rules are PyTorch's, so the distributions match; the numbers themselves come
from NumPy's PCG64 and differ from PyTorch's.
"""
import math
import warnings

from .. import creation
from ..autograd.grad_mode import no_grad


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill_from(tensor, values):
    with no_grad():
        return tensor.copy_(values)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    u = creation.rand(tensor.shape, generator=generator, dtype=tensor.dtype, device=tensor.device)
    return _fill_from(tensor, u * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    n = creation.randn(tensor.shape, generator=generator, dtype=tensor.dtype, device=tensor.device)
    return _fill_from(tensor, n * std + mean)


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al.); ``nn.Linear`` uses
    ``a=sqrt(5)``, which gives bound = 1 / sqrt(fan_in)."""
    if 0 in tensor.shape:
        return tensor      # PyTorch warns and leaves an empty tensor alone
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def _default_affine_(weight, bias):
    """PyTorch's default initialisation of ``nn.Linear`` and the convolutions: the weight
    ``kaiming_uniform_(a=sqrt(5))``, the bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (zeros
    where fan_in is 0)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (``a``, ``b`` absolute bounds, as in
    PyTorch).

    PyTorch maps uniforms through the inverse error function, which tracegrad lacks; here
    each place is redrawn from N(mean, std^2) until it lands in [a, b] (rejection gives the
    same distribution). After 100 rounds the few left over (possible only when [a, b] lies
    far in a tail) are clamped, as PyTorch clamps its result."""
    from ..ops import where
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    z = creation.randn(tensor.shape, generator=generator, dtype=tensor.dtype,
                       device=tensor.device) * std + mean
    for _ in range(100):
        bad = (z < a) | (z > b)
        if not bool(bad.any()):
            break
        fresh = creation.randn(tensor.shape, generator=generator, dtype=tensor.dtype,
                               device=tensor.device) * std + mean
        z = where(bad, fresh, z)
    return _fill_from(tensor, z.clamp(a, b))


def eye_(tensor):
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill_from(tensor, creation.eye(*tensor.shape, dtype=tensor.dtype,
                                           device=tensor.device))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D convolution weight with the Dirac delta: each of the first
    ``min(out / groups, in)`` channels of every group passes its input channel through the
    kernel's centre, so the convolution is the identity on them."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = tensor.shape[0] // groups
    centre = tuple(n // 2 for n in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, tensor.shape[1])):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix (Saxe et al.): the Q of a normal matrix's QR,
    its columns' signs fixed by R's diagonal so Q is uniform (Haar), times ``gain``; dims
    past the first are flattened."""
    from .. import linalg
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = creation.randn((rows, cols), generator=generator, dtype=tensor.dtype,
                          device=tensor.device)
    if rows < cols:
        flat = flat.t()
    q, r = linalg.qr(flat)
    q = q * r.diagonal().sign()
    if rows < cols:
        q = q.t()
    return _fill_from(tensor, (q * gain).reshape(tensor.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D tensor with N(0, std^2) and zero ``ceil(sparsity * rows)`` random rows of
    every column (Martens, 2010)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    normal_(tensor, 0.0, std, generator)
    with no_grad():
        for col in range(cols):
            zero_rows = creation.randperm(rows, generator=generator, device=tensor.device)
            tensor[zero_rows[:num_zeros], col] = 0
    return tensor


def _make_deprecate(method):
    """PyTorch's old name (no trailing underscore) of ``method``: warns, then calls it."""
    new_name = method.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return method(*args, **kwargs)
    deprecated_init.__doc__ = f"{old_name}(...): deprecated, use ``nn.init.{new_name}``."
    deprecated_init.__name__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
