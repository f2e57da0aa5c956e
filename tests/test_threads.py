"""set_num_threads bounds every thread pool tracegrad's work runs on: the C tier's OpenMP
(tests/test_kernels.py), and the BLAS behind NumPy's matmul through threadpoolctl; without
threadpoolctl it says once that BLAS is not bounded. Each case runs in a fresh process,
as the thread pools' settings are per process."""
import os
import subprocess
import sys

import pytest

BLAS = """
import json, sys, warnings
if sys.argv[1] == "absent":
    sys.modules["threadpoolctl"] = None     # as where the threads extra is not installed
warnings.simplefilter("always")
import tracegrad as tg
with warnings.catch_warnings(record=True) as caught:
    tg.set_num_threads(1)
    tg.set_num_threads(1)
out = {"threads": tg.get_num_threads(), "notes": [str(w.message) for w in caught]}
if sys.argv[1] == "present":
    from threadpoolctl import threadpool_info
    out["blas"] = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps(out))
"""


def run(code, *args, **env):
    import json
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                            text=True, timeout=60, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_set_num_threads_bounds_numpys_blas():
    pytest.importorskip("threadpoolctl")
    out = run(BLAS, "present")
    assert out["threads"] == 1 and out["notes"] == []
    assert out["blas"] and set(out["blas"]) == {1}, out    # NumPy's OpenBLAS/MKL: one thread


def test_without_threadpoolctl_set_num_threads_says_blas_is_not_bounded_once():
    out = run(BLAS, "absent")
    assert out["threads"] == 1
    assert len(out["notes"]) == 1 and "threadpoolctl is not installed" in out["notes"][0]


def test_the_default_follows_omp_num_threads_else_the_physical_cores():
    code = "import tracegrad as tg, json; print(json.dumps(tg.get_num_threads()))"
    assert run(code, OMP_NUM_THREADS="1") == 1
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env=env, check=True)
    from tracegrad import parallel
    n = int(result.stdout)
    assert 1 <= n <= len(os.sched_getaffinity(0))
    assert n == parallel._physical_cores(sorted(os.sched_getaffinity(0))) \
        or n == parallel._quota()
