"""Compile time and steady state: first-call and per-step times for W2 and W4.

The workloads are W2 (a 784-128-10 MLP with a cross-entropy loss, batch 32:
overhead-bound) and W4 (a layer-norm-like normalisation, a tanh GELU and a
residual on a 4096x1024 input: memory-bound) of /work/shared/WORKLOADS.md,
with the data drawn bit-for-bit as specified there. A "step" is the loss plus
the named gradients (W2: W1, b1, W2, b2; W4: x, g, b); there is no optimiser
update.

Systems: tracegrad eager; tracegrad compiled (``tg.compile`` of the function
that returns the loss, gradients from ``tg.autograd.grad`` on its output);
hand-written NumPy forward+backward (the reference); PyTorch eager;
``torch.compile`` (default backend, inductor); ``jax.jit(jax.value_and_grad)``
where jax is installed. A timed call of the autograd systems is
``loss = step(*args); grads = autograd.grad(loss, wrt)``.

How each system is measured: in a fresh subprocess of its own (this file run
with ``--child``), so that imports and in-process caches do not leak from one
system to another; ``torch.compile`` also gets an empty inductor cache
directory, so its first call is a cold compile. Inside the subprocess the
library is imported and the input tensors are made first (not timed); then

* first call: wrapping the step (``tg.compile(step)``, ``torch.compile(step)``,
  ``jax.jit(...)``, including the compiler modules these load lazily) plus
  the first step. For a compiled system this is trace + passes + codegen +
  first run; for tracegrad compiled the breakdown is printed too, timed by
  wrapping the compiler's stages (import = loading the compiler's modules,
  which ``tg.compile`` does lazily; trace = ``stats["compile_seconds"]`` minus
  the build of the variant; passes = the pass pipeline and the variant's
  bookkeeping; codegen = emitting and loading the source; run = the rest of
  the first call: guards, generated forward, autograd.grad with the
  generated backward). The first call is taken in 3 fresh processes (one
  that goes on to the steady state, two that stop after the check) and the
  median is reported, as a single cold call is noisy; torch.compile, whose
  cold compile takes seconds, and ``--quick`` runs take it once.
* check: the loss and gradients of the first call are compared with the
  hand-written NumPy result, error = max over outputs of
  max|got - ref| / max|ref|; a system whose error is not below 1e-3 is not
  timed (the row says so).
* steady state: at least 0.5 s of warm-up, then repetitions for about 2 s
  (at least 5); the previous call's outputs are dropped before each timed
  call. Reported: median and minimum, and the median over tracegrad eager's.

Threads are left as each library defaults. The aim from the issue, a first
call under 50 ms for tracegrad compiled on W2, is checked at the end.

    python benchmarks/compile_time.py            # full run (about 2-3 minutes)
    python benchmarks/compile_time.py --quick    # smoke run: short timings, no torch.compile
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

WORKLOADS = ("W2", "W4")
SYSTEMS = ("tracegrad eager", "tracegrad compiled", "NumPy by hand", "PyTorch eager",
           "torch.compile", "jax.jit")
TOLERANCE = 1e-3
FIRST_CALL_RUNS = 3                # fresh processes whose median first call is reported
AIM_MS = 50.0                      # the aim: W2 first call of tracegrad compiled
GELU_C, GELU_K = 0.7978845608, 0.044715


# data (WORKLOADS.md, bit-for-bit) -------------------------------------------------------------

def make_data(workload):
    """(names, arrays, names of the arrays the gradients are taken of)."""
    rng = np.random.default_rng(0)

    def N(shape, s):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(s)

    if workload == "W2":
        x = N((32, 784), 1)
        y = rng.integers(0, 10, 32).astype(np.int64)
        W1 = N((784, 128), 1 / np.sqrt(784))
        b1 = N(128, 0.1)
        W2 = N((128, 10), 1 / np.sqrt(128))
        b2 = N(10, 0.1)
        return ("x", "y", "W1", "b1", "W2", "b2"), [x, y, W1, b1, W2, b2], ("W1", "b1", "W2", "b2")
    if workload == "W4":
        x = N((4096, 1024), 1)
        g = 1 + N(1024, 0.1)
        b = N(1024, 0.1)
        return ("x", "g", "b"), [x, g, b], ("x", "g", "b")
    raise ValueError(workload)


# hand-written NumPy forward + backward (the reference) ----------------------------------------

def numpy_w2(x, y, W1, b1, W2, b2):
    n = x.shape[0]
    a = x @ W1 + b1
    h = np.maximum(a, 0)
    logits = h @ W2 + b2
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(n)
    loss = np.mean(np.log(s[:, 0]) + m[:, 0] - logits[rows, y])
    dlogits = e / s
    dlogits[rows, y] -= 1
    dlogits /= n
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    da = dlogits @ W2.T
    da *= a > 0
    dW1 = x.T @ da
    db1 = da.sum(axis=0)
    return loss, dW1, db1, dW2, db2


def numpy_w4(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    rstd = 1 / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5)
    xh = d * rstd
    u = xh * g + b
    t = np.tanh(GELU_C * (u + GELU_K * (u * u * u)))
    y = x + 0.5 * u * (1 + t)
    loss = np.sum(y * y)
    dy = 2 * y
    du = dy * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * GELU_C * (1 + 3 * GELU_K * u * u))
    dg = np.sum(du * xh, axis=0)
    db = np.sum(du, axis=0)
    dxh = du * g
    dx = dy + rstd * (dxh - dxh.mean(axis=-1, keepdims=True)
                      - xh * (dxh * xh).mean(axis=-1, keepdims=True))
    return loss, dx, dg, db


NUMPY_STEPS = {"W2": numpy_w2, "W4": numpy_w4}


# the same steps written for the autograd libraries -----------------------------------------------

def autograd_steps(lib):
    """The W2 and W4 steps over ``lib`` (tracegrad or torch: the code is the same)."""
    def w2(x, y, W1, b1, W2, b2):
        h = lib.relu(x @ W1 + b1)
        logits = h @ W2 + b2
        picked = lib.gather(logits, 1, y[:, None])[:, 0]
        return (lib.logsumexp(logits, -1) - picked).mean()

    def w4(x, g, b):
        xh = (x - x.mean(-1, keepdim=True)) / lib.sqrt(
            x.var(-1, keepdim=True, correction=0) + 1e-5)
        u = xh * g + b
        y = x + 0.5 * u * (1 + lib.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        return (y * y).sum()
    return {"W2": w2, "W4": w4}


def tracegrad_steps():
    import tracegrad
    return autograd_steps(tracegrad)


def torch_steps():
    import torch
    return autograd_steps(torch)


def jax_steps():
    import jax
    import jax.numpy as jnp

    def w2(x, y, W1, b1, W2, b2):
        h = jax.nn.relu(x @ W1 + b1)
        logits = h @ W2 + b2
        picked = jnp.take_along_axis(logits, y[:, None], axis=1)[:, 0]
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)

    def w4(x, g, b):
        xh = (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
        u = xh * g + b
        y = x + 0.5 * u * (1 + jnp.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        return jnp.sum(y * y)
    return {"W2": w2, "W4": w4}


# one system, in its own process ----------------------------------------------------------------

def prepare(system, workload, names, arrays, wrt, breakdown):
    """``make``: wraps the step (timed with the first call) and returns ``call``;
    ``call()`` runs one step and returns (loss, *grads); ``to_numpy`` converts them."""
    wrt_idx = [names.index(n) for n in wrt]
    if system == "NumPy by hand":
        step = NUMPY_STEPS[workload]
        return (lambda: (lambda: step(*arrays))), lambda out: [np.asarray(o) for o in out]

    if system.startswith("tracegrad"):
        import tracegrad as tg
        fn = tracegrad_steps()[workload]
        args = [tg.from_numpy(a.copy()) for a in arrays]
        for i in wrt_idx:
            args[i].requires_grad_()
        params = [args[i] for i in wrt_idx]
        compiled = system == "tracegrad compiled"

        def make():
            if compiled:
                t0 = time.perf_counter()
                _instrument_compiler(breakdown)      # imports the (lazily loaded) compiler
                breakdown["import"] = time.perf_counter() - t0
                step = tg.compile(fn)
                breakdown["stats"] = step.stats
            else:
                step = fn

            def call():
                loss = step(*args)
                return (loss,) + tuple(tg.autograd.grad(loss, params))
            return call
        return make, lambda out: [o.detach().numpy() for o in out]

    if system in ("PyTorch eager", "torch.compile"):
        import torch
        fn = torch_steps()[workload]
        args = [torch.from_numpy(a.copy()) for a in arrays]
        for i in wrt_idx:
            args[i].requires_grad_()
        params = [args[i] for i in wrt_idx]

        def make():
            step = torch.compile(fn) if system == "torch.compile" else fn

            def call():
                loss = step(*args)
                return (loss,) + tuple(torch.autograd.grad(loss, params))
            return call
        return make, lambda out: [o.detach().numpy() for o in out]

    if system == "jax.jit":
        import jax
        fn = jax_steps()[workload]
        args = [jax.device_put(a) for a in arrays]
        jax.block_until_ready(args)

        def make():
            step = jax.jit(jax.value_and_grad(fn, argnums=tuple(wrt_idx)))

            def call():
                loss, grads = step(*args)
                return jax.block_until_ready((loss,) + tuple(grads))
            return call
        return make, lambda out: [np.asarray(o) for o in out]
    raise ValueError(system)


def _instrument_compiler(breakdown):
    """Time tracegrad.compile's stages by wrapping them (a few calls each; negligible cost)."""
    import tracegrad.runtime.compiled as compiled
    import tracegrad.runtime.variant as variant
    for key in ("build", "codegen"):
        breakdown[key] = 0.0

    def timed(key, f):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                breakdown[key] += time.perf_counter() - t0
        return wrapper
    compiled.build = timed("build", compiled.build)          # passes + codegen of a variant
    variant._generate = timed("codegen", variant._generate)  # emit source, load it


def rel_error(got, ref):
    err = 0.0
    for g, r in zip(got, ref):
        g, r = np.asarray(g, dtype=np.float64), np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            return float("inf")
        scale = np.max(np.abs(r)) or 1.0
        err = max(err, float(np.max(np.abs(g - r)) / scale))
    return err if np.isfinite(err) else float("inf")


def child(workload, system, quick, first_only=False):
    """Measure one system on one workload (``first_only``: the first call and the check)."""
    warmup_s, measure_s, min_reps = (0.1, 0.3, 3) if quick else (0.5, 2.0, 5)
    result = {"workload": workload, "system": system}
    try:
        names, arrays, wrt = make_data(workload)
        breakdown = {}
        try:
            make, to_numpy = prepare(system, workload, names, arrays, wrt, breakdown)
        except ImportError as e:
            result["skip"] = f"not installed ({e.name or e})"
            return result
        t0 = time.perf_counter()
        call = make()
        out = call()
        first = time.perf_counter() - t0
        result["first_ms"] = first * 1e3
        if system == "tracegrad compiled":
            s = breakdown["stats"]
            compile_s = s["compile_seconds"]
            result["breakdown_ms"] = {
                "import": breakdown["import"] * 1e3,
                "trace": (compile_s - breakdown["build"]) * 1e3,
                "passes": (breakdown["build"] - breakdown["codegen"]) * 1e3,
                "codegen": breakdown["codegen"] * 1e3,
                "run": (first - compile_s - breakdown["import"]) * 1e3,
                "compile_seconds": compile_s * 1e3,
            }
            result["compiles"] = s["compiles"]
        got = to_numpy(out)
        out = None
        ref = NUMPY_STEPS[workload](*[a.copy() for a in arrays])
        result["error"] = rel_error(got, ref)
        if not result["error"] < TOLERANCE:
            result["mismatch"] = [
                {"output": n, "rel_error": rel_error([g], [r])}
                for n, g, r in zip(("loss",) + wrt, got, ref)]
            return result
        if first_only:
            return result
        start = time.perf_counter()
        while time.perf_counter() - start < warmup_s:
            out = call()
            out = None
        times = []
        start = time.perf_counter()
        while time.perf_counter() - start < measure_s or len(times) < min_reps:
            out = None                      # drop the previous call's outputs
            t0 = time.perf_counter()
            out = call()
            times.append(time.perf_counter() - t0)
        out = None
        result["median_ms"] = statistics.median(times) * 1e3
        result["min_ms"] = min(times) * 1e3
        result["reps"] = len(times)
        if system == "tracegrad compiled":
            result["compiles_after"] = breakdown["stats"]["compiles"]
    except Exception as e:                  # e.g. torch.compile failing on this machine
        result["failed"] = f"{type(e).__name__}: {_first_line(str(e))}"
        result["traceback"] = traceback.format_exc()[-2000:]
    return result


def _first_line(text, limit=160):
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


# the parent: one subprocess per (workload, system), one table -----------------------------------

def run_child(workload, system, quick, timeout, first_only=False):
    env = dict(os.environ)
    cache = None
    if system == "torch.compile":           # a cold compile: no inductor cache from earlier runs
        cache = tempfile.mkdtemp(prefix="tg_bench_inductor_")
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
    cmd = [sys.executable, os.path.abspath(__file__), "--child", workload, system]
    if quick:
        cmd.append("--quick")
    if first_only:
        cmd.append("--first-only")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"workload": workload, "system": system,
                "failed": f"no result within {timeout} s"}
    finally:
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return {"workload": workload, "system": system,
            "failed": f"exit status {proc.returncode}: " + (tail[-1] if tail else "no output")}


def measure(workload, system, quick):
    """One full child; then, for a steadier figure, more fresh processes for the first call
    alone (not for torch.compile, whose cold compile takes many seconds): the row keeps the
    median first call, with that process's breakdown."""
    runs = 1 if quick or system == "torch.compile" else FIRST_CALL_RUNS
    timeout = 240 if system == "torch.compile" else 120
    row = run_child(workload, system, quick, timeout)
    if "first_ms" not in row or "median_ms" not in row:
        return row
    firsts = [row] + [run_child(workload, system, quick, timeout, first_only=True)
                      for _ in range(runs - 1)]
    firsts = [r for r in firsts if "first_ms" in r and r.get("error", 1) < TOLERANCE]
    firsts.sort(key=lambda r: r["first_ms"])
    mid = firsts[(len(firsts) - 1) // 2]
    row["first_runs_ms"] = [r["first_ms"] for r in firsts]
    row["first_ms"] = mid["first_ms"]
    if "breakdown_ms" in mid:
        row["breakdown_ms"] = mid["breakdown_ms"]
    return row


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: short warm-up and timing, torch.compile skipped")
    ap.add_argument("--verbose", action="store_true",
                    help="also print the traceback of a system that failed")
    ap.add_argument("--first-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=2, metavar=("WORKLOAD", "SYSTEM"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(*args.child, args.quick, args.first_only)), flush=True)
        return

    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    systems = [s for s in SYSTEMS if not (args.quick and s == "torch.compile")]
    rows = []
    for workload in WORKLOADS:
        for system in systems:
            rows.append(measure(workload, system, args.quick))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(f"first call and steady state of one step (loss + gradients), {os.cpu_count()} CPU(s)"
          + (f", load average {load0:.1f} before / {load:.1f} after" if load is not None else "")
          + (", --quick" if args.quick else ""))
    print(f"first call: median over {1 if args.quick else FIRST_CALL_RUNS} fresh process(es)"
          + ("" if args.quick else " (torch.compile: 1)")
          + f"; steady state after {'0.1' if args.quick else '0.5'} s warm-up, "
          + f"{'0.3' if args.quick else '2'} s of repetitions; ratio = median / tracegrad eager's")
    if load0 is not None and load0 > 0.5 * (os.cpu_count() or 1):
        print(f"warning: the machine was busy (load average {load0:.1f} on {os.cpu_count()} "
              "CPU(s) before the run); multithreaded BLAS/OpenMP steps slow down badly when "
              "cores are shared, so medians can be far above minimums")
    header = (f"{'workload':<9}{'system':<20}{'first call ms':>14}{'median ms':>11}"
              f"{'min ms':>10}{'vs tg eager':>12}{'max rel err':>12}")
    print(header)
    print("-" * len(header))
    eager = {r["workload"]: r.get("median_ms") for r in rows if r["system"] == "tracegrad eager"}
    for r in rows:
        lead = f"{r['workload']:<9}{r['system']:<20}"
        if "skip" in r or "failed" in r:
            print(lead + "  " + (r.get("skip") or "failed: " + r["failed"]))
            continue
        if "median_ms" not in r:
            print(lead + f"{fmt(r['first_ms']):>14}  not timed: error {r['error']:.2e} "
                         f">= {TOLERANCE:g} (" + ", ".join(
                             f"{m['output']} {m['rel_error']:.2e}" for m in r["mismatch"]) + ")")
            continue
        base = eager.get(r["workload"])
        ratio = f"{r['median_ms'] / base:.3g}x" if base else "-"
        print(lead + f"{fmt(r['first_ms']):>14}{fmt(r['median_ms']):>11}{fmt(r['min_ms']):>10}"
                     f"{ratio:>12}{r['error']:>12.1e}")

    print()
    print("tracegrad compiled, first call broken down (ms):")
    if sys.flags.dont_write_bytecode:
        print("  (PYTHONDONTWRITEBYTECODE is set: every process compiles the compiler's modules"
              " from source, which inflates 'import compiler')")
    aim = None
    for r in rows:
        if r["system"] != "tracegrad compiled" or "breakdown_ms" not in r:
            continue
        b = r["breakdown_ms"]
        runs = ", ".join(f"{t:.1f}" for t in r.get("first_runs_ms", [r["first_ms"]]))
        print(f"  {r['workload']} (first calls: {runs}): {r['first_ms']:.1f}"
              f" = import compiler {b['import']:.1f}"
              f" + trace {b['trace']:.1f} + passes {b['passes']:.1f} + codegen {b['codegen']:.1f}"
              f" + run {b['run']:.1f}  (stats['compile_seconds'] = {b['compile_seconds']:.1f};"
              f" compiles: {r.get('compiles_after', r.get('compiles'))})")
        if r["workload"] == "W2":
            aim = r["first_ms"]
    if aim is None:
        print(f"Aim: W2 first call of tracegrad compiled under {AIM_MS:g} ms: no measurement")
    else:
        print(f"Aim: W2 first call of tracegrad compiled under {AIM_MS:g} ms: {aim:.1f} ms, "
              + ("met" if aim < AIM_MS else "NOT met"))
    for r in rows:
        if "traceback" in r and args.verbose:
            print(f"{r['workload']} {r['system']}:\n{r['traceback']}", file=sys.stderr)


if __name__ == "__main__":
    main()
