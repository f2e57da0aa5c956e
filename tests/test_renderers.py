"""The C-like renderers: every elementwise primitive's one C expression, as the C and the
CUDA languages render it, compiles (gcc; nvcc where installed, no GPU needed); the CUDA
walk's text is pinned, and the CUDA kernels of fused programs (their reductions and
combine kernels included) compile to machine code; sigmoid's C form is checked at its edges. ``test_cuda_codegen`` pins more CUDA
text, compiles every kernel the tests lower, and runs kernels on an emulation."""
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import dtypes
from tracegrad.codegen import cstyle, cuda
from tracegrad.codegen.kernel import Op
from tracegrad.ops import PRIMITIVES

PARAMS = {"pow_scalar": {"exponent": 2.5}, "clamp": {"min": -1.0, "max": 1.0},
          "round": {"decimals": 0}, "convert": {"dtype": dtypes.float32, "device": None,
                                                "src_device": None}}
BOOL_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_not"}
NVCC = shutil.which("nvcc")


def elementwise():
    return sorted(n for n, p in PRIMITIVES.items() if p.kind == "elementwise")


def test_every_elementwise_primitive_declares_its_forms():
    for name in elementwise():
        prim = PRIMITIVES[name]
        assert prim.np_template and prim.c_template and prim.cuda_template, name
        # a kernel computes it by its np_out calls, or by its expression stored into a buffer
        assert prim.np_out or prim.np_template, name


def expression_source(lang, ctype, cpp):
    """One function per elementwise primitive and dtype, computing its expression."""
    parts = []
    for name in elementwise():
        prim = PRIMITIVES[name]
        for dt in ((dtypes.bool,) if name in BOOL_ONLY else (dtypes.float32, dtypes.float64)):
            t = lang.ctype(dt)
            args = [f"a{i}" for i in range(len(prim.args))]
            types = ["bool" if (name == "where" and i == 0) else t for i in range(len(args))]
            op = Op("r", name, args, PARAMS.get(name, {}), dt, ())
            expr = lang.code_for_op(op, args)
            sig = ", ".join(f"{ty} {a}" for ty, a in zip(types, args))
            head = f'extern "C" __device__ {t}' if cpp else t
            parts.append(f"{head} f_{name}_{t}({sig}) {{ return {expr}; }}")
    return ctype + "\n".join(parts) + "\n"


def test_every_c_expression_compiles_with_the_system_compiler(tmp_path):
    from tracegrad.codegen import build
    try:
        cc = build.toolchain()[0]
    except build.BuildError as e:
        pytest.skip(str(e))
    src = tmp_path / "exprs.c"
    src.write_text(expression_source(cstyle.C(), "#include <stdbool.h>\n#include <tgmath.h>\n",
                                     False))
    res = subprocess.run([cc, "-std=c11", "-c", str(src), "-o", str(tmp_path / "e.o")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_every_cuda_expression_compiles_with_nvcc(tmp_path):
    src = tmp_path / "exprs.cu"
    src.write_text(expression_source(cuda.CUDA(), "#include <math.h>\n", True))
    res = subprocess.run([NVCC, "-c", str(src), "-o", str(tmp_path / "e.o")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]


def _kernels(fn, *args):
    c = tg.compile(fn, backend="numpy")
    out = c(*args)
    if out.requires_grad:
        out.sum().backward()
    return c.kernels


def test_cuda_text_is_pinned():
    def f(x, b):
        return tg.sigmoid(x * b) - 1

    with tg.no_grad():
        k = _kernels(f, tg.ones(4, 3), tg.ones(3))[0]
    line = f.__code__.co_firstlineno
    src = cuda.CUDA().render_kernel(k, lambda s: s.rsplit("/", 1)[-1])
    assert src == textwrap.dedent(f"""\
        // fused0: mul sigmoid sub; one pass over [4,3], one thread an element
        extern "C" __global__ void forward_fused0(const float *__restrict__ x_,
                                                  const float *__restrict__ b_, float *__restrict__ out_) {{
          for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < 12; e += gridDim.x * blockDim.x) {{
            const int o = e / 3, j = e % 3;
            const float x = x_[o * 3 + j];
            const float b = b_[j];
            // test_renderers.py:{line + 1}
            const float t0 = x * b;
            const float t1 = (t0 >= 0 ? 1 / (1 + exp(-t0)) : exp(t0) / (1 + exp(t0)));
            const float out = t1 - 1.0f;
            out_[o * 3 + j] = out;
          }}
        }}""")


def test_c_sigmoid_reads_one_exp_and_keeps_its_values():
    """The C form of sigmoid: both sides of its branch read exp(-|x|), one exp a vector where
    exp(-x) and exp(x) were two, with the values of both sides as before at the edges."""
    def f(x, b):
        return tg.sigmoid(x * b)

    with tg.no_grad():
        k = _kernels(f, tg.ones(4, 3), tg.ones(3))[0]
    src = cstyle.C().render_kernel(k, lambda s: "")
    assert "(t0 >= 0 ? 1 / (1 + exp(-fabs(t0))) : exp(-fabs(t0)) / (1 + exp(-fabs(t0))))" in src
    x = np.array([-0.0, 0.0, 1e-8, -1e-8, 3.5, -3.5, 80.0, -80.0, np.inf, -np.inf, np.nan],
                 np.float32)
    got = tg.compile(f, backend="c")(tg.tensor(x), tg.ones(11))._data
    e = np.exp(-np.abs(x.astype(np.float64)))
    want = np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(np.float32)
    # a vector expf's error (glibc's libmvec: within 4 ulp) and the division's rounding
    np.testing.assert_allclose(got, want, rtol=5 * np.finfo(np.float32).eps, atol=0)
    assert got[0] == 0.5 and got[8] == 1 and got[9] == 0 and np.isnan(got[10])


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_cuda_kernels_of_fused_programs_compile_with_nvcc(tmp_path):
    def chain(x, y):
        return tg.exp(tg.tanh(x * y + 1) - y) * 0.5 + x ** 2

    def mixed(x, y):
        return tg.relu(x - y) + tg.where(x > 0, x, y * 3) + tg.erf(x) * tg.clamp(y, -1, 1)
    lang, parts, kernels = cuda.CUDA(), [], []
    for fn in (chain, mixed):
        for dt in (tg.float32, tg.float64):
            x = tg.randn(5, 3, dtype=dt, requires_grad=True)
            y = tg.randn(3, dtype=dt, requires_grad=True)
            for k in _kernels(fn, x, y):       # y's gradient reduces over the rows
                kernels.append(k)
                parts.append(lang.render_kernel(k).replace(
                    f"void {k.name}", f"void {k.name}_{fn.__name__}_{dt.name}"))
    assert len(parts) >= 8 and any("_combine(" in p for p in parts)
    src = tmp_path / "kernels.cu"
    src.write_text(cuda.declarations(kernels) + "\n\n".join(parts))
    res = subprocess.run([NVCC, "-c", str(src), "-o", str(tmp_path / "k.o")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
