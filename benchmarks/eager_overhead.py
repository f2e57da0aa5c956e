"""Eager overhead: microseconds per op for a forward+backward chain of small ops.

The chain applies 1,000 ops (add, mul, tanh in turn) to 16-element float32
tensors, then runs backward. Reported: the median and minimum over repeats
of (forward + backward time) / 1,000, for tracegrad eager and, when
installed, PyTorch eager.

    python benchmarks/eager_overhead.py [--ops 1000] [--repeats 30]
"""
import argparse
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


def measure(lib, n_ops, repeats):
    data = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    x = lib.tensor(data, requires_grad=True)
    w = lib.tensor(data * 0.5, requires_grad=True)
    times = []
    for _ in range(repeats + 3):
        x.grad = w.grad = None
        t0 = time.perf_counter()
        loss = chain(lib, x, w, n_ops)
        loss.backward()
        times.append((time.perf_counter() - t0) / n_ops * 1e6)
    times = times[3:]
    return statistics.median(times), min(times), loss.item(), x.grad.numpy().copy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    import tracegrad
    rows = [("tracegrad eager",) + measure(tracegrad, args.ops, args.repeats)]
    try:
        import torch
        torch.set_num_threads(1)
        rows.append(("PyTorch eager",) + measure(torch, args.ops, args.repeats))
    except ImportError:
        pass
    ref = rows[-1]
    print(f"forward+backward chain of {args.ops} ops (add, mul, tanh) on 16-element float32")
    print(f"{'system':<18}{'median us/op':>14}{'min us/op':>12}{'vs PyTorch':>12}")
    for name, med, lo, loss, grad in rows:
        if not np.allclose(grad, ref[4], rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{name}: gradient differs from {ref[0]}")
        print(f"{name:<18}{med:>14.2f}{lo:>12.2f}{med / ref[1]:>11.2f}x")


if __name__ == "__main__":
    main()
