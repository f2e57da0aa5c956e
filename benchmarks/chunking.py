"""Where chunked runs of fused groups start to pay, and how large a chunk should be.

The group is W1's forward (``sum(gelu_tanh(x*a + b))``, 12 elementwise ops and a
sum over float32 vectors), compiled with tracegrad and run three ways at each
size: the kernel called once on whole arrays (plain), in chunks on one thread,
and in chunks on every core. Medians of repeated calls, in one process.
``codegen/fused.py`` takes ``CHUNK_MIN`` and ``CHUNK_ELEMS`` from this table.

    python benchmarks/chunking.py                  # sizes 2**12 .. 2**24
    python benchmarks/chunking.py --chunks         # also chunk sizes at 2**23 elements
"""
import argparse
import os
import statistics
import time

import numpy as np

CHUNK = 1 << 17         # elements a chunk, for the size table


def gelu_sum(x, a, b):
    import tracegrad as tg
    u = x * a + b
    return (0.5 * u * (1 + tg.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))).sum()


def timed(fn, seconds=0.4, min_reps=5):
    fn()
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < min_reps:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def run(n, chunk_min, chunk_elems, threads):
    import tracegrad as tg
    from tracegrad.codegen import fused
    fused.CHUNK_MIN, fused.CHUNK_ELEMS, fused.THREADS = chunk_min, chunk_elems, threads
    rng = np.random.default_rng(0)
    args = [tg.from_numpy(rng.standard_normal(n, dtype=np.float32)) for _ in range(3)]
    f = tg.compile(gelu_sum)
    with tg.no_grad():
        return timed(lambda: f(*args))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", action="store_true", help="also compare chunk sizes")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"W1 forward group, float32, {cores} core(s), load average {load:.1f}; ms (median)")
    print(f"{'elements':>10}{'plain':>10}{'chunks x1':>11}{f'chunks x{cores}':>11}"
          f"{'best':>9}")
    print(f"chunks of {CHUNK} elements")
    for p in range(14, 25):
        n = 1 << p
        plain = run(n, 1 << 40, CHUNK, 1)
        one = run(n, 0, CHUNK, 1)
        many = run(n, 0, CHUNK, cores)
        best = min((plain, "plain"), (one, "x1"), (many, f"x{cores}"))[1]
        print(f"{'2**' + str(p):>10}{plain:>10.3f}{one:>11.3f}{many:>11.3f}{best:>9}")
    if args.chunks:
        n = 1 << 23
        print(f"\nchunk size at {n} elements, {cores} thread(s): ms (median)")
        for c in range(12, 20):
            print(f"{'2**' + str(c):>10}{run(n, 0, 1 << c, cores):>10.3f}")


if __name__ == "__main__":
    main()
