"""Profile a few training steps of a small MLP, print PyTorch's table, write a Chrome trace.

Every line reads as it would with ``import torch``: ``torch.profiler.profile``
records each op (forward ops under the names called here: ``mm``, ``tanh``,
``log_softmax``), each backward node (``MmBackward0``, ...), and the
``record_function`` blocks that mark the phases of a step. Open the trace in
https://ui.perfetto.dev or chrome://tracing to see the steps on a timeline.

    python samples/profiler.py [--steps 5] [--batch 64]
"""
import argparse
import math
import os
import tempfile

import tracegrad as torch
from tracegrad.profiler import ProfilerActivity, profile, record_function


def init_params(sizes, generator):
    params = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        bound = 1 / math.sqrt(fan_in)
        w = (torch.rand(fan_in, fan_out, generator=generator) * 2 - 1) * bound
        b = torch.zeros(fan_out)
        params += [w.requires_grad_(), b.requires_grad_()]
    return params


def forward(params, x):
    w1, b1, w2, b2 = params
    hidden = torch.tanh(x.mm(w1) + b1)
    return hidden.mm(w2) + b2


def train_step(params, x, labels, lr):
    with record_function("forward"):
        log_probs = torch.log_softmax(forward(params, x), dim=1)
        loss = -log_probs[torch.arange(len(labels)), labels].mean()
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer_step"):
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None
    return loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(0)
    params = init_params([16, 32, 4], gen)
    x = torch.randn(args.batch, 16, generator=gen)
    labels = torch.randint(0, 4, (args.batch,), generator=gen)
    train_step(params, x, labels, lr=0.1)       # warm up outside the profile (first-call costs)

    # record_shapes adds the "Input Shapes" column when grouping by shape; profile_memory
    # adds "CPU Mem" (bytes of tensors an op allocated, with its children) and "Self CPU Mem".
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 profile_memory=True) as prof:
        for _ in range(args.steps):
            loss = train_step(params, x, labels, lr=0.1)
    print(f"loss after {args.steps} profiled steps: {loss:.4f}\n")

    # One row per op name; a block's "CPU total" includes what ran inside it, "Self CPU"
    # does not.
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=15))
    # The same events split by input shapes: which call of ``mm`` costs what.
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total",
                                                               row_limit=8))

    path = os.path.join(tempfile.mkdtemp(prefix="tracegrad-profile-"), "trace.json")
    prof.export_chrome_trace(path)
    print(f"Chrome trace written to {path}: open it in https://ui.perfetto.dev")


if __name__ == "__main__":
    main()
