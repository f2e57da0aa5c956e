"""The C tier's loops over a relu's mask are vectorized by gcc.

A compiled relu stores its mask (``x <= 0``, a bool array) and its backward reads it in a
``where`` followed by a double-accumulated ``sum``. gcc 12 left both loops scalar (a
``_Bool`` array beside floats, a comparison kept as a branch): the C kernels of LeNet's
training step ran 10x slower than NumPy's ufuncs, and the compiled model behind eager.
"""
import re
import subprocess

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import build
from tracegrad.runtime import tiers


def _c_source(monkeypatch):
    monkeypatch.setenv("TRACEGRAD_BACKEND", "c")
    conv = tg.nn.Conv2d(2, 3, 3)

    def f(x):
        return tg.relu(conv(x)).sum()
    cf = tg.compile(f)
    x = tg.tensor(np.random.default_rng(0).standard_normal((4, 2, 16, 16), dtype=np.float32))
    cf(x).backward()
    variant = cf._last
    tiers.wait(variant)
    if not getattr(variant, "c_source", None):
        pytest.skip("no C tier built here")
    assert conv.weight.grad is not None
    return variant.c_source


def _vectorized_lines(source, tmp_path):
    try:
        cc, version, flags = build.toolchain()
    except build.BuildError as exc:
        pytest.skip(str(exc))
    if "clang" in version.lower():
        pytest.skip(f"the vectorizer report read here is gcc's ({version})")
    src = tmp_path / "k.c"
    src.write_text(source)
    out = subprocess.run([cc, *flags, "-fopt-info-vec-optimized", str(src), "-o",
                          str(tmp_path / "k.so")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return {int(m) for m in re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized",
                                       out.stderr)}


def test_every_inner_loop_of_a_relu_mask_is_vectorized(tmp_path, monkeypatch):
    source = _c_source(monkeypatch)
    lines = source.splitlines()
    # the contiguous inner loops (omp simd): the relu's mask stored, then read by where+sum
    inner = [i + 1 for i, line in enumerate(lines) if "for (int64_t j = 0; j < n" in line]
    assert len(inner) >= 2
    vectorized = _vectorized_lines(source, tmp_path)
    for n in inner:     # gcc names the loop's line or its first statement's
        assert vectorized & {n, n + 1}, f"loop at line {n} left scalar:\n" + "\n".join(
            lines[n - 3:n + 8])
