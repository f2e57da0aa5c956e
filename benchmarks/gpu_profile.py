"""Where a model's training step spends its GPU time, op by op (tracegrad eager, profiled).

For each model named (default resnet18), the zoo's training step runs eagerly on the GPU a
few times, then one step runs under ``tracegrad.profiler.profile`` with the CUDA activity
(device events around each op); the ops are printed by their total device time, so the
ones that make a step slow are named. PyTorch eager's step, profiled the same way by
``torch.profiler``, follows when PyTorch is installed, for the same table on its side.

    python benchmarks/gpu_profile.py                       # resnet18
    python benchmarks/gpu_profile.py --models resnet18,gpt_small --top 30

Without CuPy or a GPU it says so and exits with status 0.
"""
import argparse

import zoo
from gpu import gpu_or_reason


def profile(torch, name, top, device="cuda", warm=3):
    step, _ = zoo.program(torch, name, zoo.config(name), "eager", device=device)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to try the script")
    args = ap.parse_args()
    cupy, reason = gpu_or_reason() if args.device == "cuda" else (True, None)
    if cupy is None:
        print(f"benchmarks/gpu_profile.py: nothing to measure: {reason}")
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
