"""Speed against the values: W1_1M's step on two draws of the same shapes and distribution.

The time of a memory-bound step should depend on the shapes and dtypes, not on the values.
An earlier measurement saw W1_1M's C-tier step take 9-11 ms on the data of WORKLOADS.md
(x, a, b drawn in turn by one ``default_rng(0)`` as ``standard_normal(n, dtype=float32)``)
and 2.0-2.7 ms on arrays drawn as ``default_rng(i).standard_normal(n).astype(float32)``.
This prints both rows side by side, for each system, with the ratio of the two medians
(1.00 means the values do not matter):

    python benchmarks/values.py            # about 20 s
    python benchmarks/values.py --quick    # smoke run

Systems: the hand-written NumPy step (``workloads.numpy_w1``), ``np.tanh`` of the step's
argument alone, and tracegrad compiled on its NumPy and C tiers (loss and the three
gradients, checked against the hand-written ones first). Rounds interleave the systems and the datasets, so load touches all alike; each
figure is the median over the rounds' medians. One process, threads as each library
defaults; the load average is printed.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402 - benchmarks/ is not a package

N = 1_000_000


def datasets(n=N):
    """``spec``: WORKLOADS.md's draw; ``other``: one generator per array, float64 cast."""
    rng = np.random.default_rng(0)
    spec = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    other = [np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(3)]
    return {"spec": spec, "other": other}


def tanh_argument(x, a, b):
    u = x * a + b
    return np.float32(0.7978845608) * (u + np.float32(0.044715) * u ** 3)


def systems():
    """name -> (prepare(arrays) -> args, run(*args))."""
    import tracegrad as tg
    w1 = workloads.autograd_steps(tg)["W1_1M"]

    def step(x, a, b):
        return tg.autograd.grad(w1(x, a, b), (x, a, b))

    def tensors(arrays):
        return [tg.tensor(a, requires_grad=True) for a in arrays]

    out = {"NumPy by hand": (lambda arrays: arrays, workloads.numpy_w1),
           "np.tanh alone": (lambda arrays: [tanh_argument(*arrays)], np.tanh)}
    for backend in ("numpy", "c"):
        out[f"tracegrad {backend}"] = (tensors, tg.compile(step, backend=backend))
    return out


def check(grads, arrays, name):
    """A system's gradients against the hand-written step's, before its time counts."""
    got = [g.numpy() for g in grads]
    err = workloads.rel_error(got, list(workloads.numpy_w1(*arrays)[1:]))
    if not err < workloads.TOLERANCE:
        raise SystemExit(f"{name}: gradients differ from NumPy's by {err:.2e}")


def median_ms(run, args, seconds, minimum=5):
    times, end = [], time.perf_counter() + seconds
    while len(times) < minimum or time.perf_counter() < end:
        t0 = time.perf_counter()
        run(*args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def measure(rounds, seconds, n=N):
    data = datasets(n)
    found = {}
    for name, (prepare, run) in systems().items():
        for label, arrays in data.items():
            args = prepare(arrays)
            first = run(*args)          # a compiled system compiles here, untimed
            if name.startswith("tracegrad"):
                check(first, arrays, name)
            found[(name, label)] = (run, args, [])
    for _ in range(rounds):
        for run, args, medians in found.values():
            medians.append(median_ms(run, args, seconds))
    return {key: float(np.median(m)) for key, (_, _, m) in found.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--quick", action="store_true", help="1 round, 0.05 s, n = 10,000")
    args = ap.parse_args(argv)
    rounds, seconds, n = (1, 0.05, 10_000) if args.quick else (args.rounds, args.seconds, N)
    print(f"W1 step on two draws, n = {n:,}; load average {os.getloadavg()[0]:.2f} "
          f"at the start")
    result = measure(rounds, seconds, n)
    print(f"{'system':<16} {'spec ms':>9} {'other ms':>9} {'spec/other':>11}")
    for name in dict.fromkeys(k[0] for k in result):
        a, b = result[(name, "spec")], result[(name, "other")]
        print(f"{name:<16} {a:>9.3f} {b:>9.3f} {a / b:>11.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
