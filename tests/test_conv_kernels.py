"""The C window kernels (``codegen/conv_kernels.py``) against the NumPy code they replace.

Each case runs twice through the seam ``ops.conv_columns.C_KERNELS``: False forces the NumPy
code, the loaded kernels force C. The results must be equal bit for bit, not just close:
im2col and the pooling gathers are copies, the GEMMs are the same BLAS calls on the same
columns, and the scatter-adds add each output's terms in the NumPy code's order (by kernel
offset, or by output position where that loop is shorter). Also covered: the fallback to
NumPy where no C compiler can build the kernels (and while they are built), where the arrays
are not NumPy's, or where no kernel has the dtype.
"""
import math
import threading

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn.functional as F
from tracegrad.codegen import build, conv_kernels
from tracegrad.ops import conv, conv_columns, pool

KERNELS = conv_kernels.load()
needs_c = pytest.mark.skipif(KERNELS is None, reason="no C compiler to build the kernels")


@pytest.fixture
def path(monkeypatch):
    """``path("numpy")`` / ``path("c")``: the seam set to that path for what follows."""
    def use(name):
        monkeypatch.setattr(conv_columns, "C_KERNELS", KERNELS if name == "c" else False)
    return use


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def both(path, fn):
    """``fn()`` by the NumPy code and by the C kernels."""
    path("numpy")
    ref = fn()
    path("c")
    return ref, fn()


# convolution cases: (N, C, O, groups, size, kernel, stride, padding (lo, hi), dilation)
CASES = [
    (2, 3, 4, 1, (9,), (3,), (1,), ((0, 0),), (1,)),
    (3, 4, 6, 2, (11,), (4,), (3,), ((2, 1),), (2,)),
    (2, 1, 6, 1, (12, 12), (5, 5), (1, 1), ((0, 0), (0, 0)), (1, 1)),        # LeNet's conv1
    (2, 6, 8, 1, (7, 9), (3, 3), (2, 1), ((1, 1), (1, 1)), (1, 1)),
    (1, 4, 4, 4, (8, 8), (3, 3), (1, 1), ((1, 1), (1, 1)), (2, 2)),          # depthwise
    (2, 3, 6, 3, (10, 7), (2, 4), (3, 2), ((0, 3), (2, 0)), (1, 2)),
    (2, 3, 4, 1, (6, 6), (1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1)),
    (1, 2, 3, 1, (3, 3), (3, 3), (1, 1), ((2, 2), (2, 2)), (1, 1)),          # kernel > positions
    (2, 2, 4, 2, (5, 6, 4), (2, 3, 2), (1, 2, 1), ((1, 0), (0, 1), (1, 1)), (2, 1, 1)),
    (1, 3, 2, 1, (4, 5, 6), (3, 3, 3), (2, 2, 2), ((1, 1), (1, 1), (1, 1)), (1, 1, 1)),
    (0, 3, 4, 1, (8, 8), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),          # empty batch
]
IDS = [f"{len(c[4])}d-{i}" for i, c in enumerate(CASES)]


def _arrays(case, dtype, contiguous, seed=0):
    n, c, o, groups, size, kernel, stride, padding, dilation = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c) + tuple(2 * s for s in size)).astype(dtype)
    x = x[(slice(None),) * 2 + (slice(None, None, 2),) * len(size)]     # every other element
    if contiguous:
        x = np.ascontiguousarray(x)
    w = rng.standard_normal((o, c // groups) + kernel).astype(dtype)
    out = conv._conv_shape(x.shape, w.shape, stride, padding, dilation, groups)
    g = rng.standard_normal(out).astype(dtype)
    return x, w, g


# GEMM layouts (conv.py): one GEMM over every sample, one per sample with the weight
# gradient's products summed at once, one per sample accumulated sample by sample
LAYOUTS = {"one-gemm": (10 ** 9, 4 << 20), "per-sample": (1, 4 << 20),
           "per-sample-accumulated": (1, 0)}


@pytest.fixture(params=list(LAYOUTS))
def layout(request, monkeypatch):
    positions, products = LAYOUTS[request.param]
    monkeypatch.setattr(conv, "PER_SAMPLE_POSITIONS", positions)
    monkeypatch.setattr(conv, "PER_SAMPLE_PRODUCTS", products)
    return request.param


@needs_c
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_convolution_and_its_gradients_equal_numpys(path, layout, case, dtype, contiguous):
    x, w, g = _arrays(case, dtype, contiguous)
    _, _, _, groups, size, kernel, stride, padding, dilation = case
    assert x.flags.c_contiguous == contiguous or x.size == 0
    for fn in (lambda: conv._conv_impl(np, x, w, stride, padding, dilation, groups),
               lambda: conv._conv_weight_impl(np, x, g, kernel, stride, padding, dilation,
                                              groups),
               lambda: conv._convt_impl(np, g, w, stride, padding, dilation, groups,
                                        (0,) * len(size))):
        ref, got = both(path, fn)
        assert same_bits(ref, got)


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", [c for c in CASES if c[0]], ids=[i for c, i in zip(CASES, IDS)
                                                                 if c[0]])
def test_unfold_and_fold_equal_numpys(path, case, dtype):
    x, _, _ = _arrays(case, dtype, contiguous=False)
    _, _, _, _, size, kernel, stride, padding, dilation = case
    ref, got = both(path, lambda: conv._im2col_impl(np, x, kernel, dilation, padding, stride))
    assert same_bits(ref, got)
    cols = np.random.default_rng(1).standard_normal(ref.shape).astype(dtype)
    ref, got = both(path, lambda: conv._col2im_impl(np, cols, x.shape[2:], kernel, dilation,
                                                    padding, stride))
    assert same_bits(ref, got)


def test_the_scatter_add_orders_are_both_covered():
    """Cases where the NumPy scatter loops over kernel offsets and where it loops over
    positions (the C kernel follows either order)."""
    by_position = []
    for n, c, o, groups, size, kernel, stride, padding, dilation in CASES:
        shape = conv._conv_shape((n, c) + size, (o, c // groups) + kernel, stride, padding,
                                 dilation, groups)
        by_position.append(math.prod(kernel) > math.prod(shape[2:]))
    assert any(by_position) and not all(by_position)


def test_end_to_end_gradients_equal_numpys(path, layout):
    """Through the public API and autograd: conv2d, a transposed convolution with an output
    padding (its weight gradient reads fewer windows than fit), max pooling, unfold/fold."""
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(s).astype(np.float32)
          for s in ((3, 2, 12, 11), (4, 2, 3, 3), (2, 3, 3, 3))]

    def run():
        x, w, wt = (tg.tensor(a, requires_grad=True) for a in xs)
        y = F.max_pool2d(F.conv2d(x, w, padding=1, stride=(1, 2)).relu(), 3, 2, 1,
                         ceil_mode=True)
        u = F.conv_transpose2d(x, wt, stride=2, padding=1, output_padding=1)
        z = F.fold(F.unfold(x, 2, dilation=2), (12, 11), 2, dilation=2)
        ((y * y).sum() + (u * u).sum() + (z * z).sum()).backward()
        return [t.detach().numpy() for t in (y, u, z, x.grad, w.grad, wt.grad)]
    ref, got = both(path, run)
    assert all(same_bits(a, b) for a, b in zip(ref, got))


# max pooling ------------------------------------------------------------------------------

POOLS = [   # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 9), (3,), (2,), (1,), (1,), False),
    ((2, 3, 13), (4,), (3,), (2,), (2,), True),
    ((2, 6, 12, 12), (2, 2), (2, 2), (0, 0), (1, 1), False),      # LeNet's
    ((1, 2, 7, 9), (3, 3), (2, 1), (1, 1), (2, 1), True),
    ((2, 1, 5, 6, 7), (2, 3, 2), (2, 1, 3), (1, 1, 0), (1, 2, 1), True),
    ((0, 3, 6, 6), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((5, 6), (3, 2), (1, 2), (1, 1), (1, 1), False),             # unbatched, one plane
]


def _maps(shape, kernel, stride, padding, dilation, ceil_mode):
    nd = len(kernel)
    return tuple(("window", L, pool.pool_out_size(L, k, s, p, d, ceil_mode), k, s, p, d)
                 for L, k, s, p, d in zip(shape[-nd:], kernel, stride, padding, dilation))


def _pool_input(shape, dtype, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=shape).astype(dtype)     # ties, to check the first wins
    flat = x.reshape(-1)
    if flat.size:
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 9))] = np.nan
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 5))] = -np.inf
    return x


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spec", POOLS, ids=[f"{len(p[1])}d-{i}" for i, p in enumerate(POOLS)])
def test_max_pool_indices_values_and_scatter_equal_numpys(path, spec, dtype):
    shape = spec[0]
    maps = _maps(*spec)
    x = _pool_input(shape, dtype)
    ref, got = both(path, lambda: pool._argmax_impl(np, x, maps))
    assert same_bits(ref, got)
    nd = len(maps)
    ref, got = both(path, lambda: pool._gather_impl(np, x, got, nd))
    assert same_bits(ref, got)
    g = np.random.default_rng(4).standard_normal(got.shape).astype(dtype)
    ref, got = both(path, lambda: pool._scatter_impl(np, g, pool._argmax_impl(np, x, maps), nd,
                                                     shape))
    assert same_bits(ref, got)


@needs_c
def test_an_all_minus_infinity_window_picks_its_first_element_inside(path):
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    maps = _maps(x.shape, (3, 3), (2, 2), (1, 1), (1, 1), False)
    for name in ("c", "numpy"):     # the NumPy code is CuPy's: its indices made on the device
        path(name)
        idx = pool._argmax_impl(np, x, maps)
        assert idx.tolist() == [[[[0, 1], [4, 5]]]], name


@needs_c
def test_an_out_of_range_index_raises_numpys_error(path):
    path("c")
    x = np.zeros((1, 2, 3, 3), np.float32)
    with pytest.raises(IndexError):
        pool._gather_impl(np, x, np.full((1, 2, 1, 1), 9, np.int64), 2)
    with pytest.raises(IndexError):
        pool._scatter_impl(np, np.ones((1, 2, 1, 1), np.float32),
                           np.full((1, 2, 1, 1), 99, np.int64), 2, x.shape)


# where the C kernels do not run ---------------------------------------------------------------

def test_without_a_c_compiler_the_numpy_code_runs(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(conv_kernels, "_loaded", [])
    monkeypatch.setattr(conv_kernels, "_building", [])
    monkeypatch.setattr(conv_columns, "C_KERNELS", None)
    with pytest.raises(build.BuildError):
        build.toolchain()
    assert conv_kernels.load() is None and conv_kernels.settled()
    x, w, g = _arrays(CASES[3], np.float32, True)
    _, _, _, groups, _, _, stride, padding, dilation = CASES[3]
    got = conv._conv_impl(np, x, w, stride, padding, dilation, groups)
    assert conv_columns.C_KERNELS is False
    assert conv_columns.c_kernels(np, x) is None
    monkeypatch.setattr(conv_columns, "C_KERNELS", False)
    assert same_bits(got, conv._conv_impl(np, x, w, stride, padding, dilation, groups))


def test_convolutions_run_while_the_kernels_are_built(monkeypatch):
    """The first call starts the build and runs the NumPy code; once built, C runs."""
    monkeypatch.setattr(conv_kernels, "_loaded", [])
    monkeypatch.setattr(conv_kernels, "_building", [])
    monkeypatch.setattr(conv_columns, "C_KERNELS", None)
    release = threading.Event()
    real_build = conv_kernels._build
    monkeypatch.setattr(conv_kernels, "_build", lambda: release.wait(30) and real_build())
    x = np.ones((1, 1, 4, 4), np.float32)
    assert conv_columns.c_kernels(np, x) is None and conv_columns.C_KERNELS is None
    got = conv._im2col_impl(np, x, (2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1))
    release.set()
    conv_kernels._building[0].join()
    assert conv_columns.c_kernels(np, x) is conv_kernels._loaded[0]
    if KERNELS is not None:
        assert conv_columns.C_KERNELS is not False
    assert same_bits(got, conv._im2col_impl(np, x, (2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1)))


def test_columns_reuse_one_scratch_buffer_per_thread(monkeypatch):
    a = conv_kernels.scratch_array((3, 5), np.float32)
    b = conv_kernels.scratch_array((2, 2), np.float64)
    assert np.shares_memory(a, b) and b.dtype == np.float64 and b.shape == (2, 2)
    monkeypatch.setattr(conv_kernels, "SCRATCH_BYTES", 16)
    c = conv_kernels.scratch_array((5,), np.float32)            # past the limit: its own
    assert not np.shares_memory(a, c)
    other = []
    t = threading.Thread(target=lambda: other.append(conv_kernels.scratch_array((2,), np.int8)))
    t.start()
    t.join()
    assert not np.shares_memory(a, other[0])


class _OtherArrayModule:
    """Stands for CuPy: an array module that is not NumPy."""


@needs_c
def test_other_array_modules_and_dtypes_get_no_c_kernels(path):
    path("c")
    assert conv_columns.c_kernels(np, np.zeros(3, np.float32)) is KERNELS
    assert conv_columns.c_kernels(_OtherArrayModule(), np.zeros(3, np.float32)) is None
    for dtype in (np.float16, np.int64, np.complex64):
        assert conv_columns.c_kernels(np, np.zeros(3, dtype)) is None
    x = np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5)          # int64: the NumPy code
    maps = _maps(x.shape, (2, 2), (2, 2), (0, 0), (1, 1), False)
    assert pool._argmax_impl(np, x, maps).tolist() == \
        pool._window_argmax(np, x, maps).tolist()
