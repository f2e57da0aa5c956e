"""Benchmark suite: the workloads of ../shared/WORKLOADS.md on every installed system.

One command prints one table: for each workload (W1_1M, W1_10M, W2, W3, W4, defined and
drawn bit-for-bit in workloads.py) and each system (tracegrad compiled, tracegrad eager,
hand-written NumPy, PyTorch eager, ``torch.compile``, ``jax.jit(jax.value_and_grad)``; a
system that is not installed says so), the first call, the median and minimum of the steady
state, the median as a ratio to the hand-written NumPy median, the peak memory of one call
and the error against the NumPy reference; then the W1 floor from the measured memory
bandwidth and the issue's aims for tracegrad compiled, each marked met or NOT met.

How each row is measured (WORKLOADS.md): in a fresh process of its own (this file run with
``--child``; ``torch.compile`` with an empty inductor cache, so its first call is a cold
compile). The first call is timed on its own (for a compiled system: compile + first run).
Its loss and gradients are checked against the hand-written NumPy result, error = max over
outputs of max|got - ref| / max|ref|; a system whose error is not below 1e-3 is not timed.
Then at least 0.5 s of warm-up and about 3 s of repetitions (at least 5), the previous call's
outputs dropped before each; reported: median and minimum. A timed call of the autograd
systems is ``loss = step(*args); grads = autograd.grad(loss, wrt)``; tracegrad whole step
compiles a function that does both (one graph, for W1 one pass). Threads are left as
each library defaults; each row shows the 1-minute load average its process started under.
On a shared machine multithreaded BLAS steps can become bimodal (a whole process running
orders of magnitude slower while other work holds the cores), and the allocator's reuse of
freed pages moves memory-bound steps; the thread and allocator variables in the
environment (``OPENBLAS_NUM_THREADS``, ``MALLOC_MMAP_THRESHOLD_``, ...) reach every child
and are printed with the table.

Peak memory: after the timed repetitions, in a separate measurement so that tracemalloc's
overhead does not touch the timings, the peak bytes tracemalloc sees during one
steady-state call (inputs excluded; memory a system keeps between calls included). NumPy
reports its buffers to tracemalloc, so this covers tracegrad and the NumPy reference;
torch and jax allocate out of its sight and get no figure.

W1 floor: the bytes that must move (x, a, b read once, three gradients written once:
6 * n * 4 bytes) over the memory bandwidth, measured once here as the best of several
copies of a 200 MB float32 array into a preallocated one ((bytes read + written) / time).

    python benchmarks/suite.py                     # full run (about 10 minutes)
    python benchmarks/suite.py --quick             # smoke run: short timings, no torch.compile
    python benchmarks/suite.py --workloads W1_1M,W2 --systems "NumPy by hand,tracegrad eager"
"""
import os
import time

import numpy as np

from workloads import (SYSTEMS, TOLERANCE, W1_SIZES, WORKLOADS, benchmark_parser,
                       busy_warning, fmt, load_average, measure_in_process, mismatch_text,
                       print_result, print_tracebacks, run_child, unmeasured_text)

TIMING = (0.5, 3.0, 5)             # warm-up s, measuring s, minimum repetitions
QUICK_TIMING = (0.1, 0.3, 3)
MEMORY_SYSTEMS = ("tracegrad compiled", "tracegrad whole step", "tracegrad c",
                  "tracegrad numpy", "tracegrad eager", "NumPy by hand")
# compiled median / NumPy median, each also ahead of torch.compile in the same run
AIMS = {"W1_1M": 0.10, "W1_10M": 0.15, "W2": 1.1, "W3": 0.95, "W4": 0.15}
# the real-model speed issue's aim for the whole step (loss and gradients in one compiled
# function): W1_10M in one pass, below the floor of separate forward and backward passes
WHOLE_STEP_AIMS = {"W1_10M": 0.12}
C_READY_AIM_MS = 1000       # first call to C tier, per variant
BANDWIDTH_BYTES = 200 * 2 ** 20
MB = 2 ** 20
SETTINGS_ENV = ("GLIBC_TUNABLES", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "XLA_FLAGS")


def child(workload, system, quick):
    timing = QUICK_TIMING if quick else TIMING
    return measure_in_process(workload, system, timing, memory=system in MEMORY_SYSTEMS)


def measure(workload, system, quick):
    """One fresh process; the row keeps the load average it started under, as a sign of how
    much other work shared the machine's cores."""
    load = load_average()
    timeout = 600 if system == "torch.compile" else 300
    row = run_child(__file__, workload, system, ["--quick"] if quick else [], timeout)
    row["load"] = load
    return row


def memory_bandwidth(nbytes=BANDWIDTH_BYTES, repeats=7):
    """Bytes per second of a large NumPy copy (bytes read + bytes written), best of repeats."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)                 # fault the destination's pages in before timing
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


def w1_floor_ms(workload, bandwidth):
    """x, a, b read once and their three gradients written once, at ``bandwidth``."""
    return 6 * W1_SIZES[workload] * 4 / bandwidth * 1e3


def ratio_to_numpy(row, numpy_ms):
    if "median_ms" not in row or not numpy_ms:
        return None
    return row["median_ms"] / numpy_ms


def aim_text(workload, ratio):
    if workload not in AIMS:
        return ""
    if ratio is None:
        return f"aim <={AIMS[workload]:.2f}x: no measurement"
    return f"aim <={AIMS[workload]:.2f}x " + ("met" if ratio <= AIMS[workload] else "NOT met")


def print_table(rows, workloads, bandwidth):
    header = (f"{'workload':<9}{'system':<20}{'load':>5}{'first call ms':>14}{'median ms':>11}"
              f"{'min ms':>10}{'/ NumPy':>9}{'peak MB':>9}{'max rel err':>12}  ")
    print(header)
    print("-" * (len(header) + 24))
    for workload in workloads:
        wrows = [r for r in rows if r["workload"] == workload]
        numpy_ms = next((r.get("median_ms") for r in wrows if r["system"] == "NumPy by hand"),
                        None)
        for r in wrows:
            lead = f"{workload:<9}{r['system']:<20}{fmt(r.get('load'), '.1f'):>5}"
            ratio = ratio_to_numpy(r, numpy_ms)
            aim = aim_text(workload, ratio) if r["system"] == "tracegrad compiled" else ""
            if unmeasured_text(r):
                print(lead + "  " + unmeasured_text(r))
            elif "median_ms" not in r:
                print(lead + f"{fmt(r['first_ms']):>14}  " + mismatch_text(r) + "  " + aim)
            else:
                peak = r.get("peak_bytes")
                print(lead + f"{fmt(r['first_ms']):>14}{fmt(r['median_ms']):>11}"
                             f"{fmt(r['min_ms']):>10}{fmt(ratio, '.3f'):>9}"
                             f"{fmt(None if peak is None else peak / MB, '.1f'):>9}"
                             f"{r['error']:>12.1e}  {aim}")
        if workload in W1_SIZES and bandwidth:
            floor = w1_floor_ms(workload, bandwidth)
            ratio = floor / numpy_ms if numpy_ms else None
            print(f"{workload:<9}{'floor (bandwidth)':<20}{'':>19}{fmt(floor):>11}{'':>10}"
                  f"{fmt(ratio, '.3f'):>9}")


def print_aims(rows, workloads):
    print("Aims for tracegrad compiled:")
    by = {(r["workload"], r["system"]): r for r in rows}
    for system, label, aims in (("tracegrad compiled", "median", AIMS),
                                ("tracegrad whole step", "whole step", WHOLE_STEP_AIMS)):
        for workload, aim in aims.items():
            if workload not in workloads:
                continue
            numpy_ms = by.get((workload, "NumPy by hand"), {}).get("median_ms")
            ratio = ratio_to_numpy(by.get((workload, system), {}), numpy_ms)
            peer = ratio_to_numpy(by.get((workload, "torch.compile"), {}), numpy_ms)
            ahead = "" if peer is None or aims is not AIMS else (
                f"; torch.compile {peer:.3f}x: " + ("ahead" if ratio is not None and ratio < peer
                                                    else "NOT ahead"))
            got = "no measurement" if ratio is None else (
                f"{ratio:.3f}x, " + ("met" if ratio <= aim else "NOT met"))
            print(f"  {workload} {label} <= {aim:.2f}x NumPy by hand: {got}{ahead}")
    ready = [(w, by.get((w, "tracegrad compiled"), {}).get("c_ready_ms")) for w in workloads]
    print("  first call to C tier <= 1 s: " + "; ".join(
        f"{w} " + ("never" if ms is None else f"{ms:.0f} ms") for w, ms in ready)
        + (": met" if all(ms is not None and ms <= C_READY_AIM_MS for _, ms in ready)
           else ": NOT met"))
    parts, met = [], True
    for workload in workloads:
        c = by.get((workload, "tracegrad compiled"), {}).get("peak_bytes")
        e = by.get((workload, "tracegrad eager"), {}).get("peak_bytes")
        if c is None or e is None:
            parts.append(f"{workload} no measurement")
            met = False
        else:
            parts.append(f"{workload} {c / MB:.2f} {'<=' if c <= e else '>'} {e / MB:.2f}")
            met = met and c <= e
    print("  peak memory compiled <= eager on every workload (MB): " + "; ".join(parts)
          + (": met" if met else ": NOT met"))


def parse_list(text, known, what):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what} {', '.join(map(repr, unknown))}; "
                         f"expected some of: {', '.join(known)}")
    return [n for n in known if n in names]


def main():
    ap = benchmark_parser(__doc__)
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help=f"comma-separated, from {','.join(WORKLOADS)} (default: all)")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help=f"comma-separated, from {','.join(SYSTEMS)} (default: all)")
    args = ap.parse_args()
    if args.child:
        print_result(child(*args.child, args.quick))
        return
    workloads = parse_list(args.workloads, WORKLOADS, "workload(s)")
    systems = parse_list(args.systems, SYSTEMS, "system(s)")
    if args.quick:
        systems = [s for s in systems if s != "torch.compile"]

    load0 = load_average()
    bandwidth = memory_bandwidth() if any(w in W1_SIZES for w in workloads) else None
    rows = []
    for workload in workloads:
        for system in systems:
            rows.append(measure(workload, system, args.quick))
    load = load_average()

    warm, measure_s, reps = QUICK_TIMING if args.quick else TIMING
    print(f"one step (loss + gradients) per call, {os.cpu_count()} CPU(s)"
          + (f", load average {load0:.1f} before / {load:.1f} after" if load is not None else "")
          + (", --quick" if args.quick else ""))
    print(f"first call timed on its own; steady state after {warm:g} s warm-up, {measure_s:g} s"
          f" of repetitions (at least {reps}); / NumPy = median / NumPy by hand's median;"
          f" a system is timed only if its max rel err < {TOLERANCE:g}")
    if busy_warning(load0):
        print(busy_warning(load0))
    settings = [f"{k}={v}" for k, v in sorted(os.environ.items())
                if k.startswith("MALLOC_") or k in SETTINGS_ENV]
    if settings:                        # threads and allocator settings move the timings
        print("environment: " + " ".join(settings))
    print_table(rows, workloads, bandwidth)
    print()
    print("load: 1-minute load average when the row's process started;"
          " peak MB: tracemalloc peak of one steady-state call, inputs excluded (tracegrad and"
          " NumPy only: torch and jax allocate out of tracemalloc's sight)")
    if bandwidth:
        print(f"floor (bandwidth): 6*n*4 bytes (x, a, b read, 3 gradients written) at"
              f" {bandwidth / 1e9:.1f} GB/s, measured as the best of 7 copies of a"
              f" {BANDWIDTH_BYTES // MB} MB float32 array (bytes read + written)")
    print_aims(rows, workloads)
    if args.verbose:
        print_tracebacks(rows)


if __name__ == "__main__":
    main()
