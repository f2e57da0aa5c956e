"""The copies between images and the GEMM's columns, for ``conv.py``'s primitives.

``_columns`` copies the windows of an ``(N, C, *size)`` image into the columns a GEMM
contracts with the weight, ``(G, Cg*K, N*P)`` (one GEMM over every sample) or
``(N, G, Cg*K, P)`` (one per sample); ``_image`` adds columns back into an image (the
adjoint). Both run as C kernels
where they can (``codegen/conv_kernels.py``, found through ``c_kernels`` on first use, from
the ``KERNEL_PROVIDER`` the package installs: NumPy
arrays of float32 or float64, and a C compiler), with the same results bit for bit;
elsewhere (CuPy, other dtypes, no compiler) the NumPy code here runs: strided windows of the
padded input (one ``as_strided`` view, no copy) copied once, and a scatter looping over
kernel offsets or over output positions, whichever is shorter, vectorised over everything
else (no ``add.at``).

The weight gradient copies the forward's columns again rather than keeping them from the
forward: kept, they raised the eager LeNet step's page faults from about 1 to about 4,000
(the allocator gave the memory back between steps), which cost more than the copy.
"""
import math

import numpy as np


# strided windows and their adjoint ----------------------------------------------------------

def _out_len(n, k, stride, dilation, lo, hi):
    return (n + lo + hi - dilation * (k - 1) - 1) // stride + 1


def _windows(xp, x, kernel, stride, padding, dilation):
    """A ``(N, C, *P, *K)`` view of ``x`` padded with zeros: window ``p`` at offset ``k``."""
    nd = len(kernel)
    if any(lo or hi for lo, hi in padding):
        x = xp.pad(x, ((0, 0),) * (x.ndim - nd) + tuple(padding))
    lead, sizes, st = x.shape[:-nd], x.shape[-nd:], x.strides[-nd:]
    out = tuple(_out_len(n, k, s, d, 0, 0) for n, k, s, d in zip(sizes, kernel, stride, dilation))
    strides = x.strides[:-nd] + tuple(a * s for a, s in zip(st, stride)) \
        + tuple(a * d for a, d in zip(st, dilation))
    return xp.lib.stride_tricks.as_strided(x, lead + out + tuple(kernel), strides)


def _scatter(xp, cols, size, stride, padding, dilation):
    """Adjoint of ``_windows``: ``cols`` ``(N, C, *K, *P)`` summed into an ``(N, C, *size)``
    array. Loops over kernel offsets or over output positions, whichever is fewer."""
    nd = len(size)
    lead = cols.shape[:2]
    kernel, pos = cols.shape[2:2 + nd], cols.shape[2 + nd:]
    padded = tuple(n + lo + hi for n, (lo, hi) in zip(size, padding))
    out = xp.zeros(lead + padded, dtype=cols.dtype)
    every = (slice(None),) * 2
    if math.prod(kernel) <= math.prod(pos):
        for k in np.ndindex(*kernel):
            dst = tuple(slice(i * d, i * d + s * (p - 1) + 1, s)
                        for i, d, s, p in zip(k, dilation, stride, pos))
            out[every + dst] += cols[every + k]
    else:
        for p in np.ndindex(*pos):
            dst = tuple(slice(i * s, i * s + d * (k - 1) + 1, d)
                        for i, d, s, k in zip(p, dilation, stride, kernel))
            out[every + dst] += cols[every + (slice(None),) * nd + p]
    crop = tuple(slice(lo, lo + n) for n, (lo, _) in zip(size, padding))
    return xp.ascontiguousarray(out[every + crop])


# C kernels ----------------------------------------------------------------------------------

_C_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# The window kernels of ``codegen/conv_kernels.py``, looked up on the first call that could use
# them, then kept: their ``Kernels``, or False where they cannot be built (no C compiler);
# None until then. Tests set it to choose a path: False runs the NumPy code.
C_KERNELS = None
# What looks them up: set from above (the package's ``__init__``, which may reach the code
# generator), so that the core never imports ``codegen``; None: no kernels, NumPy runs.
KERNEL_PROVIDER = None


# C's im2col copies a row of positions per (sample, channel, tap), so a few positions make a
# short row: below this many, NumPy's one strided copy is faster (DCGAN's last layer, a 4x4
# kernel over a 4x4 image, 16 x 64 x 16 rows of one position: 0.2 ms in C, 0.007 in NumPy).
C_MIN_POSITIONS = 4


def c_kernels(xp, *arrays):
    """The C window kernels where they can run on ``arrays`` (NumPy arrays of float32 or
    float64), else None: the caller's NumPy code runs (also while the kernels are built)."""
    global C_KERNELS
    if xp is not np or not all(type(a) is np.ndarray and a.dtype in _C_DTYPES for a in arrays):
        return None
    if C_KERNELS is None:
        C_KERNELS = _look_up()
    return C_KERNELS or None


def _look_up():
    """The kernels, False where they cannot be built, None while they are being built."""
    return KERNEL_PROVIDER() if KERNEL_PROVIDER is not None else False


def _columns(xp, x, kernel, stride, padding, dilation, pos, groups, per_sample):
    """The GEMM's columns of ``x``'s windows at the first ``pos`` positions (fewer than fit
    where an output padding left extra): ``(G, Cg*K, N*P)``, the batch beside the positions,
    or with ``per_sample`` ``(N, G, Cg*K, P)``. One copy, by C's im2col or NumPy's of the
    strided windows (positions innermost, so the copy reads rows of the input). C's are in
    a scratch buffer that the next columns overwrite: the caller drops them first."""
    n, c, nd = x.shape[0], x.shape[1], len(kernel)
    rows, npos = c // groups * math.prod(kernel), math.prod(pos)
    shape = (n, groups, rows, npos) if per_sample else (groups, rows, n * npos)
    fast = c_kernels(xp, x) if npos >= C_MIN_POSITIONS else None
    if fast is not None:
        cols = fast.im2col(x, kernel, stride, padding, dilation, pos, batch_major=per_sample,
                           scratch=True)
        return cols.reshape(shape)
    win = _windows(xp, x, kernel, stride, padding, dilation)          # (N, C, *P, *K)
    win = win[(slice(None),) * 2 + tuple(slice(0, p) for p in pos)]
    spatial = tuple(range(2, 2 + nd))
    taps = tuple(a + nd for a in spatial)
    order = (0, 1) + taps + spatial if per_sample else (1,) + taps + (0,) + spatial
    return win.transpose(order).reshape(shape)


def _image(xp, cols, n, size, kernel, stride, padding, dilation, pos, per_sample):
    """The adjoint of ``_columns``: columns ``(G, Cg*K, N*P)`` (or with ``per_sample``
    ``(N, G, Cg*K, P)``) added into an image ``(N, C, *size)``."""
    taps = math.prod(kernel)
    c = cols.shape[-3] * cols.shape[-2] // taps
    fast = c_kernels(xp, cols)
    if fast is not None:
        return fast.col2im(cols, n, c, size, kernel, stride, padding, dilation, pos,
                           batch_major=per_sample)
    if per_sample:
        cols = cols.reshape((n, c) + tuple(kernel) + tuple(pos))
    else:
        cols = cols.reshape((c,) + tuple(kernel) + (n,) + tuple(pos))
        cols = xp.moveaxis(cols, 1 + len(kernel), 0)
    return _scatter(xp, cols, size, stride, padding, dilation)
