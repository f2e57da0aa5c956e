"""The benchmark suite's definitions: data as specified, NumPy references that agree with
tracegrad's autograd, and a smoke run of benchmarks/suite.py (no timing asserts)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tracegrad as tg

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import workloads  # noqa: E402 - benchmarks/ is not a package

SMALL = {"W1_1M": 0.01, "W1_10M": 0.001, "W2": 0.25, "W3": 0.0625, "W4": 0.0625}


@pytest.mark.parametrize("workload", workloads.WORKLOADS)
def test_numpy_reference_matches_tracegrad_eager(workload):
    names, arrays, wrt = workloads.make_data(workload, scale=SMALL[workload])
    before = [a.copy() for a in arrays]
    ref = workloads.NUMPY_STEPS[workload](*arrays)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, before)), "reference wrote its inputs"
    args = [tg.from_numpy(a.copy()) for a in arrays]
    params = [args[names.index(n)].requires_grad_() for n in wrt]
    loss = workloads.autograd_steps(tg)[workload](*args)
    got = [loss.detach().numpy()] + [g.numpy() for g in tg.autograd.grad(loss, params)]
    assert len(ref) == len(got) == 1 + len(wrt)
    assert workloads.rel_error(got, ref) < 1e-5


def test_w2_data_is_drawn_as_specified():
    rng = np.random.default_rng(0)
    draws = [rng.standard_normal((32, 784), dtype=np.float32),
             rng.integers(0, 10, 32),
             rng.standard_normal((784, 128), dtype=np.float32) * np.float32(1 / 28),
             rng.standard_normal(128, dtype=np.float32) * np.float32(0.1),
             rng.standard_normal((128, 10), dtype=np.float32) * np.float32(1 / np.sqrt(128)),
             rng.standard_normal(10, dtype=np.float32) * np.float32(0.1)]
    names, arrays, wrt = workloads.make_data("W2")
    assert names == ("x", "y", "W1", "b1", "W2", "b2") and wrt == ("W1", "b1", "W2", "b2")
    assert [a.dtype for a in arrays] == [np.float32, np.int64] + [np.float32] * 4
    for got, expected in zip(arrays, draws):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("workload, shapes", [
    ("W1_1M", [(1_000_000,)] * 3),
    ("W3", [(256, 1024), (256, 1024), (1024, 2048), (2048,), (2048, 1024), (1024,)]),
    ("W4", [(4096, 1024), (1024,), (1024,)]),
])
def test_full_size_shapes(workload, shapes):
    names, arrays, wrt = workloads.make_data(workload)
    assert [a.shape for a in arrays] == shapes
    assert all(a.dtype == np.float32 for a in arrays)


def test_suite_quick_prints_a_row_per_system():
    systems = ("NumPy by hand", "tracegrad eager")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "suite.py"), "--quick", "--workloads", "W2",
         "--systems", ",".join(systems)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("W2 ")]
    for system in systems:
        row = next((r for r in rows if system in r), None)
        assert row is not None, proc.stdout
        assert "failed" not in row and "not timed" not in row, row


def test_dynamic_benchmark_runs_and_checks_every_size():
    proc = subprocess.run([sys.executable, str(BENCH / "dynamic.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    err = float(proc.stdout.split("max rel error over every size ")[1].split()[0])
    assert err < 1e-3, proc.stdout
    assert "tracegrad dynamic" in proc.stdout and "dynamic / static" in proc.stdout


def test_values_benchmark_runs_both_draws():
    proc = subprocess.run([sys.executable, str(BENCH / "values.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    for system in ("NumPy by hand", "tracegrad numpy", "tracegrad c"):
        row = next((r for r in proc.stdout.splitlines() if r.startswith(system)), None)
        assert row is not None and len(row.split()) == len(system.split()) + 3, proc.stdout


def test_per_sample_benchmark_runs_and_checks_against_torch_func():
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(BENCH / "per_sample.py"), "--batch", "2",
                           "--rounds", "1"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    for system in ("tracegrad vmap(grad) eager", "tracegrad compile(vmap(grad))",
                   "torch.func vmap(grad)"):
        assert any(r.startswith(system) for r in proc.stdout.splitlines()), proc.stdout


def _gpu_present():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:       # noqa: BLE001 - no CuPy, no driver, no device
        return False


@pytest.mark.skipif(_gpu_present(), reason="a GPU is present: gpu.py measures instead")
def test_gpu_benchmark_without_a_gpu_says_so_and_exits_0():
    proc = subprocess.run([sys.executable, str(BENCH / "gpu.py"), "--quick"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert "nothing to measure" in proc.stdout and proc.stderr == "", proc.stdout


@pytest.mark.skipif(_gpu_present(), reason="a GPU is present")
def test_cupy_row_without_cupy_is_skipped_with_the_reason():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed")
    except ImportError:
        pass
    row = workloads.measure_in_process("W2", "CuPy by hand", (0, 0, 1), device="cuda")
    assert row.get("skip") == "not installed (cupy)", row


@pytest.mark.skipif(not _gpu_present(), reason="needs a GPU (CuPy)")
def test_gpu_benchmark_quick_prints_a_row_per_system():
    proc = subprocess.run([sys.executable, str(BENCH / "gpu.py"), "--quick", "--workloads", "W2"],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("W2 ")]
    for system in ("tracegrad compiled", "tracegrad eager", "CuPy by hand"):
        row = next((r for r in rows if system in r), None)
        assert row is not None and "failed" not in row and "not timed" not in row, proc.stdout


def test_model_zoo_quick_prints_a_row_per_system():
    """benchmarks/models.py --quick --check: the small GPT at a small size, its whole-step
    training checked against eager, then one short round; the PyTorch column only where
    PyTorch is installed."""
    import importlib.util
    systems = ["tracegrad eager", "tracegrad whole-step"]
    if importlib.util.find_spec("torch") is not None:
        systems.insert(0, "PyTorch eager")
    proc = subprocess.run([sys.executable, str(BENCH / "models.py"), "--quick", "--check",
                           "--systems",
                           ",".join(systems)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(ln for ln in lines if re.match(r"model {4,}", ln))
    assert all(s in header for s in systems), proc.stdout
    row = next(ln for ln in lines if ln.startswith("gpt_small "))
    assert "failed" not in row, proc.stdout
    medians = re.findall(r"(\d+\.\d+)(?: \((\d+\.\d+)x\))?", row)[:len(systems)]
    assert len(medians) == len(systems) and all(float(m) > 0 for m, _ in medians), row
    if "PyTorch eager" in systems:      # every median also as a ratio to PyTorch eager's
        assert medians[0][1] == "1.00" and all(r for _, r in medians), row
    assert "uptime at start" in proc.stdout and "uptime at end" in proc.stdout
    check = next(ln for ln in lines if ln.startswith("check gpt_small"))
    assert "MISMATCH" not in check and "ran eagerly" not in proc.stdout, proc.stdout
