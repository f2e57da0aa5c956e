"""The kernel IR, the C renderer and the tiers (NumPy at once, C once built).

The IR and the C text are pinned for a small group; the C tier is checked against
eager for NaN/inf/-0.0, 0-d and empty tensors, ints and bools, reductions at 10M
elements; the on-disk cache across processes, a missing compiler, the switch from
NumPy to C in the middle of training, and the thread setting.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import build
from tracegrad.runtime import tiers

from tolerances import close, ulps

try:
    build.toolchain()
except build.BuildError as e:       # pragma: no cover - machines without a C compiler
    pytest.skip(f"no C compiler: {e}", allow_module_level=True)


def _compiled(fn, backend, *args, grad=False):
    c = tg.compile(fn, backend=backend)
    if grad:
        out = c(*args)
        outs = out if isinstance(out, tuple) else (out,)
        sum(o.sum() for o in outs).backward()
        return c, out
    with tg.no_grad():
        return c, c(*args)


# the IR and the C text, pinned ----------------------------------------------------------------

def test_kernel_ir_is_printed_with_index_maps_casts_and_reductions():
    def f(x, b, i):
        y = tg.tanh(x * b + i)
        return y.sum(0)

    c, _ = _compiled(f, "numpy", tg.ones(4, 3), tg.ones(3), tg.ones(4, 1, dtype=tg.int64))
    line = f.__code__.co_firstlineno
    assert str(c.kernels) == textwrap.dedent(f"""\
        kernel forward_fused0 [4,3] {{
          in x: f32[4,3] strides (3, 1)
          in b: f32[3] strides (0, 1)
          in i: i64[4,1] strides (1, 0)
          t0: f32 = mul x b                                 # test_kernels.py:{line + 1}
          i_float32: f32 = convert i  device=None dtype=float32 src_device=None  # test_kernels.py:{line + 1}
          t1: f32 = add t0 i_float32                        # test_kernels.py:{line + 1}
          y: f32 = tanh t1                                  # test_kernels.py:{line + 1}
          out: f32[3] = sum y  axes=(0,) acc=f64 combine=add  # test_kernels.py:{line + 2}
          partial (out)
        }}
          tier: numpy""")


def test_c_text_is_pinned():
    def f(x, b):
        return tg.relu(x * b - 1)

    c, _ = _compiled(f, "c", tg.ones(4, 3), tg.ones(3))
    src = c._last.c_source
    fn = src[src.index("// fused0"):]
    line = f.__code__.co_firstlineno
    assert fn == textwrap.dedent(f"""\
        // fused0: mul sub relu; one pass over [4,3]
        void forward_fused0(const float *restrict x_, const float *restrict b_, float *restrict out_,
                            int nt) {{
          {{  // one thread: 12 elements, fewer than 524288
            for (int64_t o = 0; o < 4; o++) {{
              const int64_t n = 3;
              #pragma omp simd
              for (int64_t j = 0; j < n; j++) {{
                const float x = x_[o * 3 + j];
                const float b = b_[j];
                // test_kernels.py:{line + 1}: return tg.relu(x * b - 1)
                const float t0 = x * b;
                const float t1 = t0 - 1.0f;
                const float out = (t1 > 0 || isnan(t1) ? t1 : 0);
                out_[o * 3 + j] = out;
              }}
            }}
          }}
        }}
        """)
    assert "#pragma omp declare simd notinbranch\nfloat (tanhf)(float);" in src
    assert "-ffast-math" not in src and "-ffinite-math-only" not in src


# semantics on the C tier ----------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0, 1e-30, 3e38, -3e38],
                   np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_inf_and_negative_zero_propagate_as_numpy(dtype):
    x = SPECIAL.astype(dtype)
    y = np.roll(x, 3)

    def f(x, y):
        return (tg.relu(x) + 0, tg.maximum(x, y), tg.minimum(x, y), tg.sign(x),
                tg.clamp(x, -1.0, 1.0), tg.where(x > y, x, y), tg.sigmoid(x), tg.exp(x),
                tg.tanh(x), tg.log(tg.abs(x)), x * y, x / y, -x, tg.sqrt(x), x == y,
                tg.isnan(x * y), tg.logical_not(x > 0), tg.erf(x), tg.floor(x) - x, x ** 0.5,
                x ** 2, x ** 3, x ** 1.5)

    with tg.no_grad():
        want = f(tg.tensor(x), tg.tensor(y))
    c, got = _compiled(f, "c", tg.tensor(x), tg.tensor(y))
    assert c._last.c_kernels, str(c.kernels)
    # each output is at most 4 roundings (a sigmoid's exp, add and division), which the C
    # library's vector exp/tanh/log/erf (libmvec: within 4 ulps) and NumPy's round apart
    rtol = ulps(dtype, n_ops=4)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = g.numpy(), w.numpy()
        assert g.dtype == w.dtype, k
        np.testing.assert_allclose(g, w, rtol=rtol, atol=0, err_msg=f"output {k}")
        zeros = w == 0
        assert (np.signbit(g[zeros]) == np.signbit(w[zeros])).all(), f"output {k}: sign of 0"


@pytest.mark.parametrize("n", range(1, 41))
def test_float32_round_trips_round_in_every_position(n):
    """Each element, vector body and remainder alike, is rounded to float32 and back
    (gcc 12's SLP vectorizer dropped the round trip in the remainder)."""
    x = np.random.default_rng(n).standard_normal(n)
    c, got = _compiled(lambda x: x.float().double() * 1.0, "c", tg.tensor(x))
    assert c._last.c_kernels
    np.testing.assert_array_equal(got.numpy(), x.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_min_reductions_propagate_nan(dtype):
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    x[1, 2] = np.nan

    def f(x):
        return (x * 2).amax(-1), (x + 1).amin(0), (x - 1).amax()

    with tg.no_grad():
        want = f(tg.tensor(x))
    c, got = _compiled(f, "c", tg.tensor(x))
    for g, w in zip(got, want):     # small integers doubled or shifted, and NaN: exact
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_float32_sums_of_10m_elements_stay_within_1e6_of_numpy():
    x = np.random.default_rng(0).standard_normal(10_000_000, dtype=np.float32) + 0.5

    def f(x):
        return (x * 1.5).sum(), (x * x).mean(), (x * 0.5).amax()

    c, got = _compiled(f, "c", tg.tensor(x))
    assert c._last.c_kernels
    want = [np.sum(x * np.float32(1.5)), np.mean(x * x), np.max(x * np.float32(0.5))]
    for g, w in zip(got, want):
        assert abs(float(g) - float(w)) <= 1e-6 * abs(float(w))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (1,)])
def test_zero_d_and_empty_tensors(shape):
    x = np.full(shape, 0.5, np.float32)

    def f(x, y):
        return tg.exp(x * y + 1) * 2, (x * y).sum()

    for backend in ("numpy", "c"):
        c, got = _compiled(f, backend, tg.tensor(x, requires_grad=True),
                           tg.tensor(x, requires_grad=True), grad=True)
        want = f(tg.tensor(x), tg.tensor(x))
        for g, w in zip(got, want):     # a product, an exp (libmvec's in C), a product
            np.testing.assert_allclose(g.detach().numpy(), w.numpy(), rtol=ulps("float32", 4))


def test_int_groups_stay_on_numpy_and_bool_groups_run_in_c():
    def ints(i, j):
        return (i * j + 3) // 2, (i > j).sum()

    def bools(x):
        return (x > 0) & (x < 1) | tg.logical_not(x * 2 > 3), ~(x > 0.5)

    i = tg.arange(12).reshape(3, 4)
    x = tg.linspace(-1, 2, 12)
    for fn, args, tier in ((ints, (i, i.flip(0)), "numpy"), (bools, (x,), "c")):
        c, got = _compiled(fn, "c", *args)
        with tg.no_grad():
            want = fn(*args)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert str(c.kernels).count(f"tier: {tier}") == len(c.kernels), str(c.kernels)


# the tiers --------------------------------------------------------------------------------

def _mlp_losses(backend, steps, switch_after=None, gate=None):
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(8, 32), tg.nn.GELU(), tg.nn.Linear(32, 1))
    opt = tg.optim.SGD(model.parameters(), lr=0.05)
    x = tg.randn(64, 8)
    y = (x[:, :1] * 2).tanh()
    step = tg.compile(lambda x, y: ((model(x) - y) ** 2).mean(), backend=backend) \
        if backend else (lambda x, y: ((model(x) - y) ** 2).mean())
    losses, tiers_seen = [], []
    for k in range(steps):
        opt.zero_grad()
        loss = step(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if backend:
            tiers_seen.append(step._last.tier)
            if k == switch_after:
                gate.set()              # the build may finish now: the next step runs C
                tiers.wait(step._last)
    return losses, tiers_seen


def test_switch_from_numpy_to_c_in_the_middle_of_training_gives_the_same_losses(
        monkeypatch, tmp_path):
    """The background build is held until step 3, so steps 0-3 run NumPy and 4-11 run C."""
    import threading
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))      # nothing cached yet
    gate, real = threading.Event(), build.build

    def held(source, name, **kw):
        assert gate.wait(60)
        return real(source, name, **kw)
    monkeypatch.setattr(build, "build", held)
    eager, _ = _mlp_losses(None, 12)
    auto, seen = _mlp_losses("auto", 12, switch_after=3, gate=gate)
    assert seen == ["numpy"] * 4 + ["c"] * 8, seen
    np.testing.assert_allclose(auto, eager, rtol=1e-5)


def test_a_warm_cache_runs_c_from_the_first_call(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    fn = lambda x: (tg.tanh(x * 3) - x).sum()      # noqa: E731
    first = tg.compile(fn, backend="c")
    first(tg.ones(4))
    again = tg.compile(fn, backend="auto")          # with the library on disk
    again(tg.ones(4))
    assert again._last.tier == "c"


def test_no_compiler_keeps_numpy_with_one_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiers, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for shift in (1.0, 2.0):     # two functions, one warning
            c = tg.compile(lambda x: (tg.tanh(x) * shift).sum(), backend="c")
            assert c(tg.ones(5)).item() == pytest.approx(5 * np.tanh(1.0) * shift, rel=1e-6)
            assert c._last.tier == "numpy"
    msgs = [str(w.message) for w in caught if "C tier" in str(w.message)]
    assert len(msgs) == 1 and "/nonexistent/cc" in msgs[0], msgs


_CHILD = """
import os, sys, tracegrad as tg
from tracegrad.codegen import build
c = tg.compile(lambda x: (tg.sigmoid(x * 3) - x).sum(), backend="c")
print(c(tg.linspace(-1, 1, 100)).item(), build.stats["compiled"], c._last.tier)
"""


def test_a_second_process_loads_the_kernels_from_the_cache(tmp_path):
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    (v1, n1, t1), (v2, n2, t2) = (r.stdout.split() for r in runs)
    assert (n1, n2, t1, t2) == ("1", "0", "c", "c") and v1 == v2


_THREADS = """
import os, tracegrad as tg
def threads():
    return len(os.listdir("/proc/self/task"))
c = tg.compile(lambda x: (tg.tanh(x) * x).sum(), backend="c")
x = tg.randn(1 << 20)
base = threads()
tg.set_num_threads(1)
c(x)
one = threads()
tg.set_num_threads(2)
c(x)
print(one - base, threads() - base, tg.get_num_threads())
"""


def test_set_num_threads_governs_the_c_kernels(tmp_path):
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _THREADS], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1", "2"]


def test_dump_writes_the_c_source(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_DUMP", str(tmp_path))
    c, _ = _compiled(lambda x: tg.exp(x * 2).sum(), "c", tg.ones(3))
    files = os.listdir(tmp_path)
    assert any(f.endswith(".c") for f in files) and any(f.endswith(".py") for f in files)
    assert "/* ---- the C tier ---- */" in c.code and "void forward_fused0(" in c.code
    assert "kernels: 1 of 1 on the C tier" in c.explain()


def test_bad_backend_names_the_choices():
    with pytest.raises(ValueError, match="'numpy', 'c'"):
        tg.compile(lambda x: x, backend="tpu")


def test_ir_values_are_named_when_built_and_never_renamed():
    from tracegrad.ir import Value
    from tracegrad.ops.core import Aval
    v = Value(Aval((2,), tg.float32), "h")
    with pytest.raises(AttributeError, match="immutable"):
        v.name = "g"

    @tg.compile(backend="numpy")
    def f(x):
        hidden = tg.tanh(x)
        return hidden.sum()

    f(tg.ones(3, requires_grad=True)).backward()
    for text in (f.code, f.graph, f.explain()):     # one naming scheme: hidden, d_hidden, out
        assert "hidden" in text
    assert "d_x" in f.code and "d_x" in f.graph and "d_out" in f.graph


# values computed twice ---------------------------------------------------------------------

def test_a_value_compared_with_its_row_max_is_computed_once_however_long_the_row():
    """exp's vector and scalar forms differ in the last bit: recomputed in a later loop,
    exp(x*b) would not equal its own max."""
    rng = np.random.default_rng(0)
    x, b = tg.tensor(rng.standard_normal((8, 70001))), tg.tensor(rng.standard_normal(70001))

    def fn(x, b):
        e = (x * b).exp()
        return (e == e.amax(-1, keepdim=True)).to(x.dtype).sum(-1)

    c, got = _compiled(fn, "c", x, b)
    assert c._last.c_kernels
    np.testing.assert_array_equal(got.numpy(), np.ones(8))


@pytest.mark.parametrize("shape", [(64, 33), (4, 70001)])
def test_amax_gradients_read_the_forwards_values_not_recomputed_ones(shape):
    x0 = np.random.default_rng(0).standard_normal(shape)
    for backend in ("c", "numpy"):
        f = tg.compile(lambda x: x.exp().amax(-1), backend=backend)
        x = tg.tensor(x0, requires_grad=True)
        f(x).sum().backward()
        want = tg.tensor(x0, requires_grad=True)
        want.exp().amax(-1).sum().backward()
        # the gradient is exp(x) at the max: C's vector exp against NumPy's
        np.testing.assert_allclose(x.grad.numpy(), want.grad.numpy(), rtol=ulps("float64", 4))
        assert (np.count_nonzero(x.grad.numpy(), axis=-1) == 1).all()


def test_amax_over_a_size_one_axis_and_mixed_tiers_give_eagers_gradients():
    rng = np.random.default_rng(0)
    cases = [((4, 2, 1), (1, 2, 1), -1), ((2, 3, 4, 5), (5,), 3)]
    for xs, bs, axis in cases:
        def fn(x, b):
            y = (x * b).tanh() + b
            return (y - y.amax(axis, keepdim=True)).exp().sum(axis), y * 2
        x0, b0 = rng.standard_normal(xs), rng.standard_normal(bs)
        ins = [tg.tensor(x0, requires_grad=True), tg.tensor(b0, requires_grad=True)]
        ref = [tg.tensor(x0, requires_grad=True), tg.tensor(b0, requires_grad=True)]
        c = tg.compile(fn, backend="c")
        sum(o.sum() for o in c(*ins)).backward()
        sum(o.sum() for o in fn(*ref)).backward()
        for a, w in zip(ins, ref):
            assert np.isfinite(a.grad.numpy()).all()
            # a tanh, an exp, products and sums over at most 5: about 16 roundings apart
            np.testing.assert_allclose(a.grad.numpy(), w.grad.numpy(),
                                       **close("float64", n_ops=16, scale=4))


def test_a_row_loop_reads_back_what_an_earlier_loop_wrote():
    """Softmax over rows: the sum's loop computes exp and writes it (an output the backward
    saves), so the division's loop reads it back instead of computing exp again; on the C
    tier and the CUDA tier alike (one exp per element, not two)."""
    from tracegrad.codegen import cuda
    from tracegrad.codegen.numpy import site_comment

    def f(x):
        return tg.softmax(x * 2.0, -1)

    x = tg.randn(6, 40, requires_grad=True)
    c, out = _compiled(f, "c", x, grad=True)
    np.testing.assert_allclose(out.detach().numpy(), tg.softmax(x * 2.0, -1).detach().numpy(),
                               rtol=1e-6, atol=1e-7)
    v = c._last
    row = next(k for k in v.kernel_ir if "exp" in k.op_names())
    c_src = v.c_source[v.c_source.index(f"void {row.name}("):]
    c_src = c_src[:c_src.index("\n}\n")]
    cuda_src, _ = cuda.CUDA().render(row, site_comment)
    for src in (c_src, cuda_src):
        assert src.count("exp(") + src.count("expf(") == 1, src
