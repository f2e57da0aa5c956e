"""Per-sample gradients of W3's MLP (see WORKLOADS.md): ``vmap(grad(loss))`` against a loop.

    python benchmarks/per_sample.py [--batch 32] [--rounds 5]

W3's data and MLP (``y = gelu_tanh(x@W1 + b1)@W2 + b2``, ``loss = mean((y - t)**2)``), the
loss of one example at a time; the gradients of W1, b1, W2 and b2 for every example of the
first ``--batch`` rows (all 256 rows would be 4.3 GB of per-sample gradients). Systems:
tracegrad ``vmap(grad)`` eager and compiled, tracegrad's Python loop of ``grad`` over the
examples, ``torch.func.vmap(grad)`` and PyTorch's loop. Each system's gradients are checked
against ``torch.func``'s before it is timed; the systems run interleaved, one call each per
round after a warm-up round, and the table gives each one's first call (compile time
included), median and minimum, and its median over tracegrad vmap eager's. Prints
``uptime`` first and last: the machine may be shared.
"""
import argparse
import statistics
import subprocess
import time

import numpy as np

import tracegrad as tg

KEYS = ("W1", "b1", "W2", "b2")


def w3_data(batch):
    """W3's tensors as WORKLOADS.md draws them, the first ``batch`` rows of x and t."""
    rng = np.random.default_rng(0)

    def n(shape, s):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(s)
    x, t = n((256, 1024), 1), n((256, 1024), 1)
    params = dict(W1=n((1024, 2048), 1 / np.sqrt(1024)), b1=n(2048, 0.1),
                  W2=n((2048, 1024), 1 / np.sqrt(2048)), b2=n(1024, 0.1))
    return params, x[:batch], t[:batch]


def make_loss(L):
    def loss(p, x, t):
        u = x @ p["W1"] + p["b1"]
        h = 0.5 * u * (1 + L.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        y = h @ p["W2"] + p["b2"]
        return ((y - t) ** 2).mean()
    return loss


def systems(params, x, t):
    """name -> a call returning the per-sample gradients (a dict of arrays)."""
    import torch
    tp = {k: tg.tensor(v) for k, v in params.items()}
    tx, tt = tg.tensor(x), tg.tensor(t)
    pp = {k: torch.tensor(v) for k, v in params.items()}
    px, pt = torch.tensor(x), torch.tensor(t)
    tg_loss, torch_loss = make_loss(tg), make_loss(torch)
    tg_vmap = tg.func.vmap(tg.func.grad(tg_loss), in_dims=(None, 0, 0))
    tg_compiled = tg.compile(tg_vmap)
    torch_vmap = torch.func.vmap(torch.func.grad(torch_loss), in_dims=(None, 0, 0))
    tg_grad, torch_grad = tg.func.grad(tg_loss), torch.func.grad(torch_loss)

    def loop(grad, p, xs, ts, stack):
        per = [grad(p, xs[i], ts[i]) for i in range(xs.shape[0])]
        return {k: stack([g[k] for g in per]) for k in KEYS}

    def arrays(g):
        return {k: np.asarray(g[k].detach().numpy()) for k in KEYS}
    return {
        "tracegrad vmap(grad) eager": lambda: arrays(tg_vmap(tp, tx, tt)),
        "tracegrad compile(vmap(grad))": lambda: arrays(tg_compiled(tp, tx, tt)),
        "tracegrad loop of grad": lambda: arrays(loop(tg_grad, tp, tx, tt, tg.stack)),
        "torch.func vmap(grad)": lambda: arrays(torch_vmap(pp, px, pt)),
        "torch loop of grad": lambda: arrays(loop(torch_grad, pp, px, pt, torch.stack)),
    }


def error(got, ref):
    return max(float(np.abs(got[k] - ref[k]).max() / np.abs(ref[k]).max()) for k in KEYS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    params, x, t = w3_data(args.batch)
    calls = systems(params, x, t)
    ref = calls["torch.func vmap(grad)"]()
    first, times = {}, {name: [] for name in calls}
    for name, call in calls.items():
        start = time.perf_counter()
        got = call()
        first[name] = time.perf_counter() - start
        err = error(got, ref)
        assert err < 1e-4, f"{name}: max relative error {err:.2e} against torch.func"
        del got
    for r in range(args.rounds + 1):      # the first round is warm-up (a C tier builds)
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            if r:
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["tracegrad vmap(grad) eager"])
    print(f"\nW3 MLP per-sample gradients, {args.batch} examples, {args.rounds} rounds "
          f"interleaved (seconds per call)")
    print(f"{'system':32} {'first':>8} {'median':>8} {'min':>8} {'/ vmap eager':>13}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:32} {first[name]:8.3f} {med:8.3f} {min(ts):8.3f} {med / base:13.2f}")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
