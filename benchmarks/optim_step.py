"""Optimizer step: milliseconds per ``optimizer.step()``, the per-parameter loop against the
fused (``foreach``) step, in tracegrad and in PyTorch.

The parameters are a model of the zoo (``benchmarks/zoo.py``, its full sizes) built in each
library, each given a fixed random gradient; the optimizer is the one the zoo's training
step uses (the small GPT: AdamW over two groups, weight decay on the matrices only; W3's
MLP: SGD), and AdamW on W3's MLP too (large arrays: memory-bound, where the fused step
saves allocations rather than Python calls). Every repeat times ``--inner`` steps of each
system in turn (tracegrad foreach False and True, PyTorch foreach False and True), so a
change of load touches all; reported are the medians per step and the ratios to
tracegrad's loop, with the load (``uptime``) before and after.

    python benchmarks/optim_step.py [--repeats 30] [--inner 20] [--torch-threads N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

import tracegrad  # noqa: E402


def _gpt_adamw(lib, params, foreach):
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return lib.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), foreach=foreach)


WORKLOADS = {   # name -> (zoo model, its optimizer as the zoo's training step makes it)
    "gpt_small AdamW": ("gpt_small", _gpt_adamw),
    "w3_mlp SGD": ("w3_mlp", lambda lib, params, foreach: lib.optim.SGD(
        params, lr=0.01, foreach=foreach)),
    "w3_mlp AdamW": ("w3_mlp", lambda lib, params, foreach: lib.optim.AdamW(
        params, lr=1e-3, foreach=foreach)),
}


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return f"load average {os.getloadavg()[0]:.2f}"


class System:
    """One library's model and optimizer, its parameters holding fixed random gradients."""

    def __init__(self, name, lib, model, make_optimizer, foreach):
        self.name = name
        params = [p for p in zoo.build(lib, model, zoo.config(model))["model"].parameters()
                  if p.requires_grad]
        rng = np.random.default_rng(0)
        for p in params:
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
        self.n_params = len(params)
        self.optimizer = make_optimizer(lib, params, foreach)
        self.times = []

    def repeat(self, inner):
        step = self.optimizer.step
        t0 = time.perf_counter()
        for _ in range(inner):
            step()
        self.times.append((time.perf_counter() - t0) / inner * 1e3)


def systems(model, make_optimizer, torch):
    found = [System(f"tracegrad foreach={f}", tracegrad, model, make_optimizer, f)
             for f in (False, True)]
    if torch is not None:
        found += [System(f"torch foreach={f}", torch, model, make_optimizer, f)
                  for f in (False, True)]
    return found


def run(name, torch, repeats, inner, warmup=3):
    model, make_optimizer = WORKLOADS[name]
    runners = systems(model, make_optimizer, torch)
    for _ in range(warmup + repeats):
        for r in runners:
            r.repeat(inner)
    base = statistics.median(runners[0].times[warmup:])
    print(f"\n{name}: {runners[0].n_params} parameters, ms per step() (median of {repeats} "
          f"x {inner} steps; ratio to tracegrad's loop)")
    for r in runners:
        median = statistics.median(r.times[warmup:])
        print(f"  {r.name:24s} {median:8.3f} ms   min {min(r.times[warmup:]):8.3f}   "
              f"x{base / median:5.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="PyTorch's intra-op threads (its default if not given)")
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    args = ap.parse_args()
    try:
        import torch
        if args.torch_threads:
            torch.set_num_threads(args.torch_threads)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    except ImportError:
        torch = None
        print("torch not installed: tracegrad only")
    print(f"numpy {np.__version__}; before: {uptime()}")
    for name in args.workloads:
        run(name, torch, args.repeats, args.inner)
    print(f"\nafter: {uptime()}")


if __name__ == "__main__":
    main()
