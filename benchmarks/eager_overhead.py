"""Eager overhead: microseconds per op for a forward+backward chain of small ops.

The chain applies 1,000 ops (add, mul, tanh in turn) to 16-element float32
tensors, then runs backward. Reported: the median and minimum over repeats
of (forward + backward time) / 1,000, and the medians of the forward and the
backward alone, for tracegrad eager and, when installed, PyTorch eager. The
systems take turns repeat by repeat, so a change of load touches both.

    python benchmarks/eager_overhead.py [--ops 1000] [--repeats 30]
"""
import argparse
import os
import statistics
import time

import numpy as np


def chain(lib, x, w, n_ops):
    h = x
    for i in range(n_ops):
        k = i % 3
        if k == 0:
            h = h + w
        elif k == 1:
            h = h * w
        else:
            h = lib.tanh(h)
    return h.sum()


class Runner:
    """One system's chain, timed one repeat at a time."""

    def __init__(self, name, lib, n_ops):
        data = np.random.default_rng(0).standard_normal(16).astype(np.float32)
        self.name, self.lib, self.n_ops = name, lib, n_ops
        self.x = lib.tensor(data, requires_grad=True)
        self.w = lib.tensor(data * 0.5, requires_grad=True)
        self.forward, self.backward = [], []

    def repeat(self):
        self.x.grad = self.w.grad = None
        t0 = time.perf_counter()
        loss = chain(self.lib, self.x, self.w, self.n_ops)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        self.forward.append((t1 - t0) / self.n_ops * 1e6)
        self.backward.append((t2 - t1) / self.n_ops * 1e6)
        self.grad = self.x.grad.numpy().copy()

    def row(self, warmup=3):
        f, b = self.forward[warmup:], self.backward[warmup:]
        total = [x + y for x, y in zip(f, b)]
        return statistics.median(total), min(total), statistics.median(f), statistics.median(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    import tracegrad
    runners = [Runner("tracegrad eager", tracegrad, args.ops)]
    try:
        import torch
        torch.set_num_threads(1)
        runners.append(Runner("PyTorch eager", torch, args.ops))
    except ImportError:
        pass
    for _ in range(args.repeats + 3):
        for r in runners:
            r.repeat()
    ref = runners[-1]
    ref_total = ref.row()[0]
    print(f"forward+backward chain of {args.ops} ops (add, mul, tanh) on 16-element float32; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'system':<18}{'median us/op':>14}{'min us/op':>12}{'forward':>10}{'backward':>10}"
          f"{'vs PyTorch':>12}")
    for r in runners:
        if not np.allclose(r.grad, ref.grad, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{r.name}: gradient differs from {ref.name}")
        med, lo, f, b = r.row()
        print(f"{r.name:<18}{med:>14.2f}{lo:>12.2f}{f:>10.2f}{b:>10.2f}{med / ref_total:>11.2f}x")


if __name__ == "__main__":
    main()
