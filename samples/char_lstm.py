"""A character-level LSTM language model, trained with a compiled step.

The text is built here: sentences drawn from a tiny grammar ("the cat sees a dog .",
...), so it has structure worth learning and needs no download. The model is
``nn.Embedding -> nn.LSTM -> nn.Linear``, written exactly as for PyTorch; the loss over a
fixed window length is compiled with ``tracegrad.compile`` (the LSTM's loop over time is
unrolled into one graph), and ``--eager`` runs the same step without compiling. After
training the model writes a few characters of its own.

    python samples/char_lstm.py [--steps 150] [--seq 16] [--batch 32] [--eager]
"""
import argparse
import time

import tracegrad as torch
from tracegrad import nn

NOUNS = ["cat", "dog", "bird", "fish", "fox"]
VERBS = ["sees", "likes", "chases", "finds"]
DETS = ["the", "a"]


def make_text(n_sentences, generator):
    """``n_sentences`` sentences "det noun verb det noun ." picked at random."""
    def pick(words):
        return words[int(torch.randint(0, len(words), (1,), generator=generator))]
    return " ".join(f"{pick(DETS)} {pick(NOUNS)} {pick(VERBS)} {pick(DETS)} {pick(NOUNS)} ."
                    for _ in range(n_sentences))


class CharLSTM(nn.Module):
    def __init__(self, vocab, embed=16, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids, state=None):
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--eager", action="store_true", help="run the same step without compiling")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    text = make_text(400, gen)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])

    model = CharLSTM(len(chars))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def loss_fn(inputs, targets):
        logits, _ = model(inputs)
        return criterion(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    if not args.eager:
        loss_fn = torch.compile(loss_fn)

    start = time.perf_counter()
    first = last = None
    for step in range(args.steps):
        # a batch of random windows; the target is the next character
        offsets = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=gen)
        rows = offsets.unsqueeze(1) + torch.arange(args.seq + 1)
        window = data[rows]
        loss = loss_fn(window[:, :-1], window[:, 1:])
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

    # let the model continue a prompt, one most likely character at a time
    with torch.no_grad():
        prompt = "the dog chases "
        logits, state = model(torch.tensor([[stoi[c] for c in prompt]]))
        out = prompt
        for _ in range(40):
            nxt = int(logits[0, -1].argmax())
            out += chars[nxt]
            logits, state = model(torch.tensor([[nxt]]), state)
    print(f"sample: {out!r}")
    return first, last


if __name__ == "__main__":
    main()
