"""GPU benchmark: the workloads of ../shared/WORKLOADS.md on CUDA, against PyTorch and CuPy.

One command prints one table: for each workload (W1_1M, W1_10M, W2, W3, W4, drawn in
workloads.py) and each system on the GPU (tracegrad compiled: the loss function compiled,
``backward`` after it; tracegrad whole step: one compiled function returns the loss and its
gradients; tracegrad eager; the NumPy reference run on CuPy arrays; PyTorch eager;
``torch.compile``), the first call, the median and minimum of the steady state, the median
as a ratio to CuPy by hand, a step's time when 20 run back to back with one synchronisation
at the end (b2b: a training loop that reads nothing on the host between steps), and the
error against the NumPy reference computed on the CPU (checked again after the timed calls,
which replay CUDA graphs). Then the device's copy bandwidth and the aims of the CUDA issue,
each marked met or NOT met:

- W1_10M, tracegrad compiled and whole step: the bytes that must move (x, a, b read, three
  gradients written: 6 * n * 4) at >= 80% of the measured copy bandwidth, for a whole call,
  for a call back to back, and for its generated kernels alone (each launched 20 times in a
  row between two device events: the device time of the fused pass, without the host's
  time between launches);
- every workload: tracegrad compiled's and whole step's medians at or under torch.compile's;
- compile time: tracegrad compiled's first call minus its median <= 1 s per workload, and
  about 0 in a second process, where CuPy's kernel cache on disk is warm; and the CUDA
  tier's build of each variant (its source rendered, then NVRTC), timed apart.

Each row runs in a fresh process (this file with ``--child``), as suite.py does; a timed call
returns once the device has finished (``cuda.synchronize``). The copy bandwidth is the best of
10 device-to-device copies of a 1 GiB float32 array, (bytes read + written) / time.

    python benchmarks/gpu.py                 # all workloads and systems (a few minutes)
    python benchmarks/gpu.py --quick         # short timings, no torch.compile
    python benchmarks/gpu.py --seconds 1     # 1 s of timed repetitions per row

Without CuPy or a GPU it says so and exits with status 0.
"""
import statistics
import time

from workloads import (TOLERANCE, W1_SIZES, WORKLOADS, benchmark_parser, fmt, load_average,
                       measure_in_process, mismatch_text, print_result, print_tracebacks,
                       run_child, unmeasured_text)

SYSTEMS = ("tracegrad compiled", "tracegrad whole step", "tracegrad eager", "CuPy by hand",
           "PyTorch eager", "torch.compile")
OURS = ("tracegrad compiled", "tracegrad whole step")
WARM = "tracegrad compiled, warm cache"     # the second process of tracegrad compiled
TIMING = (0.5, 3.0, 10)
QUICK_TIMING = (0.1, 0.3, 3)
BANDWIDTH_BYTES = 2 ** 30
BANDWIDTH_AIM = 0.8
BATCH = 20          # steps run back to back before one synchronisation
BATCHES = 15        # such batches, of which the median is taken
COMPILE_AIM_MS = 1000


def child(workload, system, quick, seconds=None):
    timing = QUICK_TIMING if quick else TIMING
    if seconds:
        timing = (min(timing[0], seconds / 2), seconds, timing[2])
    launches = record_launches() if system in OURS and workload == "W1_10M" else None
    builds = record_builds() if system.startswith("tracegrad") else []
    row = measure_in_process(workload, system.split(",")[0], timing, device="cuda",
                             more=back_to_back)
    row["system"] = system
    if launches and "median_ms" in row:
        row["kernel_ms"] = kernel_time(launches)
    if builds:
        row["build_ms"] = builds
    return row


def back_to_back(call, batches=BATCHES):
    """``{"back_to_back_ms": ms}``: a step's share of ``BATCH`` steps run back to back with
    one synchronisation at the end, the median of ``batches`` batches: a training loop that
    reads nothing on the host between steps, so the host prepares a step while the device
    runs the one before (each call's outputs are dropped as it returns)."""
    if not hasattr(call, "run"):
        return {}
    run, sync = call.run, call.sync
    for _ in range(BATCH):
        run()
    sync()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(BATCH):
            run()
        sync()
        times.append((time.perf_counter() - t0) / BATCH)
    return {"back_to_back_ms": statistics.median(times) * 1e3}


def record_builds():
    """The milliseconds each CUDA tier build takes from now on (rendering the source, then
    NVRTC through CuPy, or CuPy's disk cache when warm), one entry a variant."""
    from tracegrad.runtime import cuda_tier
    builds, start = [], cuda_tier._start

    def timed(variant):
        try:
            return start(variant)
        finally:
            builds.append(round(getattr(variant, "cuda_seconds", 0.0) * 1e3, 1))
    cuda_tier._start = timed
    return builds


def record_launches():
    """``{kernel name: (kernel, arguments)}`` of the generated CUDA kernels' launches from now
    on, the latest of each."""
    from tracegrad.codegen.cuda_launch import CudaKernel
    launches, call = {}, CudaKernel.__call__

    def recording(self, *args):
        launches[self.launch.name] = (self, args)
        return call(self, *args)
    CudaKernel.__call__ = recording
    return launches


def kernel_time(launches, repeats=20):
    """Milliseconds of device time for one launch of each of ``launches``' kernels, each timed
    alone by device events around ``repeats`` launches in a row (the device never waits for
    the host between them: a launch takes the host less time than the kernel takes)."""
    import cupy
    total = 0.0
    for kernel, args in launches.values():
        kernel(*args)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(repeats):
            kernel(*args)
        end.record()
        end.synchronize()
        total += cupy.cuda.get_elapsed_time(start, end) / repeats
    return total


def gpu_or_reason():
    """The CuPy module, or the reason there is no GPU to measure on."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None, "no GPU found"
    except Exception as e:      # noqa: BLE001 - no driver, no device: the reason is the text
        return None, f"CUDA is not available ({e})"
    return cupy, None


def copy_bandwidth(cupy, nbytes=BANDWIDTH_BYTES, repeats=10):
    """Bytes per second of a device-to-device copy (bytes read + bytes written), best of
    ``repeats``."""
    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    dst[...] = src
    cupy.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst[...] = src
        cupy.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


def device_name(cupy):
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else name


def print_table(rows, workloads):
    header = (f"{'workload':<9}{'system':<32}{'first call ms':>14}{'median ms':>11}"
              f"{'min ms':>10}{'/ CuPy':>9}{'b2b ms':>9}{'max rel err':>12}")
    print(header)
    print("-" * len(header))
    for workload in workloads:
        wrows = [r for r in rows if r["workload"] == workload]
        ref = next((r.get("median_ms") for r in wrows if r["system"] == "CuPy by hand"), None)
        for r in wrows:
            lead = f"{workload:<9}{r['system']:<32}"
            if unmeasured_text(r):
                print(lead + "  " + unmeasured_text(r))
            elif "median_ms" not in r:
                print(lead + f"{fmt(r['first_ms']):>14}  " + mismatch_text(r))
            else:
                ratio = r["median_ms"] / ref if ref else None
                print(lead + f"{fmt(r['first_ms']):>14}{fmt(r['median_ms'], '.3f'):>11}"
                             f"{fmt(r['min_ms'], '.3f'):>10}{fmt(ratio, '.3f'):>9}"
                             f"{fmt(r.get('back_to_back_ms'), '.3f'):>9}{r['error']:>12.1e}")


def print_aims(rows, workloads, bandwidth):
    by = {(r["workload"], r["system"]): r for r in rows}
    print("Aims on the GPU:")
    w1_bytes = 6 * W1_SIZES.get("W1_10M", 0) * 4
    for workload, system in ((w, s) for w in workloads for s in OURS if w == "W1_10M"):
        r = by.get((workload, system), {})
        for what, ms in (("a call", r.get("median_ms")),
                         (f"a call in {BATCH} back to back", r.get("back_to_back_ms")),
                         ("its kernels alone", r.get("kernel_ms"))):
            lead = f"  {workload} {system}, {what}, >= {BANDWIDTH_AIM:.0%} of copy bandwidth"
            if ms is None:
                print(f"{lead}: no measurement")
                continue
            share = w1_bytes / (ms / 1e3) / bandwidth
            print(f"{lead}: {ms:.3f} ms, {w1_bytes / (ms / 1e3) / 1e9:.0f} GB/s = {share:.0%}: "
                  + ("met" if share >= BANDWIDTH_AIM else "NOT met"))
    for workload, system in ((w, s) for w in workloads for s in OURS):
        ours = by.get((workload, system), {}).get("median_ms")
        peer = by.get((workload, "torch.compile"), {}).get("median_ms")
        if ours is None or peer is None:
            print(f"  {workload} {system} at or under torch.compile: no measurement")
            continue
        print(f"  {workload} {system} at or under torch.compile: {ours:.3f} vs {peer:.3f} ms: "
              + ("met" if ours <= peer else "NOT met"))
    for system, what in (("tracegrad compiled", "cold"), (WARM, "warm CuPy cache")):
        builds = [f"{w} {'/'.join(map(str, by[(w, system)]['build_ms']))} ms"
                  for w in workloads if by.get((w, system), {}).get("build_ms")]
        if builds:
            print(f"  CUDA tier build (render + NVRTC) per variant, {what}, <= {COMPILE_AIM_MS} "
                  f"ms: " + "; ".join(builds))
        parts = []
        for workload in workloads:
            r = by.get((workload, system), {})
            if "median_ms" in r:
                parts.append(f"{workload} {r['first_ms'] - r['median_ms']:.0f} ms")
        if parts:
            print(f"  compile (first call - median), {what}, <= {COMPILE_AIM_MS} ms: "
                  + "; ".join(parts))


def main():
    ap = benchmark_parser(__doc__)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--seconds", type=float, default=None,
                    help=f"seconds of timed repetitions per row (default {TIMING[1]:g})")
    args = ap.parse_args()
    if args.child:
        print_result(child(*args.child, args.quick, args.seconds))
        return
    cupy, reason = gpu_or_reason()
    if cupy is None:
        print(f"benchmarks/gpu.py: nothing to measure: {reason}. The CPU figures are in "
              "benchmarks/suite.py.")
        return
    workloads = [w for w in WORKLOADS if w in args.workloads.split(",")]
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    if args.quick:
        systems = [s for s in systems if s != "torch.compile"]
    if "tracegrad compiled" in systems:
        systems.insert(systems.index("tracegrad compiled") + 1, WARM)
    bandwidth = copy_bandwidth(cupy)
    flags = (["--quick"] if args.quick else []) + (
        ["--seconds", str(args.seconds)] if args.seconds else [])
    rows = [run_child(__file__, w, s, flags, timeout=600) for w in workloads for s in systems]
    warm, measure_s, reps = QUICK_TIMING if args.quick else TIMING
    if args.seconds:
        warm, measure_s = min(warm, args.seconds / 2), args.seconds
    print(f"GPU: {device_name(cupy)}; one step (loss + gradients) per call, ending with the "
          f"device synchronised; load average {fmt(load_average(), '.1f')}")
    print(f"first call timed on its own; steady state after {warm:g} s warm-up, {measure_s:g} s"
          f" of repetitions (at least {reps}); / CuPy = median / CuPy by hand's median; b2b ="
          f" a step of {BATCH} run back to back, one synchronisation at the end (median of"
          f" {BATCHES}); a system is timed only if its max rel err < {TOLERANCE:g}")
    print_table(rows, workloads)
    print(f"copy bandwidth: {bandwidth / 1e9:.0f} GB/s (best of 10 copies of "
          f"{BANDWIDTH_BYTES >> 20} MiB, bytes read + written)")
    print_aims(rows, workloads, bandwidth)
    if args.verbose:
        print_tracebacks(rows)


if __name__ == "__main__":
    main()
