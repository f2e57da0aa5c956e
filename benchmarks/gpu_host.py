"""Where a compiled step's time goes on the GPU: the host's share and the device's.

For each workload named (default W1_1M, W1_10M, W2), tracegrad compiled and CuPy by hand run
one step per call as ``gpu.py`` times them, but without waiting for the device at the end;
``cupyx.profiler.benchmark`` reports the host time of a call (Python, argument checks,
launches) and the device time between events around it: where the host time is the larger,
the GPU waits for the host. Then the compiled step's host time is profiled (``cProfile``,
sorted by own time), so that the functions the host spends its time in are named.

    python benchmarks/gpu_host.py                      # W1_1M, W1_10M, W2
    python benchmarks/gpu_host.py --workloads W2 --top 40

Without CuPy or a GPU it says so and exits with status 0.
"""
import argparse
import cProfile
import io
import pstats

from gpu import gpu_or_reason
from workloads import WORKLOADS, make_data, prepare


def step_of(system, workload):
    names, arrays, wrt = make_data(workload)
    make, _ = prepare(system, workload, names, arrays, wrt, device="cuda", synchronize=False)
    call = make()
    for _ in range(20):
        call()
    return call


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="W1_1M,W1_10M,W2")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    cupy, reason = gpu_or_reason()
    if cupy is None:
        print(f"benchmarks/gpu_host.py: nothing to measure: {reason}.")
        return
    from cupyx.profiler import benchmark
    workloads = [w for w in WORKLOADS if w in args.workloads.split(",")]
    print(f"{'workload':<9}{'system':<22}{'host us':>10}{'device us':>11}")
    profiles = {}
    for workload in workloads:
        for system in ("tracegrad compiled", "CuPy by hand"):
            call = step_of(system, workload)
            r = benchmark(call, n_repeat=args.repeat, n_warmup=10)
            host, device = r.cpu_times.mean() * 1e6, r.gpu_times.mean() * 1e6
            print(f"{workload:<9}{system:<22}{host:>10.1f}{device:>11.1f}")
            if system == "tracegrad compiled":
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(args.repeat):
                    call()
                prof.disable()
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
                profiles[workload] = text.getvalue()
    for workload, text in profiles.items():
        print(f"\n== {workload}, tracegrad compiled: {args.repeat} calls, by own time ==")
        print(text[text.find("ncalls"):])


if __name__ == "__main__":
    main()
