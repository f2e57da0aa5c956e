"""A variational autoencoder in the shape of pytorch/examples' ``vae``, on 8x8 binary images.

MLP encoder to ``mu`` and ``logvar``, the reparameterisation ``mu + eps * std`` with the
noise ``eps`` drawn by the caller (so both libraries see the same noise), a sigmoid MLP
decoder, ``binary_cross_entropy(reduction='sum')`` plus the KL term, and Adam.
"""
import numpy as np

from . import compiled_as

IMAGE, HIDDEN, LATENT, BATCH = 64, 32, 4, 8
STEPS = 4


def build(torch):
    nn = torch.nn
    F = torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(IMAGE, HIDDEN)
            self.fc21 = nn.Linear(HIDDEN, LATENT)
            self.fc22 = nn.Linear(HIDDEN, LATENT)
            self.fc3 = nn.Linear(LATENT, HIDDEN)
            self.fc4 = nn.Linear(HIDDEN, IMAGE)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, eps):
            std = torch.exp(0.5 * logvar)
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, IMAGE))
            z = self.reparameterize(mu, logvar, eps)
            return self.decode(z), mu, logvar

    return {"model": VAE()}


def loss_function(torch, recon_x, x, mu, logvar):
    BCE = torch.nn.functional.binary_cross_entropy(recon_x, x.view(-1, IMAGE), reduction="sum")
    # see Appendix B from VAE paper: Kingma and Welling, Auto-Encoding Variational Bayes
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def data(steps):
    """``steps`` batches of (images in {0, 1}, shaped (B, 1, 8, 8); the noise for the
    reparameterisation, shaped (B, LATENT))."""
    rng = np.random.default_rng(3)
    return [((rng.random((BATCH, 1, 8, 8)) < 0.3).astype(np.float32),
             rng.standard_normal((BATCH, LATENT)).astype(np.float32)) for _ in range(steps)]


def train(torch, models, batches, how="eager"):
    model = models["model"]
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if how == "model":
        model = torch.compile(model)

    def train_step(x, eps):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(x, eps)
        loss = loss_function(torch, recon_batch, x, mu, logvar)
        loss.backward()
        optimizer.step()
        return loss.detach()

    train_step, compiled = compiled_as(torch, how, model, train_step)
    losses = []
    for x, eps in batches:
        losses.append(train_step(torch.from_numpy(x), torch.from_numpy(eps)).item())
    return {"loss": losses}, compiled
