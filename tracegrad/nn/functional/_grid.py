"""``nn.functional.affine_grid`` and ``grid_sample`` (spatial transformers), 2-D and 3-D.

``affine_grid`` maps the output's normalised pixel centres ([-1, 1], or the corner pixels'
centres with ``align_corners``) through a batch of affine matrices. ``grid_sample`` reads
``input`` at those points: ``bilinear`` (trilinear on 5-D inputs) blends the 2**d
neighbours, ``nearest`` rounds half to even (ATen's ``nearbyint``), ``bicubic`` (4-D only)
blends the 4x4 neighbours by cubic convolution. A neighbour outside the input reads 0
(``zeros``), or the point is first clipped into the input (``border``) or reflected off its
edges (``reflection``). Everything is tracegrad ops with the integer corners held constant,
so the gradients are ATen's: the input's gathers scatter back, and bilinear and bicubic are
differentiable in the grid (nearest's grid gradient is 0). The clip and the reflections are
written so their slopes are ATen's (0 on the clip's bounds themselves); 2-D follows ATen's
vectorised CPU kernel and 3-D its scalar one, which fold a reflection differently at the
bounds.
"""
import itertools
import warnings

from ... import creation, ops
from ...ops import where
from ...ops.core import op_error

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


# affine_grid ---------------------------------------------------------------------------------


def _linspace_from_neg_one(steps, align_corners, dtype):
    if steps <= 1:
        return creation.zeros(1, dtype=dtype)
    line = creation.linspace(-1, 1, steps, dtype=dtype)
    return line if align_corners else line * (steps - 1) / steps


def _base_grid(spatial, align_corners, dtype):
    """(prod(spatial), nd + 1) rows ``[x, y, (z,) 1]`` in row-major output order."""
    nd = len(spatial)
    axes = [_linspace_from_neg_one(n, align_corners, dtype) for n in reversed(spatial)]
    columns = []
    for d, line in enumerate(axes):      # x varies along the last spatial dim
        shape = [1] * nd
        shape[nd - 1 - d] = -1
        columns.append(line.reshape(shape).expand(*spatial))
    columns.append(creation.ones(spatial, dtype=dtype))
    return ops.stack(columns, -1).reshape(-1, nd + 1)


def affine_grid(theta, size, align_corners=None):
    """The (N, *spatial, d) sampling grid of the affine maps ``theta`` (N, d, d + 1)."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    nd = len(size) - 2
    if theta.dim() != 3 or tuple(theta.shape[-2:]) != (nd, nd + 1):
        raise ValueError(f"Expected a batch of {nd}D affine matrices of shape "
                         f"Nx{nd}x{nd + 1} for size {size}. Got {theta.shape}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise op_error("affine_grid", f"affine_grid_generator: expected theta's batch size "
                                      f"{theta.shape[0]} to equal size[0] = {size[0]}")
    base = _base_grid(spatial, align_corners, theta.dtype)
    grid = base.unsqueeze(0) @ theta.transpose(1, 2)
    return grid.reshape([size[0]] + spatial + [nd])


# source coordinates --------------------------------------------------------------------------


def _clip(coord, size):
    # where, not clamp: ATen's slope is 0 on the bounds themselves ("borders are out")
    return where(coord <= 0, 0.0, where(coord >= size - 1, float(size - 1), coord))


def _folded(coord, low):
    """``(|coord - low|, coord - low < 0)``; the absolute value has slope -1/+1 (+1 at 0)."""
    shifted = coord - low
    negative = shifted < 0
    return where(negative, -shifted, shifted), negative


def _reflect_2d(coord, size, align_corners):
    """ATen's vectorised 2-D reflection: ``|x - low|`` modulo twice the span, folded back
    by ``min(extra, twice_span - extra)`` (the fold taken only when strictly past it)."""
    if align_corners and size <= 1:
        return coord * 0.0
    low = 0.0 if align_corners else -0.5
    twice_span = 2.0 * (size - 1) if align_corners else 2.0 * size
    folded, _ = _folded(coord, low)
    extra = folded - ops.trunc(folded.detach() / twice_span) * twice_span
    reflected = twice_span - extra
    return where(extra > reflected, reflected, extra) + low


def _reflect_3d(coord, size, align_corners):
    """ATen's scalar ``reflect_coordinates`` (3-D): flips counted in whole spans, the
    direction from their parity."""
    twice_low, twice_high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
    if twice_low == twice_high:
        return coord * 0.0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    folded, _ = _folded(coord, low)
    extra = ops.fmod(folded, span)
    flips = ops.floor(folded.detach() / span)
    even = ops.fmod(flips, 2) == 0
    return where(even, extra + low, (span - extra) + low)


def _unnormalize(coord, size, align_corners, nd):
    """A normalised coordinate in pixels, rounded as ATen's CPU kernels round it: 2-D
    computes ``((coord + 1) * size - 1) / 2`` with one fused multiply-add (emulated by
    the product and difference in float64, exact for a float32 ``coord + 1``, rounded
    once); 3-D rounds the product and the difference apart. With ``align_corners``
    both are ``(coord + 1) / 2 * (size - 1)``, whose halving is exact."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    if nd == 2:
        return ((coord + 1).double() * size - 1).to(coord.dtype) / 2
    return ((coord + 1) * size - 1) / 2


def _source_index(coord, size, padding_mode, align_corners, nd):
    """A normalised coordinate as a pixel coordinate, padded as ``padding_mode`` says."""
    coord = _unnormalize(coord, size, align_corners, nd)
    return _padded(coord, size, padding_mode, align_corners, nd)


def _padded(coord, size, padding_mode, align_corners, nd):
    """A pixel coordinate clipped (``border``) or reflected (``reflection``) into the input."""
    if padding_mode == "border":
        coord = _clip(coord, size)
    elif padding_mode == "reflection":
        reflect = _reflect_2d if nd == 2 else _reflect_3d
        coord = _clip(reflect(coord, size, align_corners), size)
    return coord


# grid_sample -------------------------------------------------------------------------------


def _read(flat_input, corner, spatial):
    """``(values, inside)``: input values at integer points ``corner`` (one (N, L) tensor
    per dim, x first) with a 0/1 mask of the points inside the input."""
    inside = None
    index = None
    stride = 1
    for pos, size in zip(corner, reversed(spatial)):
        ok = (pos >= 0) & (pos < size)
        inside = ok if inside is None else inside & ok
        term = where(ok, pos, 0).long() * stride
        index = term if index is None else index + term
        stride *= size
    index = where(inside, index, 0)
    n, c = flat_input.shape[:2]
    gathered = flat_input.gather(2, index.unsqueeze(1).expand(n, c, index.shape[1]))
    return gathered, inside.unsqueeze(1)


def _check_grid_sample(input, grid, mode, padding_mode):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if mode == "bicubic" and input.dim() == 5:
        raise op_error("grid_sampler", "grid_sampler(): bicubic interpolation only supports 4D "
                                       "input")
    if input.dtype != grid.dtype:
        raise op_error("grid_sampler", f"grid_sampler(): expected input and grid to have same "
                                       f"dtype, but input has {input.dtype} and grid has "
                                       f"{grid.dtype}")
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        raise op_error("grid_sampler", f"grid_sampler(): expected 4D or 5D input and grid with "
                                       f"same number of dimensions, but got input with sizes "
                                       f"{list(input.shape)} and grid with sizes "
                                       f"{list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise op_error("grid_sampler", f"grid_sampler(): expected grid and input to have same "
                                       f"batch size, but got input with sizes "
                                       f"{list(input.shape)} and grid with sizes "
                                       f"{list(grid.shape)}")
    if grid.shape[-1] != input.dim() - 2:
        raise op_error("grid_sampler", f"grid_sampler(): expected grid to have size "
                                       f"{input.dim() - 2} in last dimension, but got grid "
                                       f"with sizes {list(grid.shape)}")


_CUBIC_A = -0.75     # ATen's bicubic convolution constant


def _cubic_weights(t):
    """The four cubic-convolution weights of the points at -1, 0, 1, 2 for a fraction ``t``."""
    a = _CUBIC_A

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _bicubic(flat_input, points, spatial, padding_mode, align_corners):
    """ATen's bicubic: 4x4 neighbours, each first padded as ``padding_mode`` says (the point
    itself is not), blended by cubic convolution along x, then y."""
    height, width = spatial
    x = _unnormalize(points[..., 0], width, align_corners, 2)
    y = _unnormalize(points[..., 1], height, align_corners, 2)
    x0, y0 = ops.floor(x.detach()), ops.floor(y.detach())
    wx, wy = _cubic_weights(x - x0), _cubic_weights(y - y0)
    out = None
    for i in range(4):
        row_y = _padded(y0 - 1 + i, height, padding_mode, align_corners, 2)
        row = None
        for j in range(4):
            col_x = _padded(x0 - 1 + j, width, padding_mode, align_corners, 2)
            values, inside = _read(flat_input, [col_x, row_y], spatial)
            term = where(inside, values, 0.0) * wx[j].unsqueeze(1)
            row = term if row is None else row + term
        term = row * wy[i].unsqueeze(1)
        out = term if out is None else out + term
    return out


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``input`` (N, C, *in) read at ``grid`` (N, *out, d) points: (N, C, *out)."""
    _check_grid_sample(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    n, c = input.shape[:2]
    spatial = list(input.shape[2:])
    out_spatial = list(grid.shape[1:-1])
    flat_input = input.reshape(n, c, -1)
    points = grid.reshape(n, -1, len(spatial))
    if mode == "bicubic":
        out = _bicubic(flat_input, points, spatial, padding_mode, align_corners)
        return out.reshape([n, c] + out_spatial)
    coords = [_source_index(points[..., d], size, padding_mode, align_corners, len(spatial))
              for d, size in enumerate(reversed(spatial))]        # x, y, (z)
    if mode == "nearest":
        corner = [ops.round(x.detach()) for x in coords]
        values, inside = _read(flat_input, corner, spatial)
        out = where(inside, values, 0.0)
    else:
        low = [ops.floor(x.detach()) for x in coords]
        out = None
        for bits in itertools.product((0, 1), repeat=len(coords)):
            weight = None
            for x, x0, bit in zip(coords, low, bits):
                w = (x - x0) if bit else (x0 + 1 - x)
                weight = w if weight is None else weight * w
            corner = [x0 + bit for x0, bit in zip(low, bits)]
            values, inside = _read(flat_input, corner, spatial)
            term = values * where(inside, weight.unsqueeze(1), 0.0)
            out = term if out is None else out + term
    return out.reshape([n, c] + out_spatial)
