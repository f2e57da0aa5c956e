"""Dynamic shapes: W2 with the batch size cycling over 1-64, dynamic against static.

W2 is WORKLOADS.md's MLP step (784-128-10, cross-entropy, gradients of W1, b1, W2, b2),
its parameters drawn as specified there; the batches are drawn from a second generator
(seed 1), one per size 1..64, and called in a fixed shuffled order (a cycle).

Systems, in one process, interleaved cycle by cycle:

* tracegrad dynamic: ``tg.compile(step)`` as it comes (automatic dynamic: after the
  first size change, one variant with a symbolic batch serves every size >= 2);
* tracegrad static: ``tg.compile(step, dynamic=False, max_variants=128)``: one variant
  per size, each specialised (and built for the C tier) for its own shapes;
* NumPy by hand: the reference forward+backward of workloads.py.

Reported per system: the first cycle (compiles included: traces, passes, codegen; the C
builds run in the background and are waited for before the steady state), then the
median and minimum over cycles of the time per call, and the ratio dynamic / static. The
aim from the issue: dynamic within 1.2x of static. Every system's loss and gradients
are checked against NumPy's at every size first.

    python benchmarks/dynamic.py            # about a minute
    python benchmarks/dynamic.py --quick    # a few cycles
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import load_average, make_data, numpy_w2  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.nn.functional as F  # noqa: E402
from tracegrad.runtime import tiers  # noqa: E402

SIZES = range(1, 65)


def batches():
    rng = np.random.default_rng(1)
    out = {}
    for n in SIZES:
        x = rng.standard_normal((n, 784), dtype=np.float32)
        y = rng.integers(0, 10, n).astype(np.int64)
        out[n] = (x, y)
    order = list(SIZES)
    np.random.default_rng(2).shuffle(order)
    return out, order


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few cycles only")
    args = ap.parse_args()
    _, arrays, _ = make_data("W2")
    params = [tg.tensor(a, requires_grad=True) for a in arrays[2:]]
    W1, b1, W2, b2 = params

    def step(x, y):
        h = tg.relu(x @ W1 + b1)
        return F.cross_entropy(h @ W2 + b2, y)

    data, order = batches()
    tensors = {n: (tg.tensor(x), tg.tensor(y)) for n, (x, y) in data.items()}
    systems = {
        "tracegrad dynamic": tg.compile(step),
        "tracegrad static": tg.compile(step, dynamic=False, max_variants=128),
    }

    def run_tg(f):
        def cycle():
            for n in order:
                loss = f(*tensors[n])
                tg.autograd.grad(loss, params)
        return cycle

    def run_numpy():
        raw = [a for a in arrays[2:]]
        for n in order:
            numpy_w2(data[n][0], data[n][1], *raw)

    cycles = {name: run_tg(f) for name, f in systems.items()}
    cycles["NumPy by hand"] = run_numpy
    load0 = load_average()
    first = {}
    for name, cycle in cycles.items():      # the first cycle: compiles
        t0 = time.perf_counter()
        cycle()
        first[name] = time.perf_counter() - t0
    for f in systems.values():              # the C builds, before the steady state
        for v in f._variants:
            tiers.wait(v)
    worst = 0.0                             # every size checked against NumPy
    for name, f in systems.items():
        for n in SIZES:
            loss = f(*tensors[n])
            got = [loss] + list(tg.autograd.grad(loss, params))
            want = numpy_w2(data[n][0], data[n][1], *arrays[2:])
            for g, w in zip(got, want):
                w = np.asarray(w)
                worst = max(worst, float(np.abs(g.detach().numpy() - w).max()
                                         / max(np.abs(w).max(), 1e-30)))
    rounds = 3 if args.quick else 15
    per_call = {name: [] for name in cycles}
    for _ in range(rounds):
        for name, cycle in cycles.items():
            t0 = time.perf_counter()
            cycle()
            per_call[name].append((time.perf_counter() - t0) / len(order) * 1e6)
    print(f"W2, batch sizes 1-64 cycling ({len(order)} calls a cycle), {os.cpu_count()} CPU(s), "
          f"load average {load0:.1f} before / {load_average():.1f} after; "
          f"max rel error over every size {worst:.1e}")
    print(f"{'system':<20}{'first cycle ms':>16}{'compiles':>10}{'median us/call':>16}"
          f"{'min us/call':>13}")
    for name in cycles:
        compiles = systems[name].stats["compiles"] if name in systems else "-"
        print(f"{name:<20}{first[name] * 1e3:>16.1f}{compiles:>10}"
              f"{statistics.median(per_call[name]):>16.1f}{min(per_call[name]):>13.1f}")
    dyn = statistics.median(per_call["tracegrad dynamic"])
    sta = statistics.median(per_call["tracegrad static"])
    print(f"dynamic / static: {dyn / sta:.2f}x (aim: at most 1.2x); "
          f"dynamic / NumPy by hand: {dyn / statistics.median(per_call['NumPy by hand']):.2f}x")


if __name__ == "__main__":
    main()
