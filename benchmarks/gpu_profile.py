"""Where a model's training step spends its GPU time, op by op (tracegrad eager, profiled).

For each model named (default resnet18), the zoo's training step at its GPU sizes (models.py
--device cuda's: ResNet-18 at 224x224, batch 64) runs eagerly on the GPU a few times, then
one step runs under ``tracegrad.profiler.profile`` with the CUDA activity (device events
around each op); the ops are printed by their total device time, so the ones that make a
step slow are named. PyTorch eager's step, profiled the same way by ``torch.profiler``,
follows when PyTorch is installed, for the same table on its side.

    python benchmarks/gpu_profile.py                       # resnet18
    python benchmarks/gpu_profile.py --models resnet18,gpt_small --top 30
    python benchmarks/gpu_profile.py --compiled     # the compiled whole step's graphs, kernels

Without CuPy or a GPU it says so and exits with status 0.
"""
import argparse
import statistics
import time

import zoo
from gpu import gpu_or_reason, kernel_time, record_launches


def profile(torch, name, top, device="cuda", warm=3):
    size = "gpu" if device == "cuda" else "full"       # ResNet-18: 224x224, batch 64
    step, _ = zoo.program(torch, name, zoo.config(name, size), "eager", device=device)
    for i in range(warm):
        step(i)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    prof = torch.profiler
    activities = [prof.ProfilerActivity.CPU] + (
        [prof.ProfilerActivity.CUDA] if device == "cuda" else [])
    with prof.profile(activities=activities) as p:
        step(warm)
        sync()
    sort = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    print(p.key_averages().table(sort_by=sort, row_limit=top))


def compiled_report(name, top, steps=6):
    """The zoo's whole training step of ``name`` compiled (``tracegrad.compile`` of the step)
    on the GPU: how its parts run (``explain``'s CUDA graph lines), its median synchronised
    step, and, with ``TRACEGRAD_CUDA_GRAPHS=0`` (set by the caller), each generated
    kernel's device time alone (``gpu.kernel_time``) against the whole step's device time
    between two events: what is left is CuPy's and cuBLAS's share (products, convolutions'
    columns, copies)."""
    import tracegrad
    launches = record_launches()
    step, compiled = zoo.program(tracegrad, name, zoo.config(name, "gpu"), "step",
                                 device="cuda")
    for i in range(steps):
        step(i)
    tracegrad.cuda.synchronize()
    print("\n".join(line for line in compiled[0].explain().splitlines()
                    if "CUDA graph" in line or "compiled" in line))
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        step(i)
        tracegrad.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    print(f"{name} whole step, synchronised: median {statistics.median(times):.2f} ms")
    import cupy
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    step(0)
    end.record()
    end.synchronize()
    total = cupy.cuda.get_elapsed_time(start, end)
    each = sorted(((kernel_time({k: v}, repeats=5), k) for k, v in launches.items()),
                  reverse=True)
    ours = sum(ms for ms, _ in each)
    print(f"one step between two events: {total:.2f} ms; its {len(each)} generated kernels "
          f"alone: {ours:.2f} ms (the rest: CuPy, cuBLAS, launch gaps)")
    for ms, k in each[:top]:
        print(f"  {ms:8.3f} ms  {k}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to try the script")
    ap.add_argument("--compiled", action="store_true",
                    help="the compiled whole step instead: graphs, kernels' device times")
    args = ap.parse_args()
    cupy, reason = gpu_or_reason() if args.device == "cuda" else (True, None)
    if cupy is None:
        print(f"benchmarks/gpu_profile.py: nothing to measure: {reason}")
        return
    if args.compiled:
        for name in args.models.split(","):
            compiled_report(name, args.top)
        return
    import tracegrad
    libs = [tracegrad]
    try:
        import torch
        libs.append(torch)
    except ImportError:
        pass
    for name in args.models.split(","):
        for lib in libs:
            print(f"== {name}, {lib.__name__} eager, one training step on the GPU ==")
            profile(lib, name, args.top, args.device)


if __name__ == "__main__":
    main()
