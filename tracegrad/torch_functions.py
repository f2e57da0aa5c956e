"""The rest of ``torch.*``'s functions that are other names for what tracegrad has.

- ``torch.<name>_(input, ...)``, PyTorch's function form of an in-place method
  (``torch.relu_``, ``torch.abs_``, ``torch.zero_`` ...): ``input.<name>_(...)``.
- ``torch.<op>_copy``: the view op's result as a new tensor (``view_copy``, ``permute_copy``,
  ``t_copy``...).
- ``torch.conv2d``, ``torch.layer_norm``, ``torch.pixel_shuffle`` ... : ``nn.functional``'s.
- Windows (``hann_window``, ``hamming_window``, ``blackman_window``, ``bartlett_window``,
  ``kaiser_window``), ``logspace``, ``range``, ``scalar_tensor``, the dtype rules
  (``result_type``, ``promote_types``, ``can_cast``), the RNG state
  (``get_rng_state``/``set_rng_state``), the deterministic-algorithm and warn-always flags
  (tracegrad is deterministic: the flags are kept and reported), ``mvlgamma``,
  ``igamma``/``igammac``, ``nuclear_norm``, ``frobenius_norm``, ``gradient``.
"""
import builtins
import math

import numpy as np

from . import dtypes
from .dtypes import can_cast  # noqa: F401 - torch.can_cast, exported below
from .random import get_rng_state, set_rng_state  # noqa: F401 - exported below
from .tensor import Tensor

# in-place methods PyTorch also has as torch.<name>
_INPLACE = ("abs_ acos_ acosh_ addmv_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ "
            "asinh_ atan_ atanh_ ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ "
            "detach_ erf_ erfc_ exp2_ exp_ expm1_ fill_ fix_ floor_ frac_ gcd_ i0_ index_put_ "
            "lcm_ ldexp_ log10_ log1p_ log2_ log_ logit_ nan_to_num_ neg_ negative_ rad2deg_ "
            "reciprocal_ relu_ resize_as_ round_ rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ "
            "tan_ tanh_ trunc_ xlogy_ zero_").split()
# view ops PyTorch also has as torch.<name>_copy
_COPIES = ("view expand permute t transpose unsqueeze squeeze select slice diagonal unbind "
           "split split_with_sizes unfold alias detach").split()
# nn.functional's, which PyTorch also exports at the top level with the same arguments
_FUNCTIONAL = ("conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d dropout "
               "pixel_shuffle pixel_unshuffle "
               "prelu pdist pairwise_distance cosine_similarity hardshrink selu celu rrelu "
               "threshold bilinear max_pool1d max_pool2d max_pool3d avg_pool1d "
               "adaptive_avg_pool1d channel_shuffle native_channel_shuffle "
               "alpha_dropout feature_alpha_dropout rms_norm selu_ celu_ rrelu_ threshold_"
               ).split()


def _method_call(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input.{name}(...)``."
    return fn


def _copy_of(view):
    def fn(input, *args, **kwargs):
        if view == "slice":
            out = slice_view(input, *args, **kwargs)
        elif view == "alias":
            out = input
        else:
            out = getattr(input, view)(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(o.clone() for o in out)
        return out.clone()
    fn.__name__ = fn.__qualname__ = f"{view}_copy"
    fn.__doc__ = f"``input.{view}(...)`` as a new tensor."
    return fn


def slice_view(input, dim=0, start=None, end=None, step=1):
    """``input[..., start:end:step]`` along ``dim`` (``torch.slice_copy``'s view)."""
    key = [slice(None)] * input.ndim
    key[dim] = slice(start, end, step)
    return input[tuple(key)]


def _functional(name):
    def fn(*args, **kwargs):
        from .nn import functional as F
        return getattr(F, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``nn.functional.{name}``."
    return fn


# nn functions whose aten form (torch.<name>) orders or returns differently from F's

def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: the weight first; a negative ``padding_idx`` is none."""
    from .nn import functional as F
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled):
    """``torch.instance_norm``: the affine parameters before the running statistics."""
    from .nn import functional as F
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """``torch.layer_norm``: F's, and a backend flag that changes nothing here."""
    from .nn import functional as F
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """``torch.group_norm``: F's, and a backend flag that changes nothing here."""
    from .nn import functional as F
    return F.group_norm(input, num_groups, weight, bias, eps)


def adaptive_max_pool1d(input, output_size):
    """``torch.adaptive_max_pool1d``: the values and their indices."""
    from .nn import functional as F
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def _dropout_inplace(name):
    def fn(input, p, train):
        from .nn import functional as F
        return getattr(F, name)(input, p, train, inplace=True)
    fn.__name__ = fn.__qualname__ = f"{name}_"
    fn.__doc__ = f"``torch.{name}_(input, p, train)``: ``nn.functional.{name}`` in place."
    return fn


# windows and ranges -------------------------------------------------------------------------

def _window(n, periodic, dtype, device, requires_grad, values):
    from .creation import tensor
    dtype = dtypes.get_default_dtype() if dtype is None else dtypes.as_dtype(dtype)
    if n == 0:
        w = np.zeros(0)
    elif n == 1:
        w = np.ones(1)
    else:
        m = n + 1 if periodic else n
        w = values(m)[:n]
    return tensor(w, dtype=dtype, device=device, requires_grad=requires_grad)


def _cosine_window(coefficients):
    def values(m):
        k = np.arange(m) * (2 * math.pi / (m - 1))
        return sum(c * np.cos(j * k) * (-1) ** j for j, c in enumerate(coefficients))
    return values


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi k / (N - 1)) (N = window_length + 1 when periodic)."""
    return _window(window_length, periodic, dtype, device, requires_grad,
                   _cosine_window((0.5, 0.5)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    """alpha - beta cos(2 pi k / (N - 1))."""
    return _window(window_length, periodic, dtype, device, requires_grad,
                   _cosine_window((alpha, beta)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))."""
    return _window(window_length, periodic, dtype, device, requires_grad,
                   _cosine_window((0.42, 0.5, 0.08)))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The triangular window 1 - |2k / (N - 1) - 1|."""
    return _window(window_length, periodic, dtype, device, requires_grad,
                   lambda m: 1 - np.abs(2 * np.arange(m) / (m - 1) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    """i0(beta sqrt(1 - (2k / (N - 1) - 1)^2)) / i0(beta)."""
    return _window(window_length, periodic, dtype, device, requires_grad,
                   lambda m: np.i0(beta * np.sqrt(np.maximum(
                       0.0, 1 - (2 * np.arange(m) / (m - 1) - 1) ** 2))) / np.i0(beta))


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """base ** linspace(start, end, steps)."""
    from .creation import tensor
    dtype = dtypes.get_default_dtype() if dtype is None else dtypes.as_dtype(dtype)
    exponents = np.linspace(float(start), float(end), int(steps))
    return tensor(np.power(float(base), exponents), dtype=dtype, device=device,
                  requires_grad=requires_grad)


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,  # noqa: A001
          requires_grad=False):
    """``torch.range`` (deprecated there): start to end *inclusive*, by step."""
    from .creation import tensor
    if end is None:
        start, end = 0, start
    n = int(math.floor((end - start) / step)) + 1
    dtype = dtypes.get_default_dtype() if dtype is None else dtypes.as_dtype(dtype)
    return tensor(start + step * np.arange(max(n, 0)), dtype=dtype, device=device,
                  requires_grad=requires_grad)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None,
                  requires_grad=False):
    """A 0-d tensor of ``s`` (the default float dtype unless ``dtype``)."""
    from .creation import tensor
    dtype = dtypes.get_default_dtype() if dtype is None else dtypes.as_dtype(dtype)
    return tensor(s, dtype=dtype, device=device, requires_grad=requires_grad)


# dtype rules, RNG state, flags --------------------------------------------------------------

def result_type(tensor1, tensor2):
    """The dtype an arithmetic op of the two (tensors or numbers) gives."""
    from .ops.rules import promote
    return promote(tensor1, tensor2)


def promote_types(type1, type2):
    """The smallest dtype both cast to safely."""
    return dtypes.promote_types(dtypes.as_dtype(type1), dtypes.as_dtype(type2))


_FLAGS = {"deterministic": False, "warn_only": False, "warn_always": False, "interop": 1}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Record the flag: every tracegrad op is deterministic already."""
    _FLAGS["deterministic"], _FLAGS["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _FLAGS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _FLAGS["warn_only"]


def set_deterministic_debug_mode(debug_mode):
    modes = {"default": 0, "warn": 1, "error": 2}
    level = modes.get(debug_mode, debug_mode)
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode():
    if not _FLAGS["deterministic"]:
        return 0
    return 1 if _FLAGS["warn_only"] else 2


def set_warn_always(b):
    _FLAGS["warn_always"] = bool(b)


def is_warn_always_enabled():
    return _FLAGS["warn_always"]


def get_num_interop_threads():
    return _FLAGS["interop"]


def set_num_interop_threads(n):
    """Recorded: tracegrad runs no inter-op thread pool (ops run one after another)."""
    if int(n) < 1:
        raise RuntimeError("Expected positive number of threads")
    _FLAGS["interop"] = int(n)


def is_inference(input):
    return input.is_inference()


# math --------------------------------------------------------------------------------------

def mvlgamma(input, p):
    """The multivariate log-gamma function (``special.multigammaln``)."""
    from .special import multigammaln
    return multigammaln(input, p)


def igamma(input, other):
    """The regularised lower incomplete gamma function (``special.gammainc``)."""
    from .special import gammainc
    return gammainc(input, other)


def igammac(input, other):
    """The regularised upper incomplete gamma function (``special.gammaincc``)."""
    from .special import gammaincc
    return gammaincc(input, other)


def nuclear_norm(input, dim=None, keepdim=False):
    from .linalg import matrix_norm
    return matrix_norm(input, "nuc", dim=(-2, -1) if dim is None else dim, keepdim=keepdim)


def frobenius_norm(input, dim=(-2, -1), keepdim=False):
    from .linalg import vector_norm
    return vector_norm(input, 2, dim=dim, keepdim=keepdim)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The numerical gradient along each dim (or ``dim``): second-order central differences
    inside, one-sided ones of order ``edge_order`` (1 or 2) at the edges; ``spacing`` a number,
    one number per dim, or one coordinate tensor per dim (NumPy's gradient). A tuple."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(builtins.range(input.ndim)) if dim is None else (
        [dim] if isinstance(dim, int) else list(dim))
    dims = [d % input.ndim for d in dims]
    if spacing is None:
        spacing = 1
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                           f"it's spacing and dim arguments to have the same length, but got "
                           f"a spacing argument of length {len(spacings)} and a dim argument "
                           f"of length {len(dims)}.")
    out = []
    for d, h in zip(dims, spacings):
        n = input.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
        if isinstance(h, Tensor):   # coordinates: steps in tensor ops, which compile traces
            from .ops import narrow
            x = h.to(_gradient_dtype(input))
            dx = narrow(x, 0, 1, n - 1) - narrow(x, 0, 0, n - 1)
        else:
            dx = np.diff(np.arange(n) * float(h))
        out.append(_gradient_along(input, d, dx, edge_order))
    return tuple(out)


def _gradient_dtype(f):
    return f.dtype if f.dtype.is_floating_point else dtypes.get_default_dtype()


def _gradient_along(f, d, dx, edge_order):
    """NumPy's gradient formulas along dim ``d`` for the steps ``dx`` between coordinates
    (a NumPy array, or a 1-D tensor of them)."""
    from .creation import tensor
    from .ops import cat, narrow
    n = f.shape[d]
    dt = _gradient_dtype(f)
    f = f.to(dt)

    def coef(values):       # numbers along d, broadcast over the other dims
        shape = [1] * f.ndim
        shape[d] = n - 2
        if isinstance(values, Tensor):
            return values.reshape(shape)
        return tensor(np.asarray(values).reshape(shape), dtype=dt, device=f.device)

    def at(start, length):
        return narrow(f, d, start, length)
    parts = []
    if edge_order == 1 or n < 3:
        parts.append((at(1, 1) - at(0, 1)) / _scalar(dx[0]))
    else:
        h1, h2 = dx[0], dx[1]
        parts.append(at(0, 1) * (-(2 * h1 + h2) / (h1 * (h1 + h2)))
                     + at(1, 1) * ((h1 + h2) / (h1 * h2)) + at(2, 1) * (-h1 / (h2 * (h1 + h2))))
    if n > 2:
        hl, hr = dx[:-1], dx[1:]
        parts.append(at(0, n - 2) * coef(-hr / (hl * (hl + hr)))
                     + at(1, n - 2) * coef((hr - hl) / (hl * hr))
                     + at(2, n - 2) * coef(hl / (hr * (hl + hr))))
    if edge_order == 1 or n < 3:
        parts.append((at(n - 1, 1) - at(n - 2, 1)) / _scalar(dx[-1]))
    else:
        h1, h2 = dx[-2], dx[-1]
        parts.append(at(n - 3, 1) * (h2 / (h1 * (h1 + h2)))
                     + at(n - 2, 1) * (-(h2 + h1) / (h1 * h2))
                     + at(n - 1, 1) * ((2 * h2 + h1) / (h2 * (h1 + h2))))
    return cat(parts, d)


def _scalar(step):
    """A step as a Python float, or as the 0-dim tensor it is (kept in the graph)."""
    return step if isinstance(step, Tensor) else float(step)


def exports():
    """``{name: function}`` of this module's torch.* names."""
    table = {name: _method_call(name) for name in _INPLACE if hasattr(Tensor, name)}
    table.update({f"{v}_copy": _copy_of(v) for v in _COPIES})
    table.update({name: _functional(name) for name in _FUNCTIONAL})
    table.update({f"{name}_": _dropout_inplace(name)
                  for name in ("dropout", "alpha_dropout", "feature_alpha_dropout")})
    table.update(embedding=embedding, instance_norm=instance_norm, layer_norm=layer_norm,
                 group_norm=group_norm, adaptive_max_pool1d=adaptive_max_pool1d)
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window",
                 "kaiser_window", "logspace", "range", "scalar_tensor", "result_type",
                 "promote_types", "can_cast", "get_rng_state", "set_rng_state",
                 "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
                 "is_deterministic_algorithms_warn_only_enabled",
                 "set_deterministic_debug_mode", "get_deterministic_debug_mode",
                 "set_warn_always", "is_warn_always_enabled", "get_num_interop_threads",
                 "set_num_interop_threads", "is_inference", "mvlgamma", "igamma", "igammac",
                 "nuclear_norm", "frobenius_norm", "gradient"):
        table[name] = globals()[name]
    from .creation import empty_strided
    from .ops.fill_scatter import index_reduce, put, scatter_reduce
    table.update(scatter_reduce=scatter_reduce, index_reduce=index_reduce, put=put,
                 empty_strided=empty_strided)
    from .linalg.ldl import _LEGACY as householder      # torch.orgqr, torch.ormqr, torch.geqrf
    table.update(householder)
    return table
