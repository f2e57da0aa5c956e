"""The CUDA tier, checked without a GPU.

- The CUDA text of a few groups is pinned: an elementwise chain, a per-row reduction, a
  reduction over every element (its combine kernel too) and a kernel of dynamic sizes.
- Every kernel the tests lowered before this file ran (``cuda_emulation.collect``: the
  compile tests, the property test's programs) is compiled by nvcc, all in one go.
- Kernels run on the CPU through ``cuda_emulation/cuda_emu.h`` (a test double of a GPU:
  one OS thread a CUDA thread): each kernel of a set of programs against the NumPy tier's
  kernel on the same arrays, through the real launcher (``CudaKernel``). Whole compiled
  functions run on the emulation in ``test_cuda_compiled.py``, on the strict CuPy double.
- Without CuPy, ``backend="cuda"`` raises the device's error; tests that need a real GPU
  skip with the reason.
"""
import copy
import importlib
import importlib.util
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import cuda
from tracegrad.codegen.cuda_launch import CudaKernel, CudaModule
from tracegrad.symbolic import substitute

from cuda_emulation import collect, emulator

NVCC = shutil.which("nvcc")
device = importlib.import_module("tracegrad.device")    # the module (tracegrad.device: the class)
needs_gxx = pytest.mark.skipif(emulator.CXX is None, reason="g++ (C++20) is not installed")


def kernels_of(fn, *args, dynamic=None, grad=False):
    """The compiled function and its kernels (the backward's too with ``grad``)."""
    c = tg.compile(fn, backend="numpy", dynamic=dynamic)
    if grad:
        c(*args).sum().backward()
    else:
        with tg.no_grad():
            c(*args)
    return c, list(c.kernels)


# pinned text -------------------------------------------------------------------------------

def pinned(fn, *args, dynamic=None):
    _, (k,) = kernels_of(fn, *args, dynamic=dynamic)
    return cuda.CUDA().render_kernel(k)


def test_elementwise_text_is_pinned():
    def chain(x):
        return tg.exp(x) * 2 + x

    assert pinned(chain, tg.randn(8)) == textwrap.dedent("""\
        // fused0: exp mul add; one pass over [8], one thread an element
        extern "C" __global__ void forward_fused0(const float *__restrict__ x_, float *__restrict__ out_) {
          for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < 8; j += gridDim.x * blockDim.x) {
            const float x = x_[j];
            const float t0 = exp(x);
            const float t1 = t0 * 2.0f;
            const float out = t1 + x;
            out_[j] = out;
          }
        }""")


def test_per_row_reduction_text_is_pinned():
    """A block a row; a thread's two elements of the row kept in registers, so ``exp`` runs
    once an element."""
    def normalize(x):
        e = tg.exp(x)
        return e / e.sum(dim=1, keepdim=True)

    assert pinned(normalize, tg.randn(4, 300)) == textwrap.dedent("""\
        // fused0: exp sum div; one pass over [4,300], one block a row
        extern "C" __global__ void forward_fused0(const float *__restrict__ x_, float *__restrict__ out_) {
          __shared__ double tg_red_double[33];  // a block reduction's warps, then its result
          for (long long o = blockIdx.x; o < 4; o += gridDim.x) {
            const long long n = 300;
            float e__row[2];  // this thread's elements, in registers
            double t0_acc = 0.0;
            #pragma unroll
            for (int i = 0; i < 2; i++) {
              const long long j = threadIdx.x + i * 256;
              if (j >= n) break;
              const float x = x_[o * 300 + j];
              const float e_ = exp(x);
              e__row[i] = e_;
              t0_acc = t0_acc + (double)e_;
            }
            const float t0 = (float)tg_block_add_double(t0_acc, tg_red_double);
            #pragma unroll
            for (int i = 0; i < 2; i++) {
              const long long j = threadIdx.x + i * 256;
              if (j >= n) break;
              const float e_ = e__row[i];
              const float out = e_ / t0;
              out_[o * 300 + j] = out;
            }
          }
        }""")


def test_short_row_text_is_pinned():
    """Rows of 10: a group of 16 threads a row, two rows a warp, reductions by shuffles in
    the group; the group past the last row reads that row and stores nothing."""
    def lse(x):
        return tg.logsumexp(x, dim=1)

    assert pinned(lse, tg.randn(6, 10)) == textwrap.dedent("""\
        // fused0: amax stop_gradient isinf where sub exp sum log add; one pass over [6,10], 16 threads a row
        extern "C" __global__ void forward_fused0(const float *__restrict__ x_, float *__restrict__ t8_) {
          const int t = threadIdx.x % 16;  // this thread's place in its row
          for (long long o0 = blockIdx.x * 16 + threadIdx.x / 32 * 2; o0 < 6; o0 += gridDim.x * (long long)16) {
            const bool live = o0 + threadIdx.x % 32 / 16 < 6;
            const long long o = live ? o0 + threadIdx.x % 32 / 16 : 5;
            const long long n = live ? 10 : 0;
            float t0_acc = (-(float)INFINITY);
            #pragma unroll
            for (int i = 0; i < 1; i++) {
              const long long j = t + i * 16;
              if (j >= n) break;
              const float x = x_[o * 10 + j];
              t0_acc = (t0_acc > (float)x || isnan(t0_acc) ? t0_acc : (float)x);
            }
            const float t0 = (float)tg_group_maximum_float(t0_acc, 16);
            const float t1 = t0;
            const bool t2 = isinf(t1);
            const float t3 = (t2 ? 0.0f : t1);
            double t6_acc = 0.0;
            #pragma unroll
            for (int i = 0; i < 1; i++) {
              const long long j = t + i * 16;
              if (j >= n) break;
              const float x = x_[o * 10 + j];
              const float t4 = x - t3;
              const float t5 = exp(t4);
              t6_acc = t6_acc + (double)t5;
            }
            const float t6 = (float)tg_group_add_double(t6_acc, 16);
            const float t7 = log(t6);
            const float t8 = t7 + t3;
            if (live && t == 0) t8_[o * 1] = t8;
          }
        }""")


def test_reduction_over_every_element_text_is_pinned():
    def total(x):
        return (x * x).sum()

    assert pinned(total, tg.randn(1000, dtype=tg.float64)) == textwrap.dedent("""\
        // fused0: mul sum; one pass over [1000], one thread an element
        extern "C" __global__ void forward_fused0(const double *__restrict__ x_,
                                                  double *__restrict__ out_parts) {
          __shared__ double tg_red_double[33];  // a block reduction's warps, then its result
          double out_acc = 0.0;
          for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < 1000; j += gridDim.x * blockDim.x) {
            const double x = x_[j];
            const double t0 = x * x;
            out_acc = out_acc + (double)t0;
          }
          out_acc = tg_block_add_double(out_acc, tg_red_double);
          if (threadIdx.x == 0) out_parts[blockIdx.x] = out_acc;
        }

        // fused0's reductions over the rows: the blocks' parts, combined in a fixed order, a block a slot
        extern "C" __global__ void forward_fused0_combine(const double *__restrict__ out_parts,
                                                          double *__restrict__ out_,
                                                          const long long blocks) {
          __shared__ double tg_red_double[33];  // the block reduction's
          for (long long i = blockIdx.x; i < 1; i += gridDim.x) {
            double total = 0.0;
            for (long long b = threadIdx.x; b < blocks; b += blockDim.x) total = total + out_parts[b * 1 + i];
            total = tg_block_add_double(total, tg_red_double);
            if (threadIdx.x == 0) out_[i] = (double)total;
          }
        }""")


def test_dynamic_sizes_text_is_pinned():
    def rowsum(x, b):
        return (x * b).sum(dim=1)

    assert pinned(rowsum, tg.randn(5, 3), tg.randn(3), dynamic=True) == textwrap.dedent("""\
        // fused0: mul sum; one pass over [s0,s1], one block a row
        extern "C" __global__ void forward_fused0(const float *__restrict__ x_,
                                                  const float *__restrict__ b_, float *__restrict__ out_,
                                                  const long long s0, const long long s1) {
          __shared__ double tg_red_double[33];  // a block reduction's warps, then its result
          for (long long o = blockIdx.x; o < s0; o += gridDim.x) {
            const long long n = s1;
            double out_acc = 0.0;
            for (long long j = threadIdx.x; j < n; j += blockDim.x) {
              const float x = x_[o * s1 + j];
              const float b = b_[j];
              const float t0 = x * b;
              out_acc = out_acc + (double)t0;
            }
            const float out = (float)tg_block_add_double(out_acc, tg_red_double);
            if (threadIdx.x == 0) out_[o * 1] = out;
          }
        }""")


def test_launch_says_how_a_kernel_runs():
    _, (k,) = kernels_of(lambda x: (x * 2).sum(dim=0), tg.randn(3000, 5))
    _, launch = cuda.CUDA().render(k)
    assert (launch.kind, launch.combine) == ("rows", "forward_fused0_combine")
    # rows of 5: a group of 8 threads a row, 32 rows a block, a part set a group
    assert (launch.group, launch.grid({}), launch.block({}), launch.counts({})) == (8, 94, 256, [5])
    assert launch.part_sets({}) == 94 * 32
    # rows of 4 but 64 slots (a batch norm's per channel sums): a block a row, as many part
    # sets as blocks, combined a block a tile of 32 slots
    _, (k,) = kernels_of(lambda x: (x * 2).sum(dim=(0, 2, 3)), tg.randn(8, 64, 2, 2))
    _, launch = cuda.CUDA().render(k)
    assert (launch.group, launch.block({}), launch.counts({})) == (None, 32, [64])
    assert (launch.part_sets({}), launch.combine_grid({})) == (launch.grid({}), 2)
    _, (k,) = kernels_of(lambda x: (x * 2).sum(dim=1), tg.randn(4, 3000), dynamic=True)
    _, launch = cuda.CUDA().render(k)
    assert (launch.kind, launch.combine, launch.symbols) == ("rows", None, ("s0", "s1"))
    assert (launch.grid({"s0": 7, "s1": 40}), launch.block({"s0": 7, "s1": 40})) == (7, 64)


# nvcc ----------------------------------------------------------------------------------------

@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_every_collected_kernel_compiles_with_nvcc(tmp_path):
    """Every kernel lowered so far in this session, CUDA-rendered, compiled by nvcc at once:
    front end and NVVM to PTX for sm_90 (``-Xcicc -O0`` keeps 3000 kernels to seconds;
    ``test_renderers`` builds machine code for a smaller set). Run alone, the kernels of
    this file's programs are the set."""
    if len(collect.sources) < 20:
        for name in PROGRAMS:
            for dt in (tg.float32, tg.float64):
                program_kernels(name, dt)
    assert not collect.errors, "the CUDA renderer failed on:\n" + "\n".join(
        f"{ir}\n{tb}" for ir, tb in collect.errors[:3])
    src = tmp_path / "collected.cu"
    src.write_text(collect.translation_unit())
    res = subprocess.run([NVCC, "-arch=sm_90", "--ptx", "-Xcicc", "-O0", str(src),
                          "-o", str(tmp_path / "collected.ptx")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-6000:]
    assert len(collect.sources) >= 20


# kernels on the emulation, against the NumPy tier ----------------------------------------

def _chain(x, y):
    return tg.exp(tg.tanh(x * y + 1) - y) * 0.5 + x ** 2


def _softmax(x):
    return tg.softmax(x, dim=1) * x


def _total(x):
    return (tg.tanh(x) ** 2).sum()


def _colsum(x, b):
    return (x * b + 1).sum(dim=0)


def _rowmax_sum(x):
    return x.amax(dim=1).sum()


def _centered(x):
    return ((x - x.mean(dim=1, keepdim=True)) ** 2).sum()


def _chansum(x, b):        # a batch norm's: per channel, over the batch and the positions
    return (x * b).sum(dim=(0, 2)) * 2


def _rowsum(x, b):
    return (x * b).sum(dim=1)


# name -> (function, argument shapes, dynamic)
PROGRAMS = {"elementwise": (_chain, [(5, 3), (3,)], None),
            "softmax": (_softmax, [(37, 50)], None),
            "softmax_long": (_softmax, [(5, 700)], None),   # 3 elements a thread, in registers
            "total": (_total, [(3000,)], None),
            "colsum": (_colsum, [(40, 7), (7,)], None),     # a block a column combines
            "colsum_wide": (_colsum, [(12, 70), (70,)], None),  # a thread a column combines
            "rowmax_sum": (_rowmax_sum, [(20, 9)], None),
            "chansum": (_chansum, [(6, 40, 3), (40, 1)], None),     # rows of 3, 40 slots
            "centered": (_centered, [(6, 70)], None),
            "dynamic": (_rowsum, [(9, 70), (70,)], True)}


def program_kernels(name, dt):
    """``[(kernel, variant)]`` of program ``name`` in dtype ``dt``, forward and backward."""
    fn, shapes, dynamic = PROGRAMS[name]
    rng = np.random.default_rng(0)
    args = [tg.tensor(rng.uniform(0.5, 1.5, s), dtype=dt, requires_grad=True) for s in shapes]
    c, kernels = kernels_of(fn, *args, dynamic=dynamic, grad=True)
    return [(k, c._last) for k in kernels]


@pytest.fixture(scope="module")
def emulated():
    """Every program's kernels in one module built for the emulation:
    ``{program: [(kernel, variant, launch)]}`` and the ``CudaModule``."""
    lang, cases, parts, kernels = cuda.CUDA(), {}, [], []
    for name in PROGRAMS:
        for dt in (tg.float32, tg.float64):
            for k, v in program_kernels(name, dt):
                renamed = copy.copy(k)
                renamed.name = f"{name}_{dt.name}_{k.name}"
                src, launch = lang.render(renamed)
                parts.append(src)
                kernels.append(k)
                cases.setdefault(name, []).append((k, v, launch))
    source = cuda.declarations(kernels) + "\n" + "\n\n".join(parts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(device, "cupy", emulator.fake_cupy)
        module = CudaModule(source)
    return cases, module


def _sizes(v):
    return {str(size): int(size) for _, _, size in v.sizes.sym_dims} if v.sizes else {}


def _run_both(k, v, launch, module):
    """The kernel's outputs and results by the NumPy tier and by the emulated CUDA tier."""
    sizes = _sizes(v)
    rng = np.random.default_rng(1)
    ins = [rng.uniform(0.5, 1.5, substitute(i.value.shape, sizes)).astype(i.dtype.np)
           for i in k.inputs]
    results = []
    for run in ("numpy", "cuda"):
        outs = [np.full(substitute(op.value.shape, sizes), np.nan, op.dtype.np)
                for op in k.outputs]
        workspace = v.namespace[f"_{k.name.split('_')[0]}_workspace"]
        ws = workspace.take(tuple(sizes.values()) if sizes else None)
        if run == "numpy":
            parts = v.namespace[k.name](*ins, *outs, ws)
        else:
            dts = [i.dtype.np for i in k.inputs] + [op.dtype.np for op in k.outputs]
            partials = [(op.value.shape, np.dtype(op.dtype.np)) for op in k.partials]
            parts = CudaKernel(module, launch, dts, partials, len(k.inputs))(*ins, *outs, ws)
        workspace.give(ws)
        results.append([np.asarray(a) for a in list(outs) + list(parts)])
    return results


@needs_gxx
@pytest.mark.parametrize("max_blocks", [cuda.MAX_BLOCKS, 3])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_emulated_kernels_match_the_numpy_tier(emulated, name, max_blocks, monkeypatch):
    """Each kernel of the program, float32 and float64, forward and backward; with 3 blocks
    at most, every block strides over several rows or elements and combines its parts."""
    monkeypatch.setattr(cuda, "MAX_BLOCKS", max_blocks)
    cases, module = emulated
    for k, v, launch in cases[name]:
        want, got = _run_both(k, v, launch, module)
        rtol = 1e-5 if k.inputs[0].dtype is tg.float32 else 1e-12
        for w, g, what in zip(want, got, [op.name for op in k.outputs + k.partials]):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol,
                                       err_msg=f"{name}: {k.name}'s {what}\n{k}")
    kinds = {launch.kind for _, _, launch in cases[name]}
    assert kinds <= {"elements", "rows"}


# (whole compiled functions on the emulation: test_cuda_compiled.py, on the strict CuPy
# double; the real-GPU tests below run this program)

def _mlp(x, w, b):
    h = tg.tanh(x @ w + b)
    return (tg.softmax(h, dim=1) * h).sum()


def _mlp_args(n, dt=tg.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [tg.tensor(rng.standard_normal(s), dtype=dt, requires_grad=rg)
            for s, rg in (((n, 5), False), ((5, 4), True), ((4,), True))]


# errors --------------------------------------------------------------------------------------

def test_cuda_backend_without_cupy_raises_the_device_error():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed")
    c = tg.compile(lambda x: x * 2, backend="cuda")
    with pytest.raises(RuntimeError, match=r"compile\(backend='cuda'\).*CuPy is not installed") \
            as err:
        c(tg.ones(3))
    assert "(at " in str(err.value) and "c(tg.ones(3))" in str(err.value)    # the user's line


# a real GPU ----------------------------------------------------------------------------------

@pytest.fixture
def gpu():
    pytest.importorskip("cupy", reason="the CUDA tier's runtime needs CuPy")
    if not device.is_available():
        pytest.skip("CuPy is installed but no GPU is available")
    return device.cupy()


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_matches_eager_on_a_gpu(gpu, dynamic):
    c = tg.compile(_mlp, backend="cuda", dynamic=dynamic)
    for n in (6, 9):
        args = _mlp_args(n)
        dev = [a.detach().cuda().requires_grad_(a.requires_grad) for a in args]
        got = c(*dev)
        got.backward()
        want = _mlp(*args)
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for d, a in zip(dev[1:], args[1:]):
            np.testing.assert_allclose(d.grad.cpu().numpy(), a.grad.numpy(), rtol=1e-5,
                                       atol=1e-6)
    assert c._last.tier == "cuda" and "__global__" in c.code


def test_cpu_and_gpu_variants_coexist_on_a_gpu(gpu):
    c = tg.compile(_mlp, backend="auto")
    args = _mlp_args(6)
    want = c(*args).item()
    dev = [a.detach().cuda() for a in args]
    assert abs(c(*dev).item() - want) < 1e-5
    assert {v.device for v in c._variants} == {"cpu", "cuda"}
