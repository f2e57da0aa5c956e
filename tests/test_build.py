"""codegen.build: C source to a loaded library, cached on disk across processes."""
import ctypes
import json
import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

from tracegrad.codegen import build

try:
    build.toolchain()
except build.BuildError as exc:
    pytest.skip(f"no C toolchain to build with: {exc}", allow_module_level=True)

ADD1 = "double add1(double x) { return x + 1; }\n"

TANH = """\
#include <math.h>
#pragma omp declare simd notinbranch
float tanhf(float);

double add1(double x) { return x + 1; }

void tanh_f32(const float *x, float *y, long n) {
#pragma omp simd
    for (long i = 0; i < n; i++) y[i] = tanhf(x[i]);
}
"""

# Builds argv[1] as argv[2] in a fresh process and prints its stats and add1(41). With argv[3]
# (a folder) and argv[4] (a count), it first waits until that many processes have started, so
# that their builds overlap.
CHILD = """\
import ctypes, json, os, sys, time
from tracegrad.codegen import build as b
if len(sys.argv) > 3:
    open(os.path.join(sys.argv[3], str(os.getpid())), "w").close()
    deadline = time.time() + 20
    while len(os.listdir(sys.argv[3])) < int(sys.argv[4]) and time.time() < deadline:
        time.sleep(0.005)
lib = b.build(sys.argv[1], sys.argv[2])
lib.add1.restype, lib.add1.argtypes = ctypes.c_double, [ctypes.c_double]
print(json.dumps({"stats": b.stats, "add1": lib.add1(41.0), "path": lib._name}))
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    return tmp_path


def add1(lib):
    lib.add1.restype, lib.add1.argtypes = ctypes.c_double, [ctypes.c_double]
    return lib.add1


def child(source, name, *barrier):
    result = subprocess.run([sys.executable, "-c", CHILD, source, name, *map(str, barrier)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def entries(cache):
    return sorted(os.listdir(cache))


def test_flags_keep_ieee_semantics():
    path, version, flags = build.toolchain()
    assert os.path.isabs(path) and version
    assert {"-O3", "-march=native", "-fno-math-errno", "-fopenmp", "-shared", "-lm"} <= set(flags)
    assert not [f for f in flags if "fast-math" in f or "finite-math" in f]
    assert build.toolchain() is build.toolchain()


def test_build_and_call(cache):
    lib = build.build(TANH, "tanh")
    assert add1(lib)(2.0) == 3.0 and np.isnan(add1(lib)(float("nan")))
    # 37 elements: the vector loop and its scalar remainder both run.
    x = np.resize(np.float32([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, -3.0, 20.0]), 37)
    y = np.full_like(x, 7.0)
    lib.tanh_f32.restype = None
    lib.tanh_f32.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    lib.tanh_f32(x.ctypes.data, y.ctypes.data, x.size)
    np.testing.assert_allclose(y, np.tanh(x), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.signbit(y), np.signbit(np.tanh(x)))  # -0.0 stays -0.0
    so = os.path.basename(lib._name)
    assert re.fullmatch(r"tanh-[0-9a-f]{16}\.so", so)
    assert entries(cache) == [so[:-3] + ".c", so]
    assert open(os.path.join(cache, so[:-3] + ".c")).read() == TANH
    assert build.build(TANH, "tanh") is lib


def test_second_process_loads_from_cache():
    lib = build.build(ADD1, "add1")
    out = child(ADD1, "add1")
    assert out["stats"]["compiled"] == 0 and out["stats"]["loaded_from_cache"] == 1
    assert out["path"] == lib._name and out["add1"] == 42.0


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_entry_is_rebuilt(cache, damage):
    path = build.build(ADD1, "add1")._name
    data = open(path, "rb").read()
    # A truncated ELF file would kill the loading process with SIGBUS, not raise OSError. The
    # damage goes to a new file renamed over the entry: this process has the old one mapped.
    with open(path + ".damaged", "wb") as f:
        f.write(os.urandom(len(data)) if damage == "garbage" else data[:len(data) // 2])
    os.replace(path + ".damaged", path)
    out = child(ADD1, "add1")
    assert out["stats"]["compiled"] == 1 and out["add1"] == 42.0
    assert len(entries(cache)) == 2


def test_missing_compiler(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent")
    with pytest.raises(build.BuildError, match=r"C compiler '/nonexistent' \(from CC\) not found"):
        build.build(ADD1, "add1")


def test_compiler_error_names_the_line(cache):
    with pytest.raises(build.BuildError) as info:
        build.build("int f(void)\n{ return 1 }\n", "bad")
    message = str(info.value)
    assert "\n" not in message and " failed: " in message
    assert re.search(r"bad-[0-9a-f]{16}\.c:2:\d+: error: expected ';'", message), message
    assert not [name for name in entries(cache) if name.endswith((".so", ".tmp"))]


def test_processes_building_at_once(cache, tmp_path_factory):
    barrier = tmp_path_factory.mktemp("barrier")
    command = [sys.executable, "-c", CHILD, ADD1, "add1", str(barrier), "3"]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    outs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], [err for _, err in outs]
    results = [json.loads(out) for out, _ in outs]
    assert all(r["add1"] == 42.0 for r in results)
    assert sum(r["stats"]["compiled"] + r["stats"]["loaded_from_cache"] for r in results) == 3
    assert len({r["path"] for r in results}) == 1
    so = os.path.basename(results[0]["path"])
    assert entries(cache) == [so[:-3] + ".c", so]  # no temporary files left


def test_threads_building_at_once():
    before, libs = build.stats["compiled"], []
    threads = [threading.Thread(target=lambda: libs.append(build.build(ADD1, "add1")))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(libs) == 4 and all(lib is libs[0] for lib in libs)
    assert build.stats["compiled"] - before == 1


def test_key_follows_the_compiler(monkeypatch, tmp_path_factory):
    first = build.build(ADD1, "add1")
    other = tmp_path_factory.mktemp("bin") / "othercc"
    other.symlink_to(build.toolchain()[0])
    monkeypatch.setenv("CC", str(other))
    assert build.toolchain()[0] == str(other)
    second = build.build(ADD1, "add1")
    assert second._name != first._name and add1(second)(1.0) == 2.0


def test_missing_libmvec_falls_back_to_libm(monkeypatch, tmp_path_factory):
    # A compiler whose linker lacks libmvec, though asking it said otherwise.
    fake = tmp_path_factory.mktemp("bin") / "nomveccc"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do\n  if [ "$a" = -lmvec ]; then\n'
                    '    echo "ld: cannot find -lmvec: No such file or directory" >&2; exit 1\n'
                    f'  fi\ndone\nexec "{build.toolchain()[0]}" "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    if "-lmvec" not in build.toolchain()[2]:
        pytest.skip("this compiler has no libmvec to fall back from")
    assert add1(build.build(ADD1, "add1"))(1.0) == 2.0
    assert "-lmvec" not in build.toolchain()[2] and "-lm" in build.toolchain()[2]
