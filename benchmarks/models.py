"""Model zoo: training steps of real models, PyTorch against tracegrad, in one table.

The models (benchmarks/zoo.py, written once with ``torch`` as a parameter and run by both
libraries from the same weights, saved by ``torch.save`` and read by ``tracegrad.load``):
a GPT at two sizes, an LSTM language model, ResNet-18, LeNet, a DCGAN step, a VAE step and
W3's MLP. Each timed call is one full training step: forward, loss, backward, optimizer
step, zero_grad (and ``loss.item()``, as a training loop's logging does).

Systems: PyTorch eager, ``torch.compile(model)``, tracegrad eager, tracegrad compiled
(``tracegrad.compile(model)``) and tracegrad whole-step (``tracegrad.compile(train_step)``:
forward, backward, optimizer and zero_grad in one graph). Each is reported as its median
and as a ratio to PyTorch eager's median, with the geometric mean of the ratios over the
models that every system ran.

How it is timed (the manner of suite.py and convnet.py): every (model, system) runs in a
fresh process of its own (two libraries' thread pools in one process slow each other down,
and each process's high-water mark is its own); ``--rounds`` processes per system and
model, the systems in rotating order round by round so that a change in the machine's load
touches every system alike. In a process: the first and the second call are timed on
their own (a compiled system traces and compiles in the first; tracegrad's whole step runs
its first call eagerly, to make the optimizer's state, and compiles in the second;
``torch.compile`` starts from an empty inductor cache in the first round only), the
background C builds of tracegrad's compiled variants are awaited, then at least 0.3 s of
warm-up and ``--seconds / --rounds`` of timed calls (at least 5). Reported: the first two
calls of the first round, the median of all rounds' calls, and the peak memory of the
process (``ru_maxrss``: imports, model, optimizer state and the steps' high-water mark)
with, beside it, how much the steps raised it above what the process held before its
first step. ``loss err``: the largest relative difference of a system's first-step loss
from PyTorch eager's (the same weights and data).

Threads: ``--threads 1`` (the default) runs every process with one thread
(``set_num_threads(1)`` in both libraries, and ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``
=1); ``--threads 1,default`` adds a second table with each library's default threads. The
1-minute load average is printed at the start and the end (the machine may be shared).

``--check`` first trains every model 20 steps with tracegrad eager and with the whole-step
compiled ``train_step`` and checks that the losses agree within a float32 tolerance.

    python benchmarks/models.py                       # full run, one thread
    python benchmarks/models.py --threads 1,default --rounds 3 --seconds 4
    python benchmarks/models.py --quick               # smoke: small sizes, short timings
    python benchmarks/models.py --check --models gpt_small,vae
"""
import argparse
import importlib.util
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import zoo  # noqa: E402 - benchmarks/ is not a package

# system -> (library, how zoo.program runs the step)
SYSTEMS = {
    "PyTorch eager": ("torch", "eager"),
    "torch.compile": ("torch", "model"),
    "tracegrad eager": ("tracegrad", "eager"),
    "tracegrad compiled": ("tracegrad", "model"),
    "tracegrad whole-step": ("tracegrad", "step"),
}
REFERENCE = "PyTorch eager"
QUICK_MODELS = ("gpt_small",)
CHECK_STEPS = 20
CHECK_RTOL = 1e-4      # relative to max(|loss|, 1); float32 rounding, compounded over steps
# The DCGAN's training amplifies float32 rounding from about step 10 on: over 20 steps its
# losses in PyTorch eager and in tracegrad eager drift apart by up to 2e-3, and the
# whole-step compiled losses drift from tracegrad eager's by the same amount.
# ResNet-18 at this learning rate is chaotic too: PyTorch eager and tracegrad eager differ by
# 3e-4 after one step and by 2e-2 at step 8; whole step and tracegrad eager agree to 5e-7 for
# three steps, then drift as far. Every model's first CHECK_TIGHT steps must agree to
# CHECK_RTOL all the same.
CHECK_RTOL_MODEL = {"dcgan": 1e-2, "resnet18": 5e-2}
CHECK_TIGHT = 3
WARMUP_S = 0.3
MIN_REPS = 5
ONE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def have_torch():
    return importlib.util.find_spec("torch") is not None


def load_lib(name):
    if name == "torch":
        import torch
        return torch
    import tracegrad
    return tracegrad


def maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024     # KB on Linux


# one system in its own process ----------------------------------------------------------------

def await_builds(compiled):
    """Wait for tracegrad's background C builds, so the steady state is the final tier."""
    try:
        from tracegrad.runtime import tiers
    except ImportError:
        return
    for c in compiled:
        for v in getattr(c, "_variants", ()):
            tiers.wait(v)


def child(model, system, size, threads, weights, seconds, warmup=WARMUP_S, device="cpu"):
    lib_name, how = SYSTEMS[system]
    lib = load_lib(lib_name)
    if threads == "1":
        lib.set_num_threads(1)
    step, compiled = zoo.program(lib, model, zoo.config(model, size), how, weights,
                                 device=device)
    rss0 = maxrss_mb()
    t0 = time.perf_counter()
    loss0 = step(0).item()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    step(1).item()
    second = time.perf_counter() - t0
    if lib_name == "tracegrad":
        await_builds(compiled)
    i = 2
    start = time.perf_counter()
    while time.perf_counter() - start < warmup:
        step(i).item()
        i += 1
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < MIN_REPS:
        t0 = time.perf_counter()
        step(i).item()
        times.append(time.perf_counter() - t0)
        i += 1
    eager = [str(c._eager_reason) for c in compiled if getattr(c, "_eager", False) is True]
    return {"first_ms": first * 1e3, "second_ms": second * 1e3, "times": times,
            "loss0": loss0, "peak_mb": maxrss_mb(), "steps_mb": maxrss_mb() - rss0,
            "eager": eager}


def run_child(model, system, size, threads, weights, seconds, warmup, cache_dir, device):
    env = dict(os.environ)
    if threads == "1":
        env.update({k: "1" for k in ONE_THREAD_ENV})
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    cmd = [sys.executable, os.path.abspath(__file__), "--child", model, system,
           "--size", size, "--threads", threads, "--weights", weights,
           "--seconds", str(seconds), "--warmup", str(warmup), "--device", device]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = [ln.strip() for ln in proc.stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in tail if ln.split(":")[0].endswith(("Error", "Exception"))]
    where = [tail[-1]] if tail and tail[-1].startswith("(at ") else []
    text = " ".join(errors[-1:] + where) or (tail[-1] if tail else "")
    return {"failed": text[:300] or f"exit {proc.returncode}, no output"}


def save_weights(model, size, path):
    """The weights every system of ``model`` starts from: PyTorch's ``torch.save`` when
    PyTorch is installed (tracegrad reads it with ``tracegrad.load``), else tracegrad's."""
    lib = "torch" if have_torch() else "tracegrad as torch"
    code = (f"import sys; sys.path[:0] = [{HERE!r}, {os.path.dirname(HERE)!r}]; import zoo; "
            f"import {lib}; zoo.save_weights(torch, {model!r}, zoo.config({model!r}, "
            f"{size!r}), {path!r})")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


# the run ---------------------------------------------------------------------------------------

def measure(models, systems, size, threads, seconds, warmup, rounds, tmp, device="cpu"):
    """``rows[model][system]``: every (model, system) in fresh processes, ``rounds`` times,
    the systems in rotating order; the times of all rounds pooled, the first call and memory
    from the first round (``torch.compile``'s first call a cold compile)."""
    rows = {}
    for model in models:
        weights = os.path.join(tmp, f"{model}.pt")
        if not os.path.exists(weights):
            save_weights(model, size, weights)
        cache = os.path.join(tmp, f"inductor_{model}_{threads}")
        rows[model] = {s: {"times": []} for s in systems}
        order = list(systems)
        for r in range(rounds):
            for system in order:
                got = run_child(model, system, size, threads, weights, seconds / rounds,
                                warmup, cache, device)
                row = rows[model][system]
                if "failed" in got:
                    row.setdefault("failed", got["failed"])
                    print(f"# {model} / {system}: failed: {got['failed']}", flush=True)
                    continue
                print(f"# {model} / {system}: median {statistics.median(got['times']) * 1e3:.2f}"
                      f" ms, first {got['first_ms']:.0f} ms, second {got['second_ms']:.0f} ms",
                      flush=True)       # as it comes, for a run stopped before its table
                row["times"] += got["times"]
                if "first_ms" not in row:
                    row.update({k: got[k] for k in ("first_ms", "second_ms", "loss0", "peak_mb",
                                                    "steps_mb", "eager")})
            order = order[1:] + order[:1]
    return rows


def fmt(x, spec=".1f", none="-"):
    return none if x is None else format(x, spec)


def median_ms(row):
    return statistics.median(row["times"]) * 1e3 if row.get("times") else None


def print_tables(rows, systems, threads):
    ref_sys = REFERENCE if REFERENCE in systems else None
    print(f"\nthreads: {'one (set_num_threads(1))' if threads == '1' else 'each library default'}"
          f"; steady state, median ms per training step (ratio to {ref_sys or 'nothing'})")
    width = 24
    print(f"{'model':<12}" + "".join(f"{s:>{width}}" for s in systems) + f"{'loss err':>10}")
    ratios = {s: [] for s in systems}
    complete = []
    for model, mrows in rows.items():
        ref = median_ms(mrows[ref_sys]) if ref_sys else None
        cells, errs = [], []
        for s in systems:
            r = mrows[s]
            med = median_ms(r)
            if med is None:
                cells.append("failed" if "failed" in r else "-")
                continue
            ratio = med / ref if ref else None
            cells.append(f"{med:.2f}" + (f" ({ratio:.2f}x)" if ratio else ""))
            if ratio:
                ratios[s].append((model, ratio))
            if ref_sys and mrows[ref_sys].get("loss0") is not None:
                want = mrows[ref_sys]["loss0"]
                errs.append(abs(r["loss0"] - want) / max(abs(want), 1e-30))
        if all(median_ms(mrows[s]) is not None for s in systems):
            complete.append(model)
        print(f"{model:<12}" + "".join(f"{c:>{width}}" for c in cells)
              + f"{fmt(max(errs) if errs else None, '.1e'):>10}")
    if ref_sys:
        cells = []
        for s in systems:
            rs = [r for m, r in ratios[s] if m in complete]
            cells.append(f"{math.exp(sum(map(math.log, rs)) / len(rs)):.2f}x" if rs else "-")
        print(f"{'geo. mean':<12}" + "".join(f"{c:>{width}}" for c in cells)
              + f"   over {len(complete)} model(s) every system ran")
    print("\nfirst / second call ms (a compiled system traces and compiles in its first call;"
          " tracegrad whole-step runs its first call eagerly to make the optimizer's state and"
          " compiles in the second) | peak MB of the process (+MB the steps added)")
    print(f"{'model':<12}" + "".join(f"{s:>{width}}" for s in systems))
    for model, mrows in rows.items():
        cells = []
        for s in systems:
            r = mrows[s]
            cells.append("failed" if "first_ms" not in r else
                         f"{r['first_ms']:.0f}/{r['second_ms']:.0f} | {r['peak_mb']:.0f}"
                         f" (+{r['steps_mb']:.0f})")
        print(f"{model:<12}" + "".join(f"{c:>{width}}" for c in cells))
    for model, mrows in rows.items():
        for s in systems:
            if "failed" in mrows[s]:
                print(f"  {model} / {s} failed: {mrows[s]['failed']}")
            for reason in mrows[s].get("eager") or ():
                print(f"  {model} / {s} ran eagerly: {reason}")


# --check ----------------------------------------------------------------------------------------

def check_training(models, size, steps=CHECK_STEPS, rtol=CHECK_RTOL):
    """Train each model ``steps`` steps with tracegrad eager and with the whole-step compiled
    ``train_step`` from the same weights; the largest loss difference relative to
    max(|loss|, 1), per model. Raises SystemExit naming the models that differ."""
    import tracegrad
    bad = []
    with tempfile.TemporaryDirectory(prefix="tg_zoo_check_") as tmp:
        for model in models:
            cfg = zoo.config(model, size)
            path = os.path.join(tmp, f"{model}.pt")
            zoo.save_weights(tracegrad, model, cfg, path)
            losses = {}
            try:
                for how in ("eager", "step"):
                    step, compiled = zoo.program(tracegrad, model, cfg, how, path,
                                                 n_batches=steps)
                    losses[how] = np.array([step(i).item() for i in range(steps)])
            except Exception as exc:        # noqa: BLE001 - reported, and the run goes on
                print(f"check {model:<10} FAILED ({how}): {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:200]}", flush=True)
                bad.append(model)
                continue
            diff = np.abs(losses["step"] - losses["eager"]) / np.maximum(np.abs(losses["eager"]),
                                                                          1.0)
            eager = [c._eager_reason for c in compiled if getattr(c, "_eager", False)]
            ok = (diff.max() <= CHECK_RTOL_MODEL.get(model, rtol)
                  and diff[:CHECK_TIGHT].max() <= rtol and not eager)
            print(f"check {model:<10} {steps} steps: max loss diff {diff.max():.1e} "
                  f"(eager {losses['eager'][0]:.4f} -> {losses['eager'][-1]:.4f})"
                  + ("" if not eager else f", whole step ran eagerly: {eager[0]}")
                  + ("" if ok else "  MISMATCH"), flush=True)
            if not ok:
                bad.append(model)
    if bad:
        raise SystemExit(f"whole-step training differs from eager for: {', '.join(bad)}")


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return f"load average {os.getloadavg()[0]:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(zoo.MODELS),
                    help=f"comma-separated, from {','.join(zoo.MODELS)}")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--threads", default="1", help='"1", "default" or "1,default"')
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="seconds of timed calls per (model, system), over all rounds")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help=f"small sizes of {', '.join(QUICK_MODELS)}, one short round, "
                         "no torch.compile")
    ap.add_argument("--check", action="store_true",
                    help=f"first check whole-step training against eager ({CHECK_STEPS} steps)")
    ap.add_argument("--device", default="cpu",
                    help='"cuda" runs every system on the GPU (the "gpu" sizes: ResNet-18 at '
                         '224x224, batch 64); each timed step ends with loss.item(), which '
                         'waits for the device')
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "SYSTEM"), help=argparse.SUPPRESS)
    ap.add_argument("--size", default="full", help=argparse.SUPPRESS)
    ap.add_argument("--weights", default="", help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=float, default=WARMUP_S, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(*args.child, args.size, args.threads, args.weights,
                                           args.seconds, args.warmup, args.device)))
        return
    models = [m for m in args.models.split(",") if m]
    systems = [s for s in args.systems.split(",") if s]
    unknown = [m for m in models if m not in zoo.MODELS] + [s for s in systems
                                                             if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown model(s)/system(s): {', '.join(unknown)}")
    size = "gpu" if args.device != "cpu" else "full"
    if args.quick:
        size, args.seconds, args.warmup, args.rounds = "small", 0.05, 0.05, 1
        if args.models == ",".join(zoo.MODELS):
            models = list(QUICK_MODELS)
        systems = [s for s in systems if s != "torch.compile"]
    notes = []
    if not have_torch():
        notes.append("PyTorch is not installed: its columns are skipped and tracegrad's "
                     "systems are not compared")
        systems = [s for s in systems if SYSTEMS[s][0] != "torch"]
    if args.check:
        check_training(models, size, steps=4 if args.quick else CHECK_STEPS)
    start = uptime()
    with tempfile.TemporaryDirectory(prefix="tg_models_") as tmp:
        results = [(t, measure(models, systems, size, t, args.seconds, args.warmup,
                               args.rounds, tmp, args.device))
                   for t in args.threads.split(",")]
    end = uptime()
    print(f"model zoo, one training step per call, float32, {os.cpu_count()} CPU(s)"
          + (f", on {args.device}" if args.device != "cpu" else "")
          + (", --quick (small sizes)" if args.quick else ""))
    print(f"uptime at start: {start}")
    print(f"uptime at end:   {end}")
    print(f"each (model, system) in fresh processes, {args.rounds} round(s) in rotating order;"
          f" first call on its own, {args.warmup:g} s warm-up, then >= "
          f"{args.seconds / args.rounds:g} s (and {MIN_REPS} calls) per round")
    for model in models:
        print(f"  {model:<10} {zoo.DESCRIPTIONS[model]}"
              + (f" (on the GPU: {zoo.GPU_SIZES[model]})" if size == "gpu"
                 and model in zoo.GPU_SIZES else "")
              + (" (small size)" if size == "small" else ""))
    for note in notes:
        print(note)
    for threads, rows in results:
        print_tables(rows, systems, threads)


if __name__ == "__main__":
    main()
