"""Train a small convolutional network on synthetic images, eagerly and compiled.

Each 1x16x16 image is noise with one bright Gaussian blob; the label is the quadrant that
holds the blob (0: top left, 1: top right, 2: bottom left, 3: bottom right). Nothing is
downloaded: the dataset is drawn here from a seeded generator. The network is two
convolution blocks (Conv2d, BatchNorm2d, ReLU, MaxPool2d) and a linear classifier.

By default the same model, from the same initial weights, is trained twice: once eagerly
and once with a compiled training step (``tracegrad.compile`` of the loss function, whose
backward is generated too); a progress line per epoch, then the two runs compared.

    python samples/train_cnn.py [--mode both|eager|compiled] [--epochs 4] [--samples 1024]
"""
import argparse
import time

import tracegrad as torch
from tracegrad import nn
from tracegrad.utils.data import DataLoader, TensorDataset


def make_blobs(n, generator, size=16):
    """``n`` noisy images ``(n, 1, size, size)`` with a blob in a random quadrant, and the
    quadrant as the label."""
    label = torch.randint(0, 4, (n,), generator=generator)
    half = size // 2
    # the blob's centre: anywhere inside its quadrant, a pixel from the quadrant's border
    cy = (label // 2).float() * half + 1 + torch.rand(n, generator=generator) * (half - 2)
    cx = (label % 2).float() * half + 1 + torch.rand(n, generator=generator) * (half - 2)
    grid = torch.arange(size).float()
    dy = grid.reshape(1, size, 1) - cy.reshape(n, 1, 1)
    dx = grid.reshape(1, 1, size) - cx.reshape(n, 1, 1)
    blob = torch.exp(-(dy * dy + dx * dx) / 4.0)
    noise = torch.randn(n, size, size, generator=generator) * 0.3
    return (blob + noise).unsqueeze(1), label


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 4))


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        correct = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return correct


def train(mode, args, initial_state, data):
    x, y, x_test, y_test = data
    model = make_model()
    model.load_state_dict(initial_state)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    # The model's parameters and BatchNorm's running statistics are read by the compiled
    # function without being passed: they are captured, read afresh at each call, and the
    # running statistics' in-place updates are written back, as eagerly.
    def loss_fn(images, labels):
        return criterion(model(images), labels)
    if mode == "compiled":
        loss_fn = torch.compile(loss_fn)

    gen = torch.Generator().manual_seed(1)      # the same batches for both modes
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch, shuffle=True,
                        drop_last=True, generator=gen)
    losses = []
    start = time.perf_counter()
    for epoch in range(args.epochs):
        total, batches = 0.0, 0
        for images, labels in loader:
            optimizer.zero_grad()
            loss = loss_fn(images, labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        losses.append(total / batches)
        print(f"[{mode:>8}] epoch {epoch + 1}/{args.epochs}: loss {losses[-1]:.4f}, "
              f"test accuracy {accuracy(model, x_test, y_test):.3f} "
              f"({time.perf_counter() - start:.1f} s)")
    if mode == "compiled":
        print(f"[{mode:>8}] {loss_fn.stats['compiles']} compile(s), "
              f"{loss_fn.stats['cache_hits']} cache hit(s)")
    return losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("both", "eager", "compiled"), default="both")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    x, y = make_blobs(args.samples, gen)
    x_test, y_test = make_blobs(256, gen)
    initial_state = make_model().state_dict()
    modes = ("eager", "compiled") if args.mode == "both" else (args.mode,)
    results = {m: train(m, args, initial_state, (x, y, x_test, y_test)) for m in modes}
    for mode, losses in results.items():
        print(f"{mode}: loss fell from {losses[0]:.4f} to {losses[-1]:.4f}")
    if len(results) == 2:
        gap = max(abs(a - b) / abs(b) for a, b in zip(results["compiled"], results["eager"]))
        print(f"compiled and eager epoch losses agree to {gap:.1e} (relative)")


if __name__ == "__main__":
    main()
