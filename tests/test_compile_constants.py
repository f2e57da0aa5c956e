"""Every constant a program can build, compiled: the values it holds survive the Python driver,
the C tier and the CUDA source bit for bit, and zero-size shapes keep every dim.

Constants are ``inf``, ``-inf``, ``nan``, ``-0.0``, float16/32/64 extremes (max, tiny, the
smallest subnormal), integers at their dtype's limits and boolean masks, made inside the
compiled function (``tensor``, ``full``, ``zeros_like``...) or written as Python numbers into
its ops. Each program runs eager and compiled on both tiers (the ``backend`` fixture) and
the results must be eager's: values, dtypes, shapes, the sign of zeros (``np.signbit``) and
gradients. The C and CUDA literals are also checked on their own: compiled by ``cc`` and read
back as bits, and compiled by ``nvcc``; kernels with such literals run on the CUDA tier
through the CPU emulation of a GPU.
"""
import shutil
import subprocess

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import cstyle, cuda

from cuda_emulation import emulator

INF, NAN = float("inf"), float("nan")
NVCC = shutil.which("nvcc")
CC = shutil.which("cc") or shutil.which("gcc")


def _np(t):
    return t.detach().cpu()._data if isinstance(t, tg.Tensor) else np.asarray(t)


def assert_same(got, want, what="", exact=True):
    """``got`` is ``want``: shape, dtype, NaNs and infinities where they are, the sign of
    every zero; the values bit for bit (``exact``) or to float rounding."""
    a, b = _np(got), _np(want)
    assert (a.shape, a.dtype) == (b.shape, b.dtype), f"{what}: {a.shape} {a.dtype} vs " \
                                                     f"{b.shape} {b.dtype}"
    if a.dtype.kind != "f":
        assert np.array_equal(a, b), f"{what}: {a} vs {b}"
        return
    assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: NaNs at {a} vs {b}"
    zeros = (a == 0) & (b == 0)
    assert np.array_equal(np.signbit(a[zeros]), np.signbit(b[zeros])), \
        f"{what}: signs of zeros in {a!r} vs {b!r}"
    if exact:
        assert np.array_equal(a, b, equal_nan=True), f"{what}: {a!r} vs {b!r}"
    else:
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=0, equal_nan=True, err_msg=what)


def both(fn, *make_args, grad=False, exact=True, one_variant=True):
    """``fn`` eager and compiled on fresh inputs from ``make_args``: outputs (and with
    ``grad``, the gradients of a weighted sum of them) are the same. Returns the compiled
    function, called twice (the second call from the cache, with ``one_variant``)."""
    c = tg.compile(fn)
    for call in range(2):
        runs = []
        for f in (fn, c):
            args = [m() for m in make_args]
            outs = f(*args)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            grads = []
            if grad:
                loss = sum((o * (k + 1.5)).sum() for k, o in enumerate(outs)
                           if o.requires_grad)
                loss.backward()
                grads = [a.grad for a in args if isinstance(a, tg.Tensor) and a.requires_grad]
            runs.append((outs, grads))
        (want, want_g), (got, got_g) = runs
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got + got_g, want + want_g)):
            assert_same(g, w, f"call {call}, value {k}", exact)
    if one_variant:
        assert c.stats["compiles"] == 1 and c.stats["fallbacks"] == 0, c.stats
    return c


def _in_c(c, backend):
    """On the C tier, every kernel of the variant ran in C."""
    if backend == "c":
        v = c._last
        assert v.c_kernels and not v.c_skipped, v.c_skipped


# the Transformer's causal mask, and NaN constants -------------------------------------------

def test_causal_mask_of_minus_inf_compiles(backend):
    def attend(x):
        mask = tg.full((3, 3), float("-inf")).triu(1)
        return (x + mask).softmax(-1)

    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((3, 3))
    c = both(attend, lambda: tg.tensor(x0, dtype=tg.float32, requires_grad=True), grad=True,
             exact=False)
    out = c(tg.tensor(x0, dtype=tg.float32))
    assert (_np(out)[np.triu_indices(3, 1)] == 0).all()


def test_nan_constants_compile(backend):
    both(lambda x: (x + tg.full((3,), NAN), x * tg.full((2, 3), NAN).sum(0), tg.isnan(x + NAN)),
         lambda: tg.tensor([1.0, -2.0, 0.5], requires_grad=True), grad=True)


def test_a_nan_clamp_bound_makes_nan(backend):
    """PyTorch's (and NumPy's clip's) rule; a comparison alone ignores a NaN bound, as the C
    and CUDA forms did and as CuPy's clip does."""
    c = both(lambda x: (tg.clamp(x * 2, max=NAN) + 1, tg.clamp(x * 2, min=NAN) + 1,
                        tg.clamp(x * 2, -0.5, NAN) + 1, tg.clamp(x * 2, NAN, 0.5) + 1,
                        tg.clamp(x * NAN, -1.0, 1.0) + 1),
             lambda: tg.tensor([1.0, -2.0, 0.5], requires_grad=True), grad=True)
    _in_c(c, backend)


# constants of every dtype at their limits ---------------------------------------------------

def _extremes(dt):
    f = np.finfo(dt)
    return [INF, -INF, NAN, -0.0, 0.0, float(f.max), float(f.min), float(f.tiny),
            -float(f.tiny), float(f.smallest_subnormal), -float(f.smallest_subnormal),
            float(dt(1) / dt(3))]


SPECIAL = {
    "float64": _extremes(np.float64),
    "float32": _extremes(np.float32),
    "float16": _extremes(np.float16),
    "int64": [2 ** 63 - 1, -2 ** 63, -1, 0, 2 ** 53 + 1],
    "int32": [2 ** 31 - 1, -2 ** 31, -1],
    "int16": [2 ** 15 - 1, -2 ** 15],
    "int8": [127, -128, -1],
    "uint8": [255, 0, 128],
    "bool": [True, False, True],
}


@pytest.mark.parametrize("size", ["inline", "global"])     # up to 64 elements are literals
@pytest.mark.parametrize("name", list(SPECIAL))
def test_constants_of_every_dtype_keep_their_bits(backend, name, size):
    dt = getattr(tg, name)
    values = SPECIAL[name] * (1 if size == "inline" else 8)
    want = np.array(values, dtype=dt.np)

    def program(mask, zero):
        k = tg.tensor(values, dtype=dt)
        picked = tg.where(mask, k, zero)        # through a fused kernel: k's values exactly
        return k, (picked | zero) if name == "bool" else picked + zero

    zero = -0.0 if dt.is_floating_point else 0     # x + -0.0 is x, for -0.0 too
    c = both(program, lambda: tg.ones(len(values), dtype=tg.bool),
             lambda: tg.full((len(values),), zero, dtype=dt))
    for out in c(tg.ones(len(values), dtype=tg.bool), tg.full((len(values),), zero, dtype=dt)):
        assert_same(out, want, name)


SCALARS = [INF, -INF, NAN, -0.0, 0.0, float(np.finfo(np.float32).max),
           float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).smallest_subnormal),
           float(np.finfo(np.float64).max), 5e-324, 0.1, -1e300]


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("s", SCALARS, ids=[repr(s) for s in SCALARS])
def test_python_numbers_in_kernels_keep_their_bits(backend, s, dtype):
    """A Python number in an op is a literal of the kernel (C: ``(-(float)INFINITY)``,
    ``(-0.0f)``, ``1e-45f``): each op's result is eager's, bit for bit."""
    def program(x):
        outs = [x * s, x + s, x - s, tg.where(x > 0, x, s), x.masked_fill(x < 0, s),
                tg.maximum(x, tg.full_like(x, s))]
        if s == s:      # clamp to NaN is not a bound
            outs.append(tg.clamp(x, min=s))
        return tuple(o * 1.0 for o in outs)

    values = [-1.5, 0.0, 2.5, -0.0, 1e-3, -7.0]
    c = both(program, lambda: tg.tensor(values, dtype=dtype, requires_grad=True), grad=True)
    _in_c(c, backend)


# .item() of special values ------------------------------------------------------------------

def test_item_of_nan_inf_and_signed_zero_is_guarded_like_any_value(backend):
    def scaled(x):
        return x * x.item()

    c = tg.compile(scaled)
    for k, v in enumerate([NAN, NAN, INF, INF, -0.0, 0.0, -0.0]):
        x = tg.tensor(v)
        assert_same(c(x), scaled(x), f"call {k} ({v})")
    # NaN is NaN (one variant for two calls); 0.0 and -0.0 differ: x * v keeps v's sign
    assert c.stats["compiles"] == 4 and c.stats["cache_hits"] == 3, c.stats
    assert all("guard failed" in r for r in c.stats["retrace_reasons"]), c.stats


def test_a_guard_failure_says_what_it_is():
    from tracegrad.codegen.support import GuardFailure
    assert str(GuardFailure(2)) == ("guard 2 of a compiled variant failed: a value the trace "
                                    "read from a tensor (.item(), bool(), float(), .tolist()) "
                                    "is not what it was when traced")


def test_branch_on_nan_and_tolist_with_nan(backend):
    def branch(x):
        return x * 2 if x.item() else x - 1       # bool(nan) is True

    def listed(x):
        a, b = x.tolist()
        return x + (0.0 if a != a else a) + b

    for fn, args in ((branch, [NAN, NAN, 0.0]), (listed, [[NAN, 1.0], [NAN, 1.0]])):
        c = tg.compile(fn)
        for v in args:
            x = tg.tensor(v)
            assert_same(c(x), fn(x), fn.__name__)
        assert c.stats["compiles"] == len({repr(v) for v in args}), c.stats


# ops of two Python numbers --------------------------------------------------------------------

@pytest.mark.parametrize("op, a, b", [(op, a, b) for op in ("add", "mul", "sub", "div")
                                        for a, b in ((2.0, 3.0), (2, 3), (True, True), (1.0, 3))
                                        if (op, a) != ("sub", True)])   # an error in PyTorch
def test_ops_of_two_python_numbers(backend, op, a, b):
    f = getattr(tg, op)

    def program(x):
        k = f(a, b)
        return k, x * k

    both(program, lambda: tg.tensor([1.0, -2.0], requires_grad=True), grad=True)


def test_numpy_scalars_and_large_python_ints(backend):
    def program(x, i):
        return (x * np.float32(np.inf), x + np.float64(-0.0), x * np.float64(np.nan),
                i + 2 ** 62, i - (-2 ** 63 + 5), x ** INF, x ** -0.0)

    both(program, lambda: tg.tensor([1.0, -0.0, 2.0, -3.0]), lambda: tg.tensor([1, 2, -3, 0]))


def test_backward_of_a_negative_base_power_is_nan_as_eager(backend):
    def power(x):
        return ((-2.0) ** x).sum()

    both(power, lambda: tg.tensor([0.5, 2.0, -1.0], requires_grad=True), grad=True)


# zero-size shapes ----------------------------------------------------------------------------

EMPTY_MAKERS = {
    "zeros_like": lambda x: tg.zeros_like(x),
    "ones_like": lambda x: tg.ones_like(x),
    "full_like": lambda x: tg.full_like(x, -INF),
    "empty": lambda x: tg.empty((0, 5, 0)),
    "zeros": lambda x: tg.zeros(0, 5, 0, dtype=tg.int64),
    "eye_0_3": lambda x: tg.eye(0, 3),
    "eye_3_0": lambda x: tg.eye(3, 0),
    "tensor": lambda x: tg.tensor([], dtype=tg.float64).reshape(0, 5, 0),
}


@pytest.mark.parametrize("name", list(EMPTY_MAKERS))
def test_zero_size_constants_keep_every_dim(backend, name):
    both(lambda x: (EMPTY_MAKERS[name](x), x), lambda: tg.zeros((0, 5, 0)))


def test_empty_like_keeps_shape_and_dtype(backend):
    c = tg.compile(lambda x: tg.empty_like(x))
    out = c(tg.zeros((0, 5, 0), dtype=tg.float64))
    assert (out.shape, out.dtype) == ((0, 5, 0), tg.float64)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0,), (2, 0, 3)])
def test_kernels_over_zero_size_inputs(backend, shape):
    def program(x):
        y = x * 2 + 1
        return y, y.sum(-1), x.sum(), (x - 1).mean(0), tg.zeros_like(x) - x

    both(program, lambda: tg.zeros(shape, requires_grad=True), grad=True)


def test_cat_with_empty_tensors(backend):
    rng = np.random.default_rng(1)
    y0 = rng.standard_normal((2, 3))
    for empty in ((0, 3), (0,)):     # (0,): PyTorch's legacy empty, joins any rank
        both(lambda x, y: tg.cat([x, y, x]) * 2,
             lambda: tg.zeros(empty, requires_grad=True),
             lambda: tg.tensor(y0, requires_grad=True), grad=True)


@pytest.mark.parametrize("keep", [True, False])
def test_masked_select_of_a_zero_dim_tensor(backend, keep):
    """(Its result's size depends on the data: the graph may end there and run on eagerly.)"""
    both(lambda x, m: tg.masked_select(x * 2, m) * 3,
         lambda: tg.tensor(1.5, requires_grad=True), lambda: tg.tensor(keep), grad=True,
         one_variant=False)


# the literals themselves: C read back as bits, CUDA through nvcc -----------------------------

LITERALS = ([(v, tg.float32) for v in SPECIAL["float32"] + [1e300, -1e300, 0.1, 16777217.0]]
            + [(v, tg.float64) for v in SPECIAL["float64"] + [0.1, 1e-310]]
            + [(v, tg.int64) for v in SPECIAL["int64"]]
            + [(v, tg.int32) for v in SPECIAL["int32"]]
            + [(v, tg.uint8) for v in SPECIAL["uint8"]] + [(v, tg.int8) for v in SPECIAL["int8"]])
_C_TYPES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int32_t",
            "uint8": "uint8_t", "int8": "int8_t"}


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_c_literals_read_back_exactly(tmp_path):
    """Each literal the C language writes, compiled with the C tier's flags and read back as
    bits, is NumPy's value of that dtype (``np.float32(v)``: one rounding): NaN and its sign,
    infinities, -0.0, subnormals, the largest float, int64's minimum."""
    lang = cstyle.C()

    def render(v, dt):
        return cstyle._int_literal(v, dt) if not dt.is_floating_point else lang.literal(v, dt)
    lines = ["#include <math.h>", "#include <stdint.h>", "#include <stdio.h>", "",
             "int main(void) {"]
    for k, (v, dt) in enumerate(LITERALS):
        lines.append(f"  {{ const {_C_TYPES[dt.name]} v = {render(v, dt)}; "
                     f"fwrite(&v, sizeof v, 1, stdout); }}")
    lines += ["  return 0;", "}"]
    src, exe = tmp_path / "literals.c", tmp_path / "literals"
    src.write_text("\n".join(lines) + "\n")
    res = subprocess.run([CC, "-O2", "-std=c11", "-Wall", "-Werror", "-Wno-overflow", str(src),
                          "-o", str(exe)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = subprocess.run([str(exe)], capture_output=True, check=True).stdout
    with np.errstate(over="ignore"):
        want = b"".join(np.array(v, dtype=dt.np).tobytes() for v, dt in LITERALS)
    assert out == want, [(v, dt.name, render(v, dt)) for v, dt in LITERALS]


def test_c_literals_are_readable():
    lang = cstyle.C()
    assert [lang.literal(v, tg.float32) for v in (-INF, -0.0, 0.1, 1e-45, NAN)] == \
        ["(-(float)INFINITY)", "(-0.0f)", "0.1f", "1e-45f", "(float)NAN"]
    assert [cstyle._int_literal(v, tg.int64) for v in (2 ** 63 - 1, -2 ** 63, 7, -7)] == \
        ["9223372036854775807LL", "(-9223372036854775807LL - 1)", "7", "(-7)"]


def _special_program(x):
    mask = tg.full((4, 6), -INF, device=x.device).triu(1)
    y = (x + mask).softmax(-1) * -0.0 + tg.where(x > 0, x, NAN)
    return (tg.clamp(x, min=-INF, max=3.4028234663852886e38) * 1e-45, y.amax(-1),
            tg.maximum(x, tg.full_like(x, -0.0)))


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_cuda_source_with_special_literals_compiles_with_nvcc(tmp_path):
    c = tg.compile(_special_program, backend="numpy")
    x = tg.tensor(np.random.default_rng(2).standard_normal((4, 6)), dtype=tg.float32,
                  requires_grad=True)
    c(x).__getitem__(0).sum().backward()
    lang = cuda.CUDA()
    kernels = [k for v in c._variants for k in v.kernel_ir]
    sources = [lang.render_kernel(k) for k in kernels]
    text = "\n".join(sources)
    for lit in ("(-(float)INFINITY)", "(-0.0f)", "1e-45f", "(float)NAN", "3.4028235e+38f"):
        assert lit in text, lit
    src = tmp_path / "constants.cu"
    src.write_text(cuda.declarations(kernels) + "\n\n" + "\n\n".join(sources) + "\n")
    res = subprocess.run([NVCC, "-arch=sm_90", "--ptx", "-Xcicc", "-O0", str(src), "-o",
                          str(tmp_path / "constants.ptx")], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.mark.skipif(emulator.CXX is None, reason="g++ (C++20) is not installed")
def test_special_literals_on_the_cuda_tier(monkeypatch):
    """The CUDA tier's kernels, run on the CPU emulation of a GPU: eager's bits."""
    import fake_cupy
    fake_cupy.install(monkeypatch, n_devices=1)
    dev = tg.device("cuda", 0)
    x0 = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    x0[0, 0] = -0.0
    c = tg.compile(_special_program, backend="cuda")
    want = _special_program(tg.tensor(x0))
    got = c(tg.tensor(x0).to(dev))
    assert c._last.tier == "cuda" and c._last.cuda_kernels
    for k, (g, w) in enumerate(zip(got, want)):
        assert_same(g.cpu(), w, f"output {k}", exact=k != 1)
