"""codegen.build: C source to a loaded library, cached on disk across processes."""
import ctypes
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tracegrad.codegen import build, elf

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


# faults: the checks before a load, timeouts, a compiler remembered, temporary files -------------

def fake(tmp_path_factory, name, body):
    """A compiler script: probes go to the real compiler, `body` handles compiles ($out is the
    library it is asked for); each run appends a line to <its folder>/runs."""
    folder = tmp_path_factory.mktemp("bin")
    path = folder / name
    path.write_text(f'#!/bin/sh\necho "$@" >> {folder}/runs\n'
                    f'case "$1" in --version|-print-file-name=*) exec "{build.toolchain()[0]}" '
                    f'"$@";; esac\nout=""; prev=""\n'
                    'for a in "$@"; do [ "$prev" = -o ] && out="$a"; prev="$a"; done\n'
                    + body.replace("REAL", build.toolchain()[0]))
    path.chmod(0o755)
    return str(path), folder / "runs"


def test_a_truncated_fresh_library_is_never_loaded_and_the_compiler_is_dropped(
        cache, monkeypatch, tmp_path_factory):
    cc, runs = fake(tmp_path_factory, "truncating", 'REAL "$@" || exit\n'
                    'head -c 2000 "$out" > "$out.x" && mv "$out.x" "$out"\n')
    monkeypatch.setenv("CC", cc)
    with pytest.raises(build.BadLibrary, match=r"exited 0, but the library it wrote for "
                                               r"add1-\w+ is truncated \(2000 of \d+ bytes\)"):
        build.build(ADD1, "add1", symbols=["add1"])
    assert [f for f in entries(cache) if not f.endswith(".c")] == []
    compiles = len(runs.read_text().splitlines())
    with pytest.raises(build.BadLibrary, match="is truncated"):     # at once, remembered
        build.build("int other(void) { return 2; }\n", "other")
    assert len(runs.read_text().splitlines()) == compiles


def test_a_cached_entry_without_the_symbol_is_rebuilt(cache):
    lib = build.build(ADD1, "add1", symbols=["add1"])
    foreign = build.build("int unrelated(void) { return 1; }\n", "foreign")
    os.replace(foreign._name, lib._name)    # an entry that loads, but is not add1's
    out = json.loads(subprocess.run(
        [sys.executable, "-c", CHILD.replace('b.build(sys.argv[1], sys.argv[2])',
                                             'b.build(sys.argv[1], sys.argv[2], ["add1"])'),
         ADD1, "add1"], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert out["add1"] == 42.0
    assert out["stats"]["rejected_from_cache"] == 1 and out["stats"]["compiled"] == 1
    assert elf.problem(lib._name, ["add1"]) is None


def test_a_timeout_kills_the_compilers_whole_process_group(cache, monkeypatch,
                                                           tmp_path_factory):
    folder = tmp_path_factory.mktemp("pids")
    cc, _ = fake(tmp_path_factory, "hanging",
                 f'echo $$ >> {folder}/pids\nsleep 60 &\necho $! >> {folder}/pids\nwait\n')
    monkeypatch.setenv("CC", cc)
    monkeypatch.setenv("TRACEGRAD_BUILD_TIMEOUT", "0.5")
    start = time.monotonic()
    with pytest.raises(build.BuildError, match=r"did not finish in 0.5 s"):
        build.build(ADD1, "add1")
    with pytest.raises(build.BuildError, match=r"did not finish in 0.5 s"):    # remembered
        build.build("int other(void) { return 2; }\n", "other")
    assert time.monotonic() - start < 10
    pids = [int(p) for p in (folder / "pids").read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.05)
    assert not any(_running(p) for p in pids), "the compiler's child outlived the timeout"
    assert not [f for f in entries(cache) if f.endswith((".so", ".tmp"))]


def _running(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return not re.search(r"^State:\s+Z", f.read(), re.M)
    except FileNotFoundError:
        return False


def test_a_failed_probe_is_remembered_and_never_waited_for(monkeypatch, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bin")
    cc = folder / "broken"
    cc.write_text(f'#!/bin/sh\necho run >> {folder}/runs\necho "broken: bad install" >&2\n'
                  'exit 1\n')
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    assert build.toolchain(wait=False) is None      # not probed: says so, runs nothing
    assert not (folder / "runs").exists()
    for _ in range(3):
        with pytest.raises(build.BuildError, match="does not answer --version: broken: bad"):
            build.toolchain()
    with pytest.raises(build.BuildError):
        build.toolchain(wait=False)
    assert (folder / "runs").read_text() == "run\n"


def test_a_bad_timeout_setting_is_named(monkeypatch):
    monkeypatch.setenv("TRACEGRAD_BUILD_TIMEOUT", "soon")
    with pytest.raises(build.BuildError, match="TRACEGRAD_BUILD_TIMEOUT must be a positive"):
        build.build_timeout()


def test_temporary_files_of_dead_processes_are_swept(cache):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    names = {f".add1-0~{build._HOST}~{dead}~x1.tmp": False,          # its writer is gone
             f".add1-0~{build._HOST}~{os.getppid()}~x2.tmp": True,    # alive: still writing
             f".add1-0~00000000~{dead}~x3.tmp": True,     # another host's: only by age
             ".add1-0.abcd.tmp": True,                    # an older format, recent
             ".add1-1.abcd.tmp": False}                   # ... and a day old
    for name in names:
        (cache / name).write_bytes(b"partial")
    old = time.time() - 86400
    os.utime(cache / ".add1-1.abcd.tmp", (old, old))
    (cache / f".cc~{build._HOST}~{dead}~w.tmp").mkdir()    # a compiler's work folder
    names[f".cc~{build._HOST}~{dead}~w.tmp"] = False
    build.build(ADD1, "add1")
    left = set(entries(cache))
    assert {name for name, kept in names.items() if kept} <= left
    assert not {name for name, kept in names.items() if not kept} & left
