"""A 2-layer Transformer encoder that learns to reverse sequences, trained compiled.

Each example is a random sequence of digits; the target at position ``i`` is the digit at
position ``L - 1 - i``. Only attention can move information between positions, and the
learnt position embeddings tell it where to look. The model is ``nn.Embedding`` plus a
position embedding, an ``nn.TransformerEncoder`` of two ``nn.TransformerEncoderLayer``
(``batch_first=True``) and an ``nn.Linear`` head, written as for PyTorch. The training
loss is compiled with ``tracegrad.compile``; ``--eager`` runs the same step without it.

    python samples/transformer_encoder.py [--steps 200] [--seq 8] [--batch 64] [--eager]
"""
import argparse
import time

import tracegrad as torch
from tracegrad import nn


class Reverser(nn.Module):
    def __init__(self, vocab, seq, d_model=32, nhead=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(seq, d_model) * 0.1)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids) + self.pos))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--eager", action="store_true", help="run the same step without compiling")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    vocab = 10
    model = Reverser(vocab, args.seq)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def loss_fn(inputs, targets):
        logits = model(inputs)
        return criterion(logits.reshape(-1, vocab), targets.reshape(-1))
    if not args.eager:
        loss_fn = torch.compile(loss_fn)

    def batch(n):
        x = torch.randint(0, vocab, (n, args.seq), generator=gen)
        return x, x.flip(1)

    start = time.perf_counter()
    first = last = None
    for step in range(args.steps):
        inputs, targets = batch(args.batch)
        loss = loss_fn(inputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        last = loss.item()
        first = last if first is None else first
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {last:.4f}")
    print(f"loss fell from {first:.6f} to {last:.6f}")
    print(f"{'eager' if args.eager else 'compiled'} training took "
          f"{time.perf_counter() - start:.1f} s")
    if not args.eager:
        print(f"{loss_fn.stats['compiles']} compile(s), {loss_fn.stats['cache_hits']} cached "
              f"calls")

    model.eval()
    with torch.no_grad():
        inputs, targets = batch(256)
        predicted = model(inputs).argmax(-1)
        accuracy = (predicted == targets).float().mean().item()
    print(f"held-out digit accuracy {accuracy:.3f}")
    print(f"input  {inputs[0].tolist()}\noutput {predicted[0].tolist()}")
    return first, last


if __name__ == "__main__":
    main()
