"""Train an MLP with a compiled training step, then look inside.

Two interleaved spirals (a task no linear model solves) are learnt by a small
``nn.Sequential`` MLP. The loss function is compiled with ``tracegrad.compile``:
the first call traces it into an IR, derives the backward on the IR and
generates NumPy code; later calls run that code. The sample prints a progress
line per epoch, then the generated code and a profiler table of one step.

    python samples/train_mlp.py [--epochs 20] [--samples 1024] [--quiet-code] [--eager]
"""
import argparse
import math

import tracegrad as torch
from tracegrad import nn
from tracegrad.utils.data import DataLoader, TensorDataset


def make_spirals(n, generator):
    """Two interleaved spirals with labels 0 and 1."""
    t = torch.rand(n, generator=generator) * 2 * math.pi + 0.5
    label = torch.randint(0, 2, (n,), generator=generator)
    sign = label.float() * 2 - 1
    x = torch.stack([t * torch.cos(t) * sign, t * torch.sin(t) * sign], dim=1) / 4
    return x + torch.randn(n, 2, generator=generator) * 0.02, label


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--quiet-code", action="store_true", help="do not print the generated code")
    ap.add_argument("--eager", action="store_true", help="run the same step without compiling")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    x, y = make_spirals(args.samples, gen)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch, shuffle=True,
                        drop_last=True, generator=gen)

    model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 2))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    # The parameters are read by the compiled function without being passed: they are
    # captured, read afresh at every call, so the optimiser's in-place updates just work.
    def loss_fn(inputs, labels):
        logits = model(inputs)
        return criterion(logits, labels)
    if not args.eager:
        loss_fn = torch.compile(loss_fn)

    first = last = None
    for epoch in range(args.epochs):
        total, batches = 0.0, 0
        for inputs, labels in loader:
            loss = loss_fn(inputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        last = total / batches
        first = last if first is None else first
        with torch.no_grad():
            accuracy = (model(x).argmax(1) == y).float().mean().item()
        print(f"epoch {epoch + 1:3d}  loss {last:.4f}  accuracy {accuracy:.3f}")
    print(f"loss fell from {first:.6f} to {last:.6f}")
    if args.eager:
        return first, last
    print(f"{loss_fn.stats['compiles']} compile(s), {loss_fn.stats['cache_hits']} cached calls")
    if not args.quiet_code:
        print("\n# ---- the generated code of the compiled loss ----")
        print(loss_fn.code)

    inputs, labels = next(iter(loader))
    with torch.profiler.profile() as prof:
        loss = loss_fn(inputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12))
    return first, last


if __name__ == "__main__":
    main()
