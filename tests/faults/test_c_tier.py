"""Faults of the C tier, injected on purpose: fake compilers that hang, crash, or exit 0 with a
truncated or foreign library; cache entries that are truncated, foreign, garbage or wrong; a
process killed in the middle of a build; processes that share a cache or exit mid-build.

Each runs the user's program in a fresh process (a fault that gets past the checks kills the
interpreter, with SIGBUS for a truncated library) on a fresh cache, and asserts what the user
gets: eager's results and gradients, a first call that does not wait for a stuck compiler,
at most one warning that names the cause, and a cache that heals and is left clean.
"""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tracegrad.codegen import build, elf

try:
    REAL_CC = build.toolchain()[0]
except build.BuildError as exc:     # pragma: no cover - machines without a C compiler
    pytest.skip(f"no C compiler to fake faults around: {exc}", allow_module_level=True)

# The user's program: two compiled functions (so that a second variant meets the first one's
# fault), each checked against eager. argv: backend, then "wait" (for each C build, then call
# again) or "exit" (leave at once, builds in flight). Prints one JSON line.
USER = r"""
import json, sys, time
import numpy as np
import tracegrad as tg
from tracegrad.codegen import build
from tracegrad.runtime import tiers

backend, mode = sys.argv[1], sys.argv[2]


def f(x, w):
    return (tg.tanh(x * w) - x * 0.25).sum()


def g(x):
    return (tg.sigmoid(x) * x).sum()


def call(fn, c, args):
    ins = [a.detach().requires_grad_() for a in args]
    refs = [a.detach().requires_grad_() for a in args]
    start = time.perf_counter()
    out = c(*ins)
    seconds = time.perf_counter() - start
    out.backward()
    want = fn(*refs)
    want.backward()
    grad = float(np.abs(ins[0].grad.numpy() - refs[0].grad.numpy()).max())
    return {"s": seconds, "out": [out.item(), want.item()], "grad": grad, "tier": c._last.tier}


x = tg.linspace(-2, 2, 64)
report = {"calls": []}
try:
    for fn, args in ((f, (x, tg.full((64,), 0.5))), (g, (x,))):
        c = tg.compile(fn, backend=backend)
        first = call(fn, c, args)
        if mode == "wait":
            start = time.perf_counter()
            tiers.wait(c._last, 120)
            first["wait_s"] = time.perf_counter() - start
            report["calls"].append(call(fn, c, args))
        report["calls"].append(first)
except Exception as e:
    report["error"] = f"{type(e).__name__}: {e}"
report["stats"] = build.stats
print(json.dumps(report), flush=True)
"""

# Where a fake compiler reads its output path; probes (--version, -print-file-name) go to the
# real compiler unless the fake says otherwise.
OUT = 'out=""; prev=""\nfor a in "$@"; do [ "$prev" = -o ] && out="$a"; prev="$a"; done\n'
PROBES = 'case "$1" in --version|-print-file-name=*) exec REAL "$@";; esac\n'
FAKES = {
    # sleeps, with a child that sleeps too: a timeout must kill the whole process group
    "hang": 'echo $$ >> PIDS\nsleep 300 &\necho $! >> PIDS\nwait\n',
    "crash": 'echo "cc: internal compiler error: Segmentation fault" >&2\nexit 1\n',
    "crash_in_compile": PROBES + 'echo "cc1: internal compiler error: Segmentation fault" >&2\n'
                                 'exit 1\n',
    "truncated": PROBES + OUT + 'REAL "$@" || exit\n'
                                'head -c $(( $(wc -c < "$out") / 2 )) "$out" > "$out.half"\n'
                                'mv "$out.half" "$out"\n',
    "foreign": PROBES + OUT + "echo 'int unrelated(void) { return 1; }' | "
                              'REAL -shared -fPIC -x c - -o "$out"\n',
    # the real compiler, after a pause in which the test acts (its pid in PIDS)
    "slow": PROBES + 'echo $$ >> PIDS\nsleep 2\nexec REAL "$@"\n',
}


def fake_cc(tmp_path, kind):
    path = tmp_path / f"{kind}-cc"
    body = FAKES[kind].replace("REAL", shlex.quote(REAL_CC))
    path.write_text("#!/bin/sh\n" + body.replace("PIDS", shlex.quote(str(tmp_path / "pids"))))
    path.chmod(0o755)
    return str(path)


def start_user(cache, backend="auto", mode="wait", cc=None, **env):
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(cache), **env)
    env.pop("TRACEGRAD_BACKEND", None)      # conftest's numpy setting: compile says its own
    env.pop("CC", None)
    if cc:
        env["CC"] = cc
    return subprocess.Popen([sys.executable, "-c", USER, backend, mode], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=90):
    out, err = proc.communicate(timeout=timeout)
    # a negative status is a signal: SIGBUS from a truncated library, SIGSEGV from a bad one
    assert proc.returncode == 0, f"the user's process ended with {proc.returncode}:\n{err}"
    report = json.loads(out.strip().splitlines()[-1])
    report["warnings"] = [line for line in err.splitlines() if "Warning:" in line]
    report["stderr"] = err
    return report


def run_user(cache, backend="auto", mode="wait", cc=None, **env):
    return finish(start_user(cache, backend, mode, cc, **env))


def assert_right(report, tier=None):
    """Every call gave eager's result and gradient (float32, C or NumPy rounding)."""
    assert "error" not in report, report["error"]
    assert report["calls"]
    for call in report["calls"]:
        got, want = call["out"]
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), call
        assert call["grad"] <= 1e-5, call
        if tier is not None and "wait_s" not in call:     # the calls after each build
            assert call["tier"] == tier, report


def files(cache):
    return sorted(os.listdir(cache)) if os.path.isdir(cache) else []


def dead(pid, within=10.0):
    """Whether process `pid` is gone (or a zombie) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                if re.search(r"^State:\s+Z", f.read(), re.M):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def pids(tmp_path):
    path = tmp_path / "pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def one_warning(report, *words):
    assert len(report["warnings"]) == 1, report["stderr"]
    for word in words:
        assert word in report["warnings"][0], report["warnings"][0]


# fake compilers --------------------------------------------------------------------------------

def test_a_hanging_compiler_never_blocks_a_call_and_its_process_group_is_killed(tmp_path):
    report = run_user(tmp_path / "cache", cc=fake_cc(tmp_path, "hang"),
                      TRACEGRAD_BUILD_TIMEOUT="2")
    assert_right(report, tier="numpy")
    firsts = [c for c in report["calls"] if "wait_s" in c]
    assert all(c["s"] < 5 for c in firsts), firsts     # NumPy ran while the probe hung
    # the probe was stopped after 2 s, and the second function did not wait for it again
    assert 0.5 < firsts[0]["wait_s"] < 10 and firsts[1]["wait_s"] < 1, firsts
    one_warning(report, "did not finish in 2 s", "hang-cc")
    hung = pids(tmp_path)
    assert len(hung) == 2, hung        # probed once: the shell and its child
    assert all(dead(p) for p in hung), [p for p in hung if not dead(p, 0)]


@pytest.mark.parametrize("kind", ["crash", "crash_in_compile"])
def test_a_crashing_compiler_leaves_numpy_with_one_warning(tmp_path, kind):
    report = run_user(tmp_path / "cache", cc=fake_cc(tmp_path, kind))
    assert_right(report, tier="numpy")
    one_warning(report, "internal compiler error")
    assert not [f for f in files(tmp_path / "cache") if f.endswith((".so", ".tmp"))]


@pytest.mark.parametrize("kind, says", [("truncated", "is truncated"),
                                        ("foreign", "lacks forward_fused0")])
def test_a_compiler_that_exits_0_with_a_bad_library(tmp_path, kind, says):
    cc = fake_cc(tmp_path, kind)
    report = run_user(tmp_path / "auto", cc=cc)
    assert_right(report, tier="numpy")
    one_warning(report, says)
    assert not [f for f in files(tmp_path / "auto") if f.endswith((".so", ".tmp"))]
    # asked for C explicitly: a clear error naming the kernel, not a crash
    report = run_user(tmp_path / "c", backend="c", cc=cc)
    assert report["error"].startswith("RuntimeError: compile(backend='c'): the C kernel")
    assert "forward_fused0" in report["error"] and says in report["error"]


# the cache -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache the real compiler filled: the user's two variants, compiled once."""
    cache = tmp_path_factory.mktemp("built")
    assert_right(run_user(cache, backend="c"), tier="c")
    return {name: (cache / name).read_bytes() for name in files(cache)}


def _damage(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 3])
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    else:   # a sound library: lacking the kernels (foreign), or with kernels that do nothing
        source = path.with_suffix(".c").read_text()
        names = re.findall(r"^void (\w+)\(", source, re.M)
        text = "int unrelated(void) { return 1; }\n" if how == "foreign" else \
            "".join(f"void {name}(void) {{}}\n" for name in names)
        subprocess.run([REAL_CC, "-shared", "-fPIC", "-x", "c", "-", "-o", str(path)],
                       input=text, text=True, check=True)


@pytest.mark.parametrize("how", ["truncated", "garbage", "foreign", "wrong"])
def test_a_bad_cache_entry_is_removed_and_rebuilt(tmp_path, built, how):
    cache = tmp_path / "cache"
    cache.mkdir()
    for name, data in built.items():
        (cache / name).write_bytes(data)
    entry = next(p for p in cache.iterdir() if p.suffix == ".so" and p.name.startswith("f_"))
    kernels = re.findall(r"^void (\w+)\(", entry.with_suffix(".c").read_text(), re.M)
    _damage(entry, how)
    report = run_user(cache)
    assert_right(report, tier="c")
    assert report["warnings"] == [], report["stderr"]
    assert report["stats"]["compiled"] == 1 and report["stats"]["loaded_from_cache"] >= 1
    assert elf.problem(str(entry), kernels) is None      # healed
    assert sorted(files(cache)) == sorted(built)
    again = run_user(cache)         # the next process loads both
    assert_right(again, tier="c")
    assert again["stats"]["compiled"] == 0


# processes --------------------------------------------------------------------------------------

def test_a_process_killed_mid_build_leaves_a_cache_the_next_one_uses(tmp_path):
    cache = tmp_path / "cache"
    proc = start_user(cache, backend="c", cc=fake_cc(tmp_path, "slow"))
    deadline = time.monotonic() + 30
    while not pids(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids(tmp_path), "the build never started"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert dead(pids(tmp_path)[0], within=30)       # the orphaned compiler finishes on its own
    left = [f for f in files(cache) if f.endswith(".tmp")]
    assert left, files(cache)       # what the killed process was writing
    report = run_user(cache)
    assert_right(report, tier="c")
    assert report["warnings"] == [], report["stderr"]
    assert not [f for f in files(cache) if f.endswith(".tmp")], files(cache)    # swept


def test_two_processes_share_one_cache(tmp_path):
    cache = tmp_path / "cache"
    procs = [start_user(cache, backend="c") for _ in range(2)]
    reports = [finish(p) for p in procs]
    for report in reports:
        assert_right(report, tier="c")
        assert report["warnings"] == [], report["stderr"]
    # each variant compiled or loaded once per process; one entry each, nothing half-written
    assert sum(r["stats"]["compiled"] + r["stats"]["loaded_from_cache"] for r in reports) == 4
    names = files(cache)
    assert len([f for f in names if f.endswith(".so")]) == 2, names
    assert not [f for f in names if f.endswith(".tmp")], names


@pytest.mark.parametrize("cc", ["slow", "real"])
def test_leaving_during_a_build_is_quiet_and_leaves_no_temporary_files(tmp_path, cc):
    cache = tmp_path / "cache"
    compiler = fake_cc(tmp_path, "slow") if cc == "slow" else None
    # the real compiler: processes that leave while probing, compiling or writing the cache
    procs = [start_user(cache, mode="exit", cc=compiler) for _ in range(1 if compiler else 3)]
    started = time.monotonic()
    for proc in procs:
        report = finish(proc)
        assert_right(report)
        assert report["warnings"] == [], report["stderr"]   # no "cannot run C compiler"
        assert "compiler" not in report["stderr"], report["stderr"]
    assert time.monotonic() - started < 30
    assert not [f for f in files(cache) if f.endswith(".tmp")], files(cache)
    assert all(dead(p) for p in pids(tmp_path))     # killed at exit, not left running
