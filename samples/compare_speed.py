"""Eager against compiled on your machine: the same training step timed both ways.

An MLP step (forward, loss, backward) on a fixed batch runs eagerly and through
``tracegrad.compile``; the sample checks that both give the same loss and
gradients, then prints the median time of each and the speed-up.

    python samples/compare_speed.py [--batch 64] [--width 256] [--seconds 1.0]
"""
import argparse
import statistics
import time

import tracegrad as torch
from tracegrad import nn


def median_ms(fn, seconds):
    fn()                                   # the first call (a compiled one traces here)
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, args.width), nn.GELU(), nn.Linear(args.width, args.width),
                          nn.GELU(), nn.Linear(args.width, 10))
    x, y = torch.randn(args.batch, 32), torch.randint(0, 10, (args.batch,))
    criterion = nn.CrossEntropyLoss()
    params = list(model.parameters())

    def step(inputs, labels):
        return criterion(model(inputs), labels)
    compiled = torch.compile(step)

    def run(fn):
        loss = fn(x, y)
        return loss, torch.autograd.grad(loss, params)

    (le, ge), (lc, gc) = run(step), run(compiled)
    worst = max((a - b).abs().max().item() for a, b in zip(ge, gc))
    print(f"loss eager {le.item():.6f}  compiled {lc.item():.6f}  max grad difference {worst:.2e}")
    eager_ms = median_ms(lambda: run(step), args.seconds)
    compiled_ms = median_ms(lambda: run(compiled), args.seconds)
    print(f"eager     {eager_ms:8.3f} ms per step")
    print(f"compiled  {compiled_ms:8.3f} ms per step  ({eager_ms / compiled_ms:.2f}x eager)")
    print(f"first compiled call (trace + passes + codegen): "
          f"{compiled.stats['compile_seconds'] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
