"""``nn.functional``'s resampling: ``interpolate`` (and the deprecated ``upsample*``) and
pixel shuffle.

``interpolate`` builds, per spatial dim, the tap-map descriptor of ``tracegrad.ops.pool``
for its mode and binds that module's upsampling primitive (``mode='area'`` is an adaptive
average pool; ``antialias=True`` applies PyTorch's antialiasing weights as two matrices);
sizes, scales and the errors for a wrong mode or rank are PyTorch's.
``pixel_shuffle`` and ``pixel_unshuffle`` are a reshape, a permute and a reshape.
"""
import math
import numbers
import warnings

import numpy as np

from ...ops import pool as P
from ...ops.core import op_error
from ._pool import _adaptive_avg, _ntuple


# interpolation ---------------------------------------------------------------------------

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's ``interpolate`` for the modes nearest, nearest-exact, (bi/tri)linear, bicubic
    and area.

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
    if mode in _LINEAR and _LINEAR[mode] != n or mode == "bicubic" and n != 2:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{_LINEAR.get(mode, 2) + 2}D input")
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    if mode == "lanczos":
        raise NotImplementedError("interpolate: mode='lanczos' is not supported by tracegrad; "
                                  "use bicubic or bilinear (antialias=True to downsample)")
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
    if antialias:
        return _antialiased(input, mode, outs, bool(align_corners), scales)
    if mode in _LINEAR:
        maps = tuple(("linear", L, o, bool(align_corners), f)
                     for L, o, f in zip(sizes, outs, scales))
        return P.linear_map(input, P.UPSAMPLE["linear", n], maps)
    if mode == "bicubic":
        maps = tuple(("cubic", L, o, bool(align_corners), f)
                     for L, o, f in zip(sizes, outs, scales))
        return P.linear_map(input, P.UPSAMPLE["cubic", 2], maps)
    maps = tuple((mode, L, o, f) for L, o, f in zip(sizes, outs, scales))
    return P.linear_map(input, P.UPSAMPLE[mode, n], maps)


# antialiased bilinear and bicubic ----------------------------------------------------------

def _triangle(x):
    return np.maximum(1.0 - np.abs(x), 0.0)


def _keys_cubic(x, a=-0.5):
    """Keys' cubic convolution kernel (a = -0.5), as PyTorch's ``aa_filter`` for bicubic."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


_AA_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_keys_cubic, 4)}


def _antialias_weights(mode, size, out, align_corners, scale_factor):
    """The ``(out, size)`` matrix of PyTorch's antialiased resampling along one dim
    (``_compute_weights_aa`` in ``UpSampleKernel.cpp``): output pixel i is centred at
    ``scale * (i + 0.5)`` in the input; when downsampling (scale >= 1) the filter is
    stretched by the scale, so its support (``taps / 2 * scale``) covers every input pixel
    the output pixel stands for; the taps inside the input are weighted by the filter and
    normalised to sum to one."""
    kernel, taps = _AA_FILTERS[mode]
    if align_corners:
        scale = (size - 1) / (out - 1) if out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor else size / out
    support = taps / 2 * scale if scale >= 1 else taps / 2
    widest = math.ceil(support) * 2 + 1
    invscale = 1.0 / scale if scale >= 1 else 1.0
    weights = np.zeros((out, size))
    for i in range(out):
        center = scale * (i + 0.5)
        first = max(int(center - support + 0.5), 0)
        count = min(max(min(int(center + support + 0.5), size) - first, 0), widest)
        taps_at = np.arange(first, first + count)
        w = kernel((taps_at - center + 0.5) * invscale)
        total = w.sum()
        weights[i, taps_at] = w / total if total != 0 else w
    return weights


def _antialiased(input, mode, outs, align_corners, scales):
    """``interpolate(..., antialias=True)`` of a 4-D input: the height and width weight
    matrices applied as two matmuls (differentiable and compilable as they are, so the
    backward is the transposed matrices')."""
    from ...creation import tensor
    rows, cols = (tensor(_antialias_weights(mode, size, out, align_corners, f),
                         dtype=input.dtype, device=input.device)
                  for size, out, f in zip(input.shape[2:], outs, scales))
    return rows @ (input @ cols.mT)


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

