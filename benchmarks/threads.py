"""From how many elements a C kernel's outer loop should run on several threads.

The kernel is W1's forward group (``sum(gelu_tanh(x*a + b))``) on the C tier, at
sizes 2**10 .. 2**22, on one thread and on every core (the parallel threshold
forced to 0 so both run as asked), interleaved in one process. The first size
where every core beats one thread, on a quiet machine, is ``cstyle.PARALLEL_MIN``.

    python benchmarks/threads.py
"""
import os
import statistics
import time

import numpy as np


def gelu_sum(x, a, b):
    import tracegrad as tg
    u = x * a + b
    return (0.5 * u * (1 + tg.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))).sum()


def kernel(n):
    """The C tier's entry of W1's forward group over ``n`` float32 elements, and its args."""
    import tracegrad as tg
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    f = tg.compile(gelu_sum, backend="c")
    with tg.no_grad():
        f(*[tg.from_numpy(a) for a in arrays])
    v = f._last
    ws = v.namespace["_forward_workspace"].take()
    return v.namespace["forward_fused0"], arrays + [ws]


def timed(fn, reps=50):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    import tracegrad as tg
    from tracegrad.codegen import cstyle
    cstyle.PARALLEL_MIN = 0
    cores = tg.parallel.max_threads()
    load = os.getloadavg()[0]
    print(f"W1 forward kernel on the C tier, float32, {cores} core(s), load average "
          f"{load:.1f}; ms (median of 50)")
    print(f"{'elements':>10}{'1 thread':>11}{f'{cores} threads':>11}{'ratio':>8}")
    for p in range(10, 23):
        n = 1 << p
        fn, args = kernel(n)
        one = many = None
        for _ in range(3):          # interleaved, so a burst of load hits both
            tg.set_num_threads(1)
            t1 = timed(lambda: fn(*args))
            tg.set_num_threads(cores)
            t2 = timed(lambda: fn(*args))
            one, many = min(one or t1, t1), min(many or t2, t2)
        print(f"{'2**' + str(p):>10}{one:>11.4f}{many:>11.4f}{many / one:>8.2f}")


if __name__ == "__main__":
    main()
