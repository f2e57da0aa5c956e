"""A per-sample data pipeline: a map-style ``Dataset`` whose ``__getitem__`` builds one
example, a ``DataLoader`` (``shuffle=False``, ``batch_size``, ``drop_last``, a ``collate_fn``),
an MLP classifier trained with SGD (momentum, Nesterov, weight decay) and ``StepLR`` stepped
every batch.
"""
import numpy as np

from . import compiled_as

FEATURES, HIDDEN, CLASSES, SAMPLES, BATCH = 10, 32, 4, 42, 8
STEPS = 5   # SAMPLES // BATCH batches, the last partial one dropped


def build(torch):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
                nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                nn.Linear(HIDDEN, CLASSES),
            )

        def forward(self, x):
            return self.net(x)

    return {"model": MLP()}


def make_dataset(torch, features, labels):
    class TabularDataset(torch.utils.data.Dataset):
        """One row of features, standardised with the whole set's statistics, and its label."""

        def __init__(self, features, labels):
            self.features = features
            self.labels = labels
            self.mean = features.mean(axis=0)
            self.std = features.std(axis=0) + 1e-6

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, idx):
            x = (self.features[idx] - self.mean) / self.std
            return {"x": torch.tensor(x, dtype=torch.float32), "y": int(self.labels[idx])}

    return TabularDataset(features, labels)


def collate(torch, samples):
    """Dicts of examples to a (features, labels) batch."""
    return (torch.stack([s["x"] for s in samples]),
            torch.tensor([s["y"] for s in samples], dtype=torch.long))


def data(steps):
    rng = np.random.default_rng(6)
    features = rng.standard_normal((SAMPLES, FEATURES)) * 3 + 1
    labels = (features[:, :CLASSES] + rng.standard_normal((SAMPLES, CLASSES))).argmax(1)
    return features, labels


def train(torch, models, arrays, how="eager"):
    model = models["model"]
    model.train()
    loader = torch.utils.data.DataLoader(make_dataset(torch, *arrays), batch_size=BATCH,
                                         shuffle=False, drop_last=True,
                                         collate_fn=lambda s: collate(torch, s))
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                                weight_decay=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    if how == "model":
        model = torch.compile(model)

    def train_step(inputs, targets):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss.detach()

    train_step, compiled = compiled_as(torch, how, model, train_step)
    losses = []
    for inputs, targets in loader:
        losses.append(train_step(inputs, targets).item())
    return {"loss": losses}, compiled
