"""``nn.functional``'s resampling: ``interpolate`` (and the deprecated ``upsample*``) and
pixel shuffle.

``interpolate`` builds, per spatial dim, the tap-map descriptor of ``tracegrad.ops.pool``
for its mode and binds that module's upsampling primitive (``mode='area'`` is an adaptive
average pool); sizes, scales and the errors for a wrong mode or rank are PyTorch's.
``pixel_shuffle`` and ``pixel_unshuffle`` are a reshape, a permute and a reshape.
"""
import math
import numbers
import warnings

from ..ops import pool as P
from ..ops.core import op_error
from .functional_pool import _adaptive_avg, _ntuple


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
    if mode == "lanczos" or antialias:
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
    if mode == "bicubic":
        maps = tuple(("cubic", L, o, bool(align_corners), f)
                     for L, o, f in zip(sizes, outs, scales))
        return P.linear_map(input, P.UPSAMPLE["cubic", 2], maps)
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

