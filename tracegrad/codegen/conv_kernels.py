"""C kernels for the window ops of ``tracegrad/ops/conv.py`` and ``ops/pool.py``.

The eager core's implementations of im2col, col2im and max pooling are NumPy copies of
strided windows; these are the same loops in C, one function per job and dtype (float32
and float64), built once by ``build.build`` (cached on disk) and called with ctypes on
C-contiguous NumPy arrays. The GEMMs stay in BLAS: the kernels only move data, in the
layout the GEMM wants, so no transpose copy follows them.

The core looks this module up lazily, on the first call that could use it
(``ops.conv_columns.c_kernels``), and runs its NumPy code until the kernels are built, or
for good where no C compiler can build them. Every kernel's result equals NumPy's bit for
bit: copies are copies, and the scatter-adds add each output's terms in the order the NumPy
code does (by kernel offset, or by output position where the NumPy code loops over them).

Window geometry (``geometry`` in C) is padded to three spatial dims: a missing dim has size
1, kernel 1, stride 1, no padding and dilation 1. A column matrix holds window element
``(c, k)`` of sample ``n`` at position ``p`` at ``(c*K + k)*row_stride + n*n_stride + p``:
the GEMM's ``(C*K, N*P)`` (``row_stride = N*P``, ``n_stride = P``) or unfold's
``(N, C*K, P)`` (``row_stride = P``, ``n_stride = C*K*P``). The C text is in
``conv_kernels_source``; this module builds, loads and calls it.
"""
import math
import threading

import numpy as np

from tracegrad.parallel import get_num_threads

from . import build
from .conv_kernels_source import (  # noqa: F401 - KERNELS, PRELUDE: the C text, from here too
    DTYPES, JOBS, KERNELS, PRELUDE, SOURCE,
)

_lock = threading.Lock()
_building = []      # [the thread that builds the kernels], once started
_loaded = []        # [the Kernels, or None where they cannot be built], once built


def load(wait=True):
    """The kernels (a ``Kernels``), built or loaded from the disk cache once per process, in
    a thread of their own; None where they cannot be built (no C compiler: ``build``
    raised). ``wait=False`` returns None at once while the build runs, so that no
    convolution waits on the compiler (the NumPy code gives the same results meanwhile)."""
    with _lock:
        if not _building:
            _building.append(threading.Thread(target=_build, name="tracegrad-conv-kernels",
                                              daemon=True))
            _building[0].start()
    if wait:
        _building[0].join()
    return _loaded[0] if _loaded else None


def settled():
    """Whether ``load`` has its answer (the kernels, or None for good)."""
    return bool(_loaded)


def provide():
    """For ``ops.conv_columns.KERNEL_PROVIDER``: the kernels, False where they cannot be
    built, None while the build runs (the caller asks again on its next call)."""
    kernels = load(wait=False)
    if kernels is None and settled():
        return False
    return kernels


def _build():
    try:
        lib = build.build(SOURCE, "conv_kernels",
                          symbols=[f"{j}_{s}" for j in JOBS for _, s in DTYPES.values()])
        kernels = Kernels(lib)
    except build.BuildError:
        kernels = None
    _loaded.append(kernels)


# Columns live only inside one primitive's implementation (copied, contracted by a GEMM,
# dropped), so each thread reuses one buffer for them up to this size: a fresh array per call
# can cost thousands of page faults a step where the allocator hands the memory back to the
# system between calls (seen in the eager LeNet step).
SCRATCH_BYTES = 64 << 20
_scratch = threading.local()


def scratch_array(shape, dtype):
    """An uninitialised array in this thread's scratch buffer (a fresh one past
    ``SCRATCH_BYTES``); valid until the thread's next call."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes > SCRATCH_BYTES:
        return np.empty(shape, dtype)
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.nbytes < nbytes:
        buf = _scratch.buf = np.empty(nbytes, np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


def _ptr(a):
    return a.ctypes.data


def _geometry(n, c, size, kernel, pos, stride, pad, dilation, n_stride, row_stride):
    """C's ``geometry`` as an int64 array (its fields in order), the spatial tuples padded
    in front to 3 dims."""
    def three(values, fill):
        return (fill,) * (3 - len(values)) + tuple(values)
    return np.array((n, c) + three(size, 1) + three(kernel, 1) + three(pos, 1)
                    + three(stride, 1) + three(pad, 0) + three(dilation, 1)
                    + (n_stride, row_stride), dtype=np.int64)


class Kernels:
    """The loaded library's functions, called on NumPy arrays of a dtype in ``DTYPES``."""

    def __init__(self, lib):
        import ctypes
        vp, i64, cint = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        self.fns = {}
        for _, s in DTYPES.values():
            for job, args, res in (("im2col", [vp, vp, vp, cint], None),
                                   ("col2im", [vp, vp, vp, cint, cint], None),
                                   ("pool_argmax", [vp, vp, vp, cint], None),
                                   ("gather_rows", [vp, vp, vp, i64, i64, i64, cint], i64),
                                   ("scatter_rows", [vp, vp, vp, i64, i64, i64, cint], i64)):
                fn = getattr(lib, f"{job}_{s}")
                fn.argtypes, fn.restype = args, res
                self.fns[job, s] = fn

    def _fn(self, job, dtype):
        return self.fns[job, DTYPES[dtype][1]]

    def im2col(self, x, kernel, stride, padding, dilation, pos, batch_major=False,
               scratch=False):
        """Columns of ``x`` ``(N, C, *size)``: ``(C*K, N*P)`` (the GEMM's), or with
        ``batch_major`` ``(N, C*K, P)`` (unfold's). ``padding``: ``(low, high)`` pairs (the
        high side needs no value: ``pos`` says how many positions there are). ``scratch``:
        written into this thread's scratch buffer (see ``scratch``), for columns the caller
        drops before it asks for columns again."""
        x = np.ascontiguousarray(x)
        n, c = x.shape[0], x.shape[1]
        rows, npos = c * math.prod(kernel), math.prod(pos)
        shape, layout = ((n, rows, npos), (rows * npos, npos)) if batch_major \
            else ((rows, n * npos), (npos, n * npos))
        cols = scratch_array(shape, x.dtype) if scratch else np.empty(shape, x.dtype)
        geo = _geometry(n, c, x.shape[2:], kernel, pos, stride, [lo for lo, _ in padding],
                        dilation, *layout)
        self._fn("im2col", x.dtype)(_ptr(x), _ptr(cols), _ptr(geo), get_num_threads())
        return cols

    def col2im(self, cols, n, c, size, kernel, stride, padding, dilation, pos,
               batch_major=False):
        """The image ``(N, C, *size)`` that ``cols`` (``im2col``'s layout) adds up to."""
        cols = np.ascontiguousarray(cols)
        npos = math.prod(pos)
        layout = (c * math.prod(kernel) * npos, npos) if batch_major else (npos, n * npos)
        x = np.empty((n, c) + tuple(size), cols.dtype)
        geo = _geometry(n, c, size, kernel, pos, stride, [lo for lo, _ in padding],
                        dilation, *layout)
        by_position = math.prod(kernel) > npos      # the NumPy code's order (_scatter's)
        self._fn("col2im", cols.dtype)(_ptr(cols), _ptr(x), _ptr(geo), int(by_position),
                                       get_num_threads())
        return x

    def pool_argmax(self, x, maps):
        """Max pooling's flat per-plane indices for ``"window"`` maps (``ops/pool.py``)."""
        x = np.ascontiguousarray(x)
        nd = len(maps)
        lead = x.shape[:x.ndim - nd]
        out = tuple(m[2] for m in maps)
        idx = np.empty(lead + out, np.int64)
        geo = _geometry(math.prod(lead), 1, x.shape[x.ndim - nd:], [m[3] for m in maps], out,
                        [m[4] for m in maps], [m[5] for m in maps], [m[6] for m in maps], 0, 0)
        self._fn("pool_argmax", x.dtype)(_ptr(x), _ptr(idx), _ptr(geo), get_num_threads())
        return idx

    def gather(self, x, indices, nd):
        """``x``'s values at flat per-plane ``indices`` (same leading dims); None where an
        index is out of range (the caller's NumPy code then raises its error)."""
        x, indices = np.ascontiguousarray(x), np.ascontiguousarray(indices, np.int64)
        plane = math.prod(x.shape[x.ndim - nd:])
        rows = math.prod(x.shape[:x.ndim - nd])
        out = np.empty(indices.shape, x.dtype)
        bad = self._fn("gather_rows", x.dtype)(_ptr(x), _ptr(indices), _ptr(out), rows,
                                               indices.size // max(rows, 1), plane,
                                               get_num_threads())
        return None if bad else out

    def scatter(self, g, indices, nd, shape):
        """The adjoint of ``gather``: ``g`` added into zeros of ``shape`` at ``indices``."""
        g, indices = np.ascontiguousarray(g), np.ascontiguousarray(indices, np.int64)
        plane = math.prod(shape[len(shape) - nd:])
        rows = math.prod(shape[:len(shape) - nd])
        out = np.empty(tuple(shape), g.dtype)
        bad = self._fn("scatter_rows", g.dtype)(_ptr(g), _ptr(indices), _ptr(out), rows,
                                                indices.size // max(rows, 1), plane,
                                                get_num_threads())
        return None if bad else out
