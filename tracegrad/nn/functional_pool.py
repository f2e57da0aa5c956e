"""``nn.functional``'s pooling, interpolation, pixel shuffle and the per-sample norms.

The pools and ``interpolate`` build, per spatial dim, the tap-map descriptor of
``tracegrad.ops.pool`` and bind that module's primitives; 1-d pools go through the 2-d
primitive on an unsqueezed input, as PyTorch's do (so their ``grad_fn`` is a squeeze).
``pixel_shuffle``, ``group_norm``, ``instance_norm`` and ``local_response_norm`` are
compositions. Signatures, defaults and the errors for a wrong input rank are PyTorch's.
"""
import math
import numbers
import warnings

from ..autograd.grad_mode import no_grad
from ..ops import pool as P
from ..ops.core import op_error


def _ntuple(v, n, name="kernel_size"):
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    v = tuple(v)
    if len(v) == 1 and n > 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(f"{name} must either be a single int, or a tuple of {n} ints")
    return v


def _window_args(name, n, kernel_size, stride, padding, dilation):
    k = _ntuple(kernel_size, n)
    s = k if stride is None or (not isinstance(stride, numbers.Integral) and not len(stride)) \
        else _ntuple(stride, n, "stride")
    p, d = _ntuple(padding, n, "padding"), _ntuple(dilation, n, "dilation")
    if any(x <= 0 for x in k):
        raise op_error(name, "kernel size should be greater than zero")
    if any(x == 0 for x in s):
        raise op_error(name, "stride should not be zero")
    if any(x <= 0 for x in d):
        raise op_error(name, "dilation should be greater than zero")
    for ki, pi, di in zip(k, p, d):
        if pi > ((ki - 1) * di + 1) // 2:
            raise op_error(name, f"pad should be at most half of effective kernel size, but got "
                                 f"pad={pi}, kernel_size={ki} and dilation={di}")
    return k, s, p, d


def _check_out(name, input, n, outs):
    if any(o <= 0 for o in outs):
        c = input.shape[-n - 1] if input.ndim > n else 1
        raise op_error(name, f"Given input size: ({'x'.join(map(str, (c,) + input.shape[-n:]))})"
                             f". Calculated output size: ({'x'.join(map(str, (c,) + outs))}). "
                             f"Output size is too small")


def _check_rank(name, input, n):
    """PyTorch's error for a pool's input that is neither batched nor unbatched."""
    if input.ndim in (n + 1, n + 2) and all(input.shape[1:]):
        return
    if n == 1:
        raise op_error(name, f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                             f"tensor for argument #1 'self' (while checking arguments for "
                             f"{name})")
    raise op_error(name, f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for input")


# max pooling --------------------------------------------------------------------------

def _max_pool(name, n, input, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices):
    if n == 1 and input.ndim not in (2, 3):
        raise op_error(name, f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 "
                             f"dim batch size for input, but got:{list(input.shape)}")
    _check_rank(name, input, n)
    k, s, p, d = _window_args(name, n, kernel_size, stride, padding, dilation)
    if any(pi > ki // 2 for pi, ki in zip(p, k)):     # max pool's own check ignores dilation
        raise op_error(name, _MAX_PAD_ERRORS[n].format(k=k, p=p))
    sizes = input.shape[-n:]
    outs = tuple(P.pool_out_size(*a, ceil_mode) for a in zip(sizes, k, s, p, d))
    _check_out(name, input, n, outs)
    maps = tuple(("window",) + a for a in zip(sizes, outs, k, s, p, d))
    if n == 1:      # through the 2-d primitive, as PyTorch's max_pool1d
        maps = (("window", 1, 1, 1, 1, 0, 1),) + maps
        out = P.max_pool(input.unsqueeze(-2), P.max_pool2d_p, maps, return_indices)
        return tuple(o.squeeze(-2) for o in out) if return_indices else out.squeeze(-2)
    prim = P.max_pool2d_p if n == 2 else P.max_pool3d_p
    return P.max_pool(input, prim, maps, return_indices)


_MAX_PAD_ERRORS = {
    1: "max_pool1d() padding should be at most half of kernel size, but got padding={p[0]} and "
       "kernel_size={k[0]}",
    2: "pad should be smaller than or equal to half of kernel size, but got padW = {p[1]}, "
       "padH = {p[0]}, kW = {k[1]}, kH = {k[0]}",
    3: "pad should be smaller than or equal to half of kernel size, but got kT: {k[0]} kW: {k[2]} "
       "kH: {k[1]} padT: {p[0]} padW: {p[2]} padH: {p[1]}",
}


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool1d`` returning ``(values, indices)``, as PyTorch's (``return_indices`` is
    accepted and ignored there too)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool2d`` returning ``(values, indices)``."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool3d`` returning ``(values, indices)``."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# average pooling ------------------------------------------------------------------------

def _avg_pool(name, n, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    if n == 2 and input.ndim < 3:
        raise op_error(name, f"Dimension out of range (expected to be in range of "
                             f"[{-input.ndim}, {input.ndim - 1}], but got -3)", IndexError)
    _check_rank(name, input, n)
    k, s, p, _ = _window_args(name, n, kernel_size, stride, padding, 1)
    if divisor_override is not None and divisor_override == 0:
        raise op_error(name, "divisor must be not zero")
    sizes = input.shape[-n:]
    outs = tuple(P.pool_out_size(L, ki, si, pi, 1, ceil_mode)
                 for L, ki, si, pi in zip(sizes, k, s, p))
    _check_out(name, input, n, outs)
    maps = tuple(("avg", L, o, ki, si, pi, bool(count_include_pad))
                 for L, o, ki, si, pi in zip(sizes, outs, k, s, p))
    if n == 1:      # through the 2-d primitive, as PyTorch's avg_pool1d
        maps = (("avg", 1, 1, 1, 1, 0, True),) + maps
        return P.linear_map(input.unsqueeze(-2), P.avg_pool2d_p, maps).squeeze(-2)
    prim = P.avg_pool2d_p if n == 2 else P.avg_pool3d_p
    return P.linear_map(input, prim, maps, divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


# adaptive pooling ----------------------------------------------------------------------

def _adaptive_sizes(input, n, output_size):
    outs = _ntuple(output_size, n, "output_size") if not isinstance(output_size, numbers.Integral) \
        else (int(output_size),) * n
    return tuple(L if o is None else int(o) for L, o in zip(input.shape[-n:], outs))


def _adaptive_check(name, input, n):
    if n == 1:
        return _check_rank(name, input, 1)
    if input.ndim not in (n + 1, n + 2):
        colon = ":" if "max" in name else ""
        raise op_error(name, f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got{colon} "
                             f"{list(input.shape)}")


def _adaptive_avg(name, n, input, output_size):
    _adaptive_check(name, input, n)
    if not input.dtype.is_floating_point:
        raise op_error(name, f'"{name if n > 1 else "adaptive_avg_pool2d"}" not implemented for '
                             f"'{input.dtype.name.capitalize().replace('Int64', 'Long')}'",
                       NotImplementedError)
    if n == 1:
        out = _adaptive_avg("adaptive_avg_pool2d", 2, input.unsqueeze(-2), (1,) + tuple(
            _adaptive_sizes(input, 1, output_size)))
        return out.squeeze(-2)
    outs = _adaptive_sizes(input, n, output_size)
    if all(o == 1 for o in outs):       # a global average: PyTorch takes the mean too
        return input.mean(tuple(range(-n, 0)), keepdim=True)
    maps = tuple(("adaptive", L, o) for L, o in zip(input.shape[-n:], outs))
    prim = P.adaptive_avg_pool2d_p if n == 2 else P.adaptive_avg_pool3d_p
    return P.linear_map(input, prim, maps)


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg("adaptive_avg_pool3d", 3, input, output_size)


def _adaptive_max(name, n, input, output_size, return_indices):
    _adaptive_check(name, input, n)
    if n == 1:
        out = _adaptive_max("adaptive_max_pool2d", 2, input.unsqueeze(-2), (1,) + tuple(
            _adaptive_sizes(input, 1, output_size)), return_indices)
        return tuple(o.squeeze(-2) for o in out) if return_indices else out.squeeze(-2)
    outs = _adaptive_sizes(input, n, output_size)
    maps = tuple(("adaptive", L, o) for L, o in zip(input.shape[-n:], outs))
    prim = P.adaptive_max_pool2d_p if n == 2 else P.adaptive_max_pool3d_p
    return P.max_pool(input, prim, maps, return_indices)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)


# interpolation ---------------------------------------------------------------------------

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's ``interpolate`` for the modes nearest, nearest-exact, (bi/tri)linear and area.

    With ``scale_factor`` the output size is ``floor(size * scale_factor)`` and, unless
    ``recompute_scale_factor`` is True, the source index uses ``1 / scale_factor`` (not
    ``in / out``), as PyTorch's does."""
    n = input.ndim - 2
    if mode in _LINEAR or mode == "bicubic":
        if align_corners is None:
            align_corners = False
    elif align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if n not in (1, 2, 3) or mode not in _MODES.split(" | "):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  f"{input.ndim}D) for the modes: {_MODES} (got {mode})")
    if mode in _LINEAR and _LINEAR[mode] != n:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{_LINEAR[mode] + 2}D input")
    if mode in ("bicubic", "lanczos") or antialias:
        raise NotImplementedError(f"interpolate: mode={mode!r} (antialias={antialias}) is not "
                                  f"supported by tracegrad; use bilinear, linear or nearest")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    sizes = input.shape[2:]
    if size is not None:
        outs = _ntuple(size, n, "size") if not isinstance(size, numbers.Integral) else (size,) * n
        if len(outs) != n:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, "
                             f"but got input with spatial dimensions of {list(sizes)} and output "
                             f"size of {list(outs)}. Please provide input tensor in (N, C, d1, "
                             f"d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
        scales = (None,) * n
    else:
        scales = (float(scale_factor),) * n if isinstance(scale_factor, numbers.Number) \
            else tuple(float(f) for f in scale_factor)
        if len(scales) != n:
            raise ValueError(f"Input and scale_factor must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(sizes)} and scale_factor of shape {list(scales)}.")
        outs = tuple(math.floor(L * f) for L, f in zip(sizes, scales))
        if recompute_scale_factor:
            scales = (None,) * n
    outs = tuple(int(o) for o in outs)
    if mode == "area":
        return _adaptive_avg(f"adaptive_avg_pool{n}d", n, input, outs)
    if mode in _LINEAR:
        maps = tuple(("linear", L, o, bool(align_corners), f)
                     for L, o, f in zip(sizes, outs, scales))
        return P.linear_map(input, P.UPSAMPLE["linear", n], maps)
    maps = tuple((mode, L, o, f) for L, o, f in zip(sizes, outs, scales))
    return P.linear_map(input, P.UPSAMPLE[mode, n], maps)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated: ``interpolate``."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='nearest')``."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# pixel shuffle ------------------------------------------------------------------------------

def pixel_shuffle(input, upscale_factor):
    """``(*, C*r*r, H, W)`` to ``(*, C, H*r, W*r)``: a reshape, a permute and a reshape."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise op_error("pixel_shuffle", f"pixel_shuffle expects input to have at least 3 "
                                        f"dimensions, but got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise op_error("pixel_shuffle", f"pixel_shuffle expects its input's 'channel' dimension "
                                        f"to be divisible by the square of upscale_factor, but "
                                        f"input.size(-3)={c} is not divisible by {r * r}")
    k = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """``(*, C, H*r, W*r)`` to ``(*, C*r*r, H, W)``, the inverse of ``pixel_shuffle``."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise op_error("pixel_unshuffle", f"pixel_unshuffle expects input to have at least 3 "
                                          f"dimensions, but got input with {input.ndim} "
                                          f"dimension(s)")
    *lead, c, h, w = input.shape
    for what, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise op_error("pixel_unshuffle", f"pixel_unshuffle expects {what} to be divisible "
                                              f"by downscale_factor, but input.size({d})={size} "
                                              f"is not divisible by {r}")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


# per-sample normalisation -------------------------------------------------------------------

def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each sample over groups of ``C / num_groups`` channels (biased variance),
    then scale and shift per channel."""
    if input.ndim < 2:
        raise op_error("group_norm", f"Expected at least 2 dimensions for input tensor but "
                                     f"received {input.ndim}")
    n, c = input.shape[:2]
    if c % num_groups:
        raise op_error("group_norm", f"Expected number of channels in input to be divisible by "
                                     f"num_groups, but got input of shape {list(input.shape)} and "
                                     f"num_groups={num_groups}")
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(-1, keepdim=True)
    centered = x - mean
    out = (centered * (centered * centered).mean(-1, keepdim=True).add(eps).rsqrt())
    out = out.reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Batch norm of each (sample, channel) plane: the input seen as ``(1, N*C, ...)``.
    Running stats (if given) are updated with the average over the batch of the per-sample
    statistics, as PyTorch's are."""
    from .functional import batch_norm
    if use_input_stats:
        spatial = math.prod(input.shape[2:])
        if spatial <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {_torch_size(input.shape)}")
    n, c = input.shape[:2]

    def repeat(t):
        return None if t is None else t.reshape(1, c).expand(n, c).reshape(n * c)

    rm, rv = repeat(running_mean), repeat(running_var)
    if rm is not None:
        rm, rv = rm.detach().clone(), rv.detach().clone()
    out = batch_norm(input.reshape((1, n * c) + input.shape[2:]), rm, rv, repeat(weight),
                     repeat(bias), use_input_stats, momentum, eps)
    if use_input_stats and running_mean is not None:
        with no_grad():
            running_mean.copy_(rm.reshape(n, c).mean(0))
            running_var.copy_(rv.reshape(n, c).mean(0))
    return out.reshape(input.shape)


def _torch_size(shape):
    return f"torch.Size([{', '.join(map(str, shape))}])"


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha * mean of x^2 over ``size`` neighbouring channels) ** beta``, the
    window zero-padded by ``size // 2`` before and ``(size - 1) // 2`` after, as PyTorch's."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    n, c = input.shape[:2]
    sq = (input * input).reshape(n, 1, c, -1)
    maps = (("avg", c, c, size, 1, size // 2, True), ("avg", sq.shape[-1], sq.shape[-1], 1, 1, 0,
                                                      True))
    div = P.linear_map(sq, P.avg_pool2d_p, maps, size).reshape(input.shape)
    return input / (div * alpha + k) ** beta
