"""PyTorch's ``torch.signal.windows``: the same signatures, values and errors as PyTorch 2.13.

Each window is PyTorch's own composition (``linspace`` of the window's sample points, then
``cos``, ``exp``, ``i0``... of them) in tracegrad's tensor functions, so a window built
inside ``tracegrad.compile`` traces like any other factory, and ``requires_grad=True``
gives a result in the graph (as in PyTorch, where the points are a leaf that requires grad).
"""
import math
from collections.abc import Iterable

from .. import creation, dtypes, ops
from ..layouts import strided

__all__ = [
    "bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
    "general_hamming", "hamming", "hann", "kaiser", "nuttall",
]


def _dtype_of(dtype):
    return dtypes.get_default_dtype() if dtype is None else dtypes.as_dtype(dtype)


def _window_function_checks(function_name, M, dtype, layout):
    """PyTorch's checks, common to every window, with its messages."""
    if M < 0:
        raise ValueError(f"{function_name} requires non-negative window length, got M={M}")
    if layout is not strided:
        raise ValueError(f"{function_name} is implemented for strided tensors only, "
                         f"got: {layout}")
    if dtype not in (dtypes.float32, dtypes.float64):
        raise ValueError(f"{function_name} expects float32 or float64 dtypes, got: {dtype}")


def _empty(dtype, device, requires_grad):
    return creation.empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)


def _one(dtype, device, requires_grad):
    return creation.ones((1,), dtype=dtype, device=device, requires_grad=requires_grad)


def _points(start, end, M, dtype, device, requires_grad):
    return creation.linspace(start, end, M, dtype=dtype, device=device,
                             requires_grad=requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=strided,
                device=None, requires_grad=False):
    """The exponential (Poisson) window ``exp(-|n - center| / tau)``."""
    dtype = _dtype_of(dtype)
    _window_function_checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / tau
    k = _points(-center * constant, (-center + (M - 1)) * constant, M, dtype, device,
                requires_grad)
    return (-k.abs()).exp()


def cosine(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The cosine (sine) window ``sin(pi (n + 0.5) / M)``, as SciPy computes it."""
    dtype = _dtype_of(dtype)
    _window_function_checks("cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    start = 0.5
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    k = _points(start * constant, (start + (M - 1)) * constant, M, dtype, device,
                requires_grad)
    return k.sin()


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=strided, device=None,
             requires_grad=False):
    """The Gaussian window ``exp(-(n / (2 std))**2)`` about the window's centre."""
    dtype = _dtype_of(dtype)
    _window_function_checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _points(start * constant, (start + (M - 1)) * constant, M, dtype, device,
                requires_grad)
    return (-(k ** 2)).exp()


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=strided, device=None,
           requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - ((n - N/2) / (N/2))**2)) / I0(beta)``."""
    dtype = _dtype_of(dtype)
    _window_function_checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _one(dtype, device, requires_grad)
    # beta in the window's dtype, as PyTorch casts it (beta**2 - k**2 >= 0 in that dtype)
    beta = creation.tensor(beta, dtype=dtype, device=device)
    start = -beta
    constant = 2.0 * beta / (M if not sym else M - 1)
    end = ops.minimum(beta, start + (M - 1) * constant)
    k = _points(start, end, M, dtype, device, requires_grad)
    return ops.i0(ops.sqrt(beta * beta - k ** 2)) / ops.i0(beta)


def hamming(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Hamming window: ``general_hamming`` with alpha 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Hann window: ``general_hamming`` with alpha 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Blackman window: ``general_cosine`` with a = (0.42, 0.5, 0.08)."""
    dtype = _dtype_of(dtype)
    _window_function_checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """The Bartlett (triangular) window ``1 - |2n / (M - 1) - 1|``."""
    dtype = _dtype_of(dtype)
    _window_function_checks("bartlett", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _one(dtype, device, requires_grad)
    start = -1
    constant = 2 / (M if not sym else M - 1)
    k = _points(start, start + (M - 1) * constant, M, dtype, device, requires_grad)
    return 1 - k.abs()


def general_cosine(M, *, a, sym=True, dtype=None, layout=strided, device=None,
                   requires_grad=False):
    """The general cosine window ``sum_i (-1)**i a_i cos(2 pi i n / (M - 1))``."""
    dtype = _dtype_of(dtype)
    _window_function_checks("general_cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _one(dtype, device, requires_grad)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * math.pi / (M if not sym else M - 1)
    k = _points(0, (M - 1) * constant, M, dtype, device, requires_grad)
    a_i = creation.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype,
                          device=device, requires_grad=requires_grad)
    i = creation.arange(a_i.shape[0], dtype=dtype, device=device,
                        requires_grad=requires_grad)
    return (a_i.unsqueeze(-1) * (i.unsqueeze(-1) * k).cos()).sum(0)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=strided, device=None,
                    requires_grad=False):
    """The general Hamming window ``alpha - (1 - alpha) cos(2 pi n / (M - 1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=strided, device=None, requires_grad=False):
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
