"""The benchmark workloads of ../shared/WORKLOADS.md, defined once for every benchmark.

Contract:

* ``make_data(workload, scale=1.0)`` draws the inputs bit-for-bit as WORKLOADS.md lists them
  (``default_rng(0)``, float32, in the listed order) and returns ``(names, arrays, wrt)``;
  ``scale < 1`` shrinks every dimension (except W2's 10 classes) for fast tests, with the
  same draw order, so only ``scale=1`` is the specified data.
* ``NUMPY_STEPS[workload](*arrays)`` is the hand-written NumPy forward+backward, the
  reference every system is checked and timed against; it returns ``(loss, *grads)`` with
  the gradients in the order of the workload's ``wrt`` and never writes to its inputs.
* ``autograd_steps(lib)`` is the step written once for any torch-like library (tracegrad,
  torch); ``jax_steps()`` the same for jax. Each returns the loss.
* ``prepare`` turns (system, workload) into a ``make`` that wraps the step (for a compiled
  system: compiles it) and returns ``call``, one timed step; ``measure_in_process`` times
  one system in the current process the way WORKLOADS.md says; ``run_child`` runs a
  benchmark script's ``--child`` mode in a fresh process and returns its result dict.
"""
import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import tracemalloc

import numpy as np

WORKLOADS = ("W1_1M", "W1_10M", "W2", "W3", "W4")
SYSTEMS = ("tracegrad compiled", "tracegrad whole step", "tracegrad c", "tracegrad numpy",
           "tracegrad eager", "NumPy by hand", "PyTorch eager", "torch.compile", "jax.jit")
# tracegrad whole step: one compiled function computes the loss and takes its gradients
# (``autograd.grad`` inside it), so forward and backward are one graph: for W1 one pass
# tracegrad compiled is compile()'s default (backend "auto": the NumPy tier at once, the C
# tier once built in the background); the other two pin one tier
TG_BACKENDS = {"tracegrad compiled": "auto", "tracegrad c": "c", "tracegrad numpy": "numpy"}
TOLERANCE = 1e-3                 # max rel error below which a system's time counts
# a system needing one of these that is absent is skipped
OPTIONAL_MODULES = ("torch", "jax", "jaxlib", "cupy")
GELU_C, GELU_K = 0.7978845608, 0.044715
W1_SIZES = {"W1_1M": 1_000_000, "W1_10M": 10_000_000}


# data (WORKLOADS.md, bit-for-bit at scale 1) -------------------------------------------------

def make_data(workload, scale=1.0):
    """(names, arrays, names of the arrays the gradients are taken of)."""
    rng = np.random.default_rng(0)

    def N(shape, s):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(s)

    def dim(d):
        return max(1, round(d * scale))

    if workload in W1_SIZES:
        n = dim(W1_SIZES[workload])
        x, a, b = N(n, 1), N(n, 1), N(n, 1)
        return ("x", "a", "b"), [x, a, b], ("x", "a", "b")
    if workload == "W2":
        batch, d_in, d_hid = dim(32), dim(784), dim(128)
        x = N((batch, d_in), 1)
        y = rng.integers(0, 10, batch).astype(np.int64)
        W1 = N((d_in, d_hid), 1 / np.sqrt(d_in))
        b1 = N(d_hid, 0.1)
        W2 = N((d_hid, 10), 1 / np.sqrt(d_hid))
        b2 = N(10, 0.1)
        return ("x", "y", "W1", "b1", "W2", "b2"), [x, y, W1, b1, W2, b2], ("W1", "b1", "W2", "b2")
    if workload == "W3":
        batch, d, d_hid = dim(256), dim(1024), dim(2048)
        x = N((batch, d), 1)
        t = N((batch, d), 1)
        W1 = N((d, d_hid), 1 / np.sqrt(d))
        b1 = N(d_hid, 0.1)
        W2 = N((d_hid, d), 1 / np.sqrt(d_hid))
        b2 = N(d, 0.1)
        return ("x", "t", "W1", "b1", "W2", "b2"), [x, t, W1, b1, W2, b2], ("W1", "b1", "W2", "b2")
    if workload == "W4":
        rows, d = dim(4096), dim(1024)
        x = N((rows, d), 1)
        g = 1 + N(d, 0.1)
        b = N(d, 0.1)
        return ("x", "g", "b"), [x, g, b], ("x", "g", "b")
    raise ValueError(f"unknown workload {workload!r}; expected one of {', '.join(WORKLOADS)}")


# hand-written NumPy forward + backward (the reference) -------------------------------------

def _gelu_tanh(u):
    """(gelu_tanh(u), tanh term t, scratch u*u) with one tanh; the backward reuses t and u*u."""
    u2 = u * u
    z = u2 * np.float32(GELU_K)
    z += 1
    z *= u
    z *= np.float32(GELU_C)                     # C*(u + K*u**3)
    t = np.tanh(z, out=z)
    y = t + 1
    y *= u
    y *= 0.5
    return y, t, u2


def _gelu_tanh_grad(g, u, t, u2):
    """g * gelu_tanh'(u) = g * (0.5*(1+t) + 0.5*u*(1-t*t)*C*(1+3K*u*u)) (g None: 1);
    overwrites u2."""
    s = t * t
    np.subtract(1, s, out=s)
    u2 *= np.float32(3 * GELU_K)
    u2 += 1
    s *= u2
    s *= u
    s *= np.float32(GELU_C)
    s += t
    s += 1
    s *= 0.5
    if g is not None:
        s *= g
    return s


def _sum_squares(y):
    """sum(y*y) of a matrix without a temporary; per-row dots keep float32 accumulation
    accurate (a single np.vdot over millions of elements loses about 1e-5)."""
    return np.einsum("ij,ij->i", y, y).sum()


def numpy_w1(x, a, b):
    u = x * a
    u += b
    y, t, u2 = _gelu_tanh(u)
    loss = y.sum()
    del y
    db = _gelu_tanh_grad(None, u, t, u2)
    return loss, db * a, db * x, db


def numpy_w2(x, y, W1, b1, W2, b2):
    n = x.shape[0]
    a = x @ W1
    a += b1
    h = np.maximum(a, 0)
    logits = h @ W2
    logits += b2
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(n, like=x)         # like=: a CuPy array's step (gpu.py) indexes on the GPU
    loss = np.mean(np.log(s[:, 0]) + m[:, 0] - logits[rows, y])
    dlogits = e
    dlogits /= s
    dlogits[rows, y] -= 1
    dlogits /= n
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    da = dlogits @ W2.T
    da *= a > 0
    dW1 = x.T @ da
    db1 = da.sum(axis=0)
    return loss, dW1, db1, dW2, db2


def numpy_w3(x, t, W1, b1, W2, b2):
    u = x @ W1
    u += b1
    h, th, u2 = _gelu_tanh(u)
    d = h @ W2
    d += b2
    d -= t                                      # y - t
    loss = _sum_squares(d) / d.size
    d *= np.float32(2 / d.size)                 # dloss/dy
    dW2 = h.T @ d
    db2 = d.sum(axis=0)
    du = _gelu_tanh_grad(d @ W2.T, u, th, u2)
    dW1 = x.T @ du
    db1 = du.sum(axis=0)
    return loss, dW1, db1, dW2, db2


def numpy_w4(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    xh = x - mu
    rstd = 1 / np.sqrt((xh * xh).mean(axis=-1, keepdims=True) + np.float32(1e-5))
    xh *= rstd
    u = xh * g
    u += b
    y, t, u2 = _gelu_tanh(u)
    y += x
    loss = _sum_squares(y)
    y *= 2                                      # dloss/dy
    du = _gelu_tanh_grad(y, u, t, u2)
    dg = (du * xh).sum(axis=0)
    db = du.sum(axis=0)
    dxh = np.multiply(du, g, out=u)
    m1 = dxh.mean(axis=-1, keepdims=True)
    m2 = (dxh * xh).mean(axis=-1, keepdims=True)
    dxh -= m1
    xh *= m2
    dxh -= xh
    dxh *= rstd
    dxh += y                                    # dx
    return loss, dxh, dg, db


NUMPY_STEPS = {"W1_1M": numpy_w1, "W1_10M": numpy_w1, "W2": numpy_w2, "W3": numpy_w3,
               "W4": numpy_w4}


# the same steps for the autograd libraries ---------------------------------------------------

def autograd_steps(lib):
    """Each workload's step over ``lib`` (tracegrad or torch: the code is the same)."""
    def w1(x, a, b):
        u = x * a + b
        return (0.5 * u * (1 + lib.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))).sum()

    def w2(x, y, W1, b1, W2, b2):
        h = lib.relu(x @ W1 + b1)
        logits = h @ W2 + b2
        picked = lib.gather(logits, 1, y[:, None])[:, 0]
        return (lib.logsumexp(logits, -1) - picked).mean()

    def w3(x, t, W1, b1, W2, b2):
        u = x @ W1 + b1
        y = (0.5 * u * (1 + lib.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))) @ W2 + b2
        return ((y - t) ** 2).mean()

    def w4(x, g, b):
        xh = (x - x.mean(-1, keepdim=True)) / lib.sqrt(
            x.var(-1, keepdim=True, correction=0) + 1e-5)
        u = xh * g + b
        y = x + 0.5 * u * (1 + lib.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        return (y * y).sum()
    return {"W1_1M": w1, "W1_10M": w1, "W2": w2, "W3": w3, "W4": w4}


def jax_steps():
    import jax
    import jax.numpy as jnp

    def gelu_tanh(u):
        return 0.5 * u * (1 + jnp.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))

    def w1(x, a, b):
        return jnp.sum(gelu_tanh(x * a + b))

    def w2(x, y, W1, b1, W2, b2):
        h = jax.nn.relu(x @ W1 + b1)
        logits = h @ W2 + b2
        picked = jnp.take_along_axis(logits, y[:, None], axis=1)[:, 0]
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)

    def w3(x, t, W1, b1, W2, b2):
        y = gelu_tanh(x @ W1 + b1) @ W2 + b2
        return jnp.mean((y - t) ** 2)

    def w4(x, g, b):
        xh = (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
        y = x + gelu_tanh(xh * g + b)
        return jnp.sum(y * y)
    return {"W1_1M": w1, "W1_10M": w1, "W2": w2, "W3": w3, "W4": w4}


def rel_error(got, ref):
    """max over outputs of max|got - ref| / max|ref| (inf on a shape mismatch or a NaN)."""
    err = 0.0
    for g, r in zip(got, ref):
        g, r = np.asarray(g, dtype=np.float64), np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            return float("inf")
        scale = np.max(np.abs(r)) or 1.0
        err = max(err, float(np.max(np.abs(g - r)) / scale))
    return err if np.isfinite(err) else float("inf")


# one system on one workload, in this process -------------------------------------------------

def prepare(system, workload, names, arrays, wrt, tg_compile=None, device="cpu",
            synchronize=True):
    """``make``: wraps the step (timed with the first call) and returns ``call``;
    ``call()`` runs one step and returns (loss, *grads); ``to_numpy`` converts them.
    ``tg_compile`` replaces ``tracegrad.compile`` (compile_time.py instruments it).
    ``device="cuda"`` (gpu.py): the inputs live on the GPU and a call returns once the
    device has finished its work; "CuPy by hand" is the NumPy reference run on CuPy arrays
    (NumPy hands its functions to CuPy through ``__array_ufunc__``/``__array_function__``);
    ``synchronize=False`` leaves the device running when a call returns (gpu_host.py)."""
    wrt_idx = [names.index(n) for n in wrt]
    if system in ("NumPy by hand", "CuPy by hand"):
        step = NUMPY_STEPS[workload]
        if system == "NumPy by hand":
            return (lambda: (lambda: step(*arrays))), lambda out: [np.asarray(o) for o in out]
        import cupy
        on_gpu = [cupy.asarray(a) for a in arrays]

        def call():
            out = step(*on_gpu)
            if synchronize:
                cupy.cuda.Device().synchronize()
            return out
        call.run, call.sync = (lambda: step(*on_gpu)), cupy.cuda.Device().synchronize
        return (lambda: call), lambda out: [cupy.asnumpy(o) for o in out]

    if system.startswith("tracegrad") or system in ("PyTorch eager", "torch.compile"):
        if system.startswith("tracegrad"):
            import tracegrad as lib
            compiler = None
            if system in TG_BACKENDS:
                backend = TG_BACKENDS[system]
                compiler = lambda f: (tg_compile or lib.compile)(f, backend=backend)  # noqa
        else:
            import torch as lib
            compiler = lib.compile if system == "torch.compile" else None
        fn = autograd_steps(lib)[workload]
        args = [lib.from_numpy(a.copy()).to(device) for a in arrays]
        for i in wrt_idx:
            args[i].requires_grad_()
        params = [args[i] for i in wrt_idx]
        sync = lib.cuda.synchronize if device != "cpu" and synchronize else (lambda: None)

        def loss_and_grads(step, xs, wrt):
            loss = step(*xs)
            return (loss,) + tuple(lib.autograd.grad(loss, wrt))

        def whole(*xs):     # both in one function: one graph when compiled
            return loss_and_grads(fn, xs, [xs[i] for i in wrt_idx])

        def make():
            if system == "tracegrad whole step":
                step = (tg_compile or lib.compile)(whole)
                run = lambda: step(*args)                                   # noqa: E731
            else:
                step = compiler(fn) if compiler else fn
                run = lambda: loss_and_grads(step, args, params)            # noqa: E731

            def call():
                out = run()
                sync()
                return out
            call.compiled = step if step is not fn else None
            call.run, call.sync = run, (lib.cuda.synchronize if device != "cpu" else sync)
            return call
        return make, lambda out: [o.detach().cpu().numpy() for o in out]

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
    raise ValueError(f"unknown system {system!r}; expected one of {', '.join(SYSTEMS)}")


def c_tier_ready(compiled):
    """``perf_counter()`` when every variant of ``compiled`` runs on the C tier (waiting for
    background builds), or None when one never does."""
    from tracegrad.runtime import tiers
    times = []
    for v in compiled._variants:
        tiers.wait(v)
        if v.tier != "c":
            return None
        times.append(v.c_ready_at)
    return max(times, default=None)


def steady_state(call, warmup_s, measure_s, min_reps):
    """Warm up, then time repetitions (the previous outputs dropped before each call)."""
    out = None
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        out = call()
        out = None
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < measure_s or len(times) < min_reps:
        out = None                              # drop the previous call's outputs
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
    del out
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
            "reps": len(times)}


def peak_memory(make):
    """Peak bytes traced by tracemalloc during one steady-state call of a new ``make()``.

    The inputs, allocated before tracing starts, are not counted. The step is made and
    called twice under tracing first, so memory a system keeps between calls (compiled
    code, workspaces, earlier results' arrays kept for reuse) is traced too and counts in
    the peak; the outputs of those calls are dropped."""
    tracemalloc.start()
    try:
        call = make()
        if getattr(call, "compiled", None) is not None and hasattr(call.compiled, "_variants"):
            call()
            c_tier_ready(call.compiled)     # measured on the tier the timed calls ran on
        for _ in range(2):
            out = call()
            del out
        gc.collect()
        tracemalloc.reset_peak()
        out = call()
        peak = tracemalloc.get_traced_memory()[1]
        del out
    finally:
        tracemalloc.stop()
    return peak


def measure_in_process(workload, system, timing, first_only=False, memory=False,
                       tg_compile=None, device="cpu", more=None):
    """Time one system on one workload: the first call, the check against the NumPy
    reference, then (unless ``first_only``) the steady state and, with ``memory``, the
    peak memory of a call; ``more(call)``, a dict of further figures, after the check that
    follows the timed calls. ``timing`` is (warm-up s, measuring s, minimum repetitions).
    Returns a JSON-able dict; "skip", "failed" or "mismatch" say why a row has no times."""
    result = {"workload": workload, "system": system}
    try:
        names, arrays, wrt = make_data(workload)
        try:
            make, to_numpy = prepare(system, workload, names, arrays, wrt, tg_compile, device)
        except ModuleNotFoundError as e:
            if e.name not in OPTIONAL_MODULES:  # a broken import inside a library is a failure
                raise
            result["skip"] = f"not installed ({e.name})"
            return result
        t0 = time.perf_counter()
        call = make()
        out = call()
        result["first_ms"] = (time.perf_counter() - t0) * 1e3
        if system in ("tracegrad compiled", "tracegrad whole step") and device == "cpu":
            # when its kernels run C
            ready = c_tier_ready(call.compiled)
            result["c_ready_ms"] = None if ready is None else (ready - t0) * 1e3
        got = to_numpy(out)
        out = None
        ref = NUMPY_STEPS[workload](*arrays)
        result["error"] = rel_error(got, ref)
        if not result["error"] < TOLERANCE:
            result["mismatch"] = [
                {"output": n, "rel_error": rel_error([g], [r])}
                for n, g, r in zip(("loss",) + wrt, got, ref)]
            return result
        got = ref = None
        if first_only:
            return result
        result.update(steady_state(call, *timing))
        late = rel_error(to_numpy(call()), NUMPY_STEPS[workload](*arrays))
        if not late < TOLERANCE:    # a later call (a replayed CUDA graph, say) went wrong
            result["mismatch"] = [{"output": "all, after the timed calls", "rel_error": late}]
            for key in ("median_ms", "min_ms"):
                result.pop(key, None)
            return result
        if more is not None:
            result.update(more(call))
        if memory:
            result["peak_bytes"] = peak_memory(make)
    except Exception as e:                      # e.g. torch.compile failing on this machine
        result["failed"] = f"{type(e).__name__}: {first_line(str(e))}"
        result["traceback"] = traceback.format_exc()[-2000:]
    return result


# the parent side: one fresh process per measurement ------------------------------------------

def run_child(script, workload, system, flags=(), timeout=180, extra_env=None):
    """Run ``script --child WORKLOAD SYSTEM *flags`` and return the dict it prints after
    "RESULT " (or a "failed" row). torch.compile gets an empty inductor cache directory,
    so its first call is a cold compile."""
    env = dict(os.environ, **(extra_env or {}))
    cache = None
    if system == "torch.compile":
        cache = tempfile.mkdtemp(prefix="tg_bench_inductor_")
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
    cmd = [sys.executable, os.path.abspath(script), "--child", workload, system, *flags]
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


def benchmark_parser(doc):
    """The options of every benchmark script: --quick, --verbose and the hidden --child."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: short warm-up and timing, torch.compile skipped")
    ap.add_argument("--verbose", action="store_true",
                    help="also print the traceback of a system that failed")
    ap.add_argument("--child", nargs=2, metavar=("WORKLOAD", "SYSTEM"), help=argparse.SUPPRESS)
    return ap


def print_tracebacks(rows):
    for r in rows:
        if "traceback" in r:
            print(f"{r['workload']} {r['system']}:\n{r['traceback']}", file=sys.stderr)


def unmeasured_text(row):
    """Why a row has no first call (not installed, or failed), else None."""
    if "skip" in row:
        return row["skip"]
    return "failed: " + row["failed"] if "failed" in row else None


def print_result(result):
    """The child's side of ``run_child``."""
    print("RESULT " + json.dumps(result), flush=True)


def load_average():
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def busy_warning(load):
    """A warning line when the machine was busy before a run, else None."""
    cpus = os.cpu_count() or 1
    if load is None or load <= 0.5 * cpus:
        return None
    return (f"warning: the machine was busy (load average {load:.1f} on {cpus} CPU(s) before "
            "the run); multithreaded BLAS/OpenMP steps slow down badly when cores are shared, "
            "so medians can be far above minimums")


def mismatch_text(row):
    return (f"not timed: error {row['error']:.2e} >= {TOLERANCE:g} ("
            + ", ".join(f"{m['output']} {m['rel_error']:.2e}" for m in row["mismatch"]) + ")")


def first_line(text, limit=160):
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)
