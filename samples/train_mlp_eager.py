"""Train a small MLP eagerly with tracegrad's autograd and watch the loss fall.

The model is written with plain tensors (parameters are leaves with
requires_grad=True), the update is plain SGD under ``no_grad``, so every
line reads as it would with ``import torch``.

    python samples/train_mlp_eager.py [--epochs 30] [--samples 512]
"""
import argparse
import math

import tracegrad as torch


def make_spirals(n, generator):
    """Two interleaved spirals, labels 0 and 1: a task a linear model cannot solve."""
    t = torch.rand(n, generator=generator) * 2 * math.pi + 0.5
    label = torch.randint(0, 2, (n,), generator=generator)
    sign = label.float() * 2 - 1
    x = torch.stack([t * torch.cos(t) * sign, t * torch.sin(t) * sign], dim=1) / 4
    x = x + torch.randn(n, 2, generator=generator) * 0.02
    return x, label


def init_linear(fan_in, fan_out, generator):
    bound = 1 / math.sqrt(fan_in)
    w = (torch.rand(fan_in, fan_out, generator=generator) * 2 - 1) * bound
    b = (torch.rand(fan_out, generator=generator) * 2 - 1) * bound
    return w.requires_grad_(), b.requires_grad_()


def forward(params, x):
    w1, b1, w2, b2, w3, b3 = params
    hidden = torch.tanh(x @ w1 + b1)
    hidden = torch.relu(hidden @ w2 + b2)
    return hidden @ w3 + b3


def cross_entropy(logits, labels):
    log_probs = torch.log_softmax(logits, dim=1)
    return -log_probs[torch.arange(len(labels)), labels].mean()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.3)
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(0)
    x, y = make_spirals(args.samples, gen)
    params = [*init_linear(2, 32, gen), *init_linear(32, 32, gen), *init_linear(32, 2, gen)]

    first = last = None
    for epoch in range(args.epochs):
        order = torch.randperm(args.samples, generator=gen)
        total = 0.0
        for start in range(0, args.samples, args.batch):
            idx = order[start:start + args.batch]
            loss = cross_entropy(forward(params, x[idx]), y[idx])
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p -= args.lr * p.grad
                    p.grad = None
            total += loss.item() * len(idx)
        mean_loss = total / args.samples
        with torch.no_grad():
            accuracy = (forward(params, x).argmax(dim=1) == y).float().mean().item()
        print(f"epoch {epoch + 1:3d}  loss {mean_loss:.4f}  accuracy {accuracy:.3f}")
        first = mean_loss if first is None else first
        last = mean_loss
    print(f"loss fell from {first:.4f} to {last:.4f}")


if __name__ == "__main__":
    main()
