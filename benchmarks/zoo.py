"""The model zoo of benchmarks/models.py, written once and run by PyTorch and by tracegrad.

Every model is plain PyTorch code with ``torch`` as a parameter instead of an import (the
pattern of tests/corpus), so the same source runs with ``torch`` bound to PyTorch and to
``tracegrad``. A model has sizes (``SIZES[name]["full"]`` for the benchmark, ``"small"``
for the tests), ``build(torch, cfg)`` (its modules by name), ``batches(cfg, n)`` (its data
as NumPy arrays, drawn from a fixed seed) and a training step; ``program`` puts them
together as a function that runs one training step, in one of three ways:

- ``"eager"``: as written;
- ``"model"``: each module through ``torch.compile(module)`` (the usual way to compile);
- ``"step"``: the whole training step (forward, ``backward``, ``optimizer.step()``,
  ``zero_grad``) through ``torch.compile(train_step)``.

Weights come from one file: ``save_weights`` builds the modules seeded in one library and
saves their ``state_dict``s (PyTorch's ``torch.save`` when PyTorch is installed), and
``program`` loads them with the running library's ``load``, so both libraries start from
the same weights and see the same data.

The models: a GPT in nanoGPT's shape at two sizes (AdamW, weight decay on matrices only,
gradient clipping), an LSTM word language model as pytorch/examples' (SGD, clipping, the
hidden state carried across steps and detached), ResNet-18 in torchvision's layout (SGD
with momentum, train-mode BatchNorm), the LeNet of PyTorch's tutorial (SGD with momentum),
a DCGAN step as pytorch/examples' (two Adams, D on real and fake, then G), a VAE step as
pytorch/examples' (Adam) and the MLP of WORKLOADS.md's W3 (SGD).
"""
import math

import numpy as np

MODELS = ("gpt_small", "gpt_large", "lstm_lm", "resnet18", "lenet", "dcgan", "vae", "w3_mlp")

SIZES = {
    "gpt_small": {"full": dict(vocab=65, block=16, embd=32, heads=2, layers=2, batch=8),
                  "small": dict(vocab=17, block=8, embd=16, heads=2, layers=1, batch=4)},
    "gpt_large": {"full": dict(vocab=65, block=64, embd=128, heads=4, layers=4, batch=8),
                  "small": dict(vocab=17, block=8, embd=16, heads=2, layers=2, batch=2)},
    "lstm_lm": {"full": dict(ntoken=1000, ninp=128, nhid=128, nlayers=2, batch=16, bptt=32),
                "small": dict(ntoken=20, ninp=8, nhid=8, nlayers=2, batch=3, bptt=4)},
    "resnet18": {"full": dict(width=64, classes=1000, batch=8, size=64),
                 "small": dict(width=4, classes=10, batch=4, size=64)},
    "lenet": {"full": dict(batch=64), "small": dict(batch=4)},
    "dcgan": {"full": dict(nz=32, ngf=16, ndf=16, nc=3, batch=16),
              "small": dict(nz=4, ngf=4, ndf=4, nc=1, batch=2)},
    "vae": {"full": dict(image=784, hidden=400, latent=20, batch=128),
            "small": dict(image=64, hidden=16, latent=4, batch=4)},
    "w3_mlp": {"full": dict(batch=256, d_in=1024, d_hidden=2048),
               "small": dict(batch=8, d_in=16, d_hidden=32)},
}

GPU_SIZES = {"resnet18": dict(width=64, classes=1000, batch=64, size=224)}

DESCRIPTIONS = {
    "gpt_small": "GPT, 2 layers, 2 heads, 32 wide, block 16, batch 8, AdamW",
    "gpt_large": "GPT, 4 layers, 4 heads, 128 wide, block 64, batch 8, AdamW",
    "lstm_lm": "LSTM LM, 2x128, 1000 tokens, bptt 32, batch 16, SGD",
    "resnet18": "ResNet-18, batch 8, 3x64x64, SGD momentum",
    "lenet": "LeNet, batch 64, 1x32x32, SGD momentum",
    "dcgan": "DCGAN step (D then G), 3x32x32, batch 16, Adam",
    "vae": "VAE, 784-400-20, batch 128, Adam",
    "w3_mlp": "W3's MLP, 256x1024 -> 2048 -> 1024, MSE, SGD",
}


# GPT (nanoGPT's model) ---------------------------------------------------------------------

def _gpt_build(torch, cfg):
    nn, F = torch.nn, torch.nn.functional
    vocab, block, embd, heads, layers = (cfg[k] for k in ("vocab", "block", "embd", "heads",
                                                          "layers"))

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(embd, 3 * embd, bias=False)
            self.c_proj = nn.Linear(embd, embd, bias=False)
            self.register_buffer("bias", torch.tril(torch.ones(block, block))
                                 .view(1, 1, block, block))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(embd, dim=2)
            k = k.view(B, T, heads, C // heads).transpose(1, 2)
            q = q.view(B, T, heads, C // heads).transpose(1, 2)
            v = v.view(B, T, heads, C // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(embd, bias=False)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(embd, bias=False)
            self.c_fc = nn.Linear(embd, 4 * embd, bias=False)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * embd, embd, bias=False)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, embd)
            self.wpe = nn.Embedding(block, embd)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(embd, bias=False)
            self.lm_head = nn.Linear(embd, vocab, bias=False)
            self.wte.weight = self.lm_head.weight      # weight tying
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                    torch.nn.init.normal_(p, mean=0.0, std=std)

        def forward(self, idx, targets):
            t = idx.size(1)
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return {"model": GPT()}


def _gpt_batches(cfg, n):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        tokens = rng.integers(0, cfg["vocab"], size=(cfg["batch"], cfg["block"] + 1))
        out.append((tokens[:, :-1].copy(), tokens[:, 1:].copy()))
    return out


def _gpt_program(torch, models, cfg, compile_module):
    model = models["model"]
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95))
    model = compile_module(model)

    def train_step(x, y):
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()
    return train_step, None


# LSTM language model (pytorch/examples' word_language_model) -------------------------------

def _lstm_build(torch, cfg):
    nn = torch.nn

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(cfg["ntoken"], cfg["ninp"])
            self.rnn = nn.LSTM(cfg["ninp"], cfg["nhid"], cfg["nlayers"])
            self.decoder = nn.Linear(cfg["nhid"], cfg["ntoken"])
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.encoder(input), hidden)
            return self.decoder(output).view(-1, cfg["ntoken"]), hidden

    return {"model": RNNModel()}


def _lstm_batches(cfg, n):
    """Consecutive ``bptt``-long chunks of one stream batchified into ``batch`` columns."""
    rng = np.random.default_rng(1)
    bptt, bsz = cfg["bptt"], cfg["batch"]
    stream = rng.integers(0, cfg["ntoken"], size=(n * bptt + 1) * bsz)
    cols = stream.reshape(bsz, -1).T
    return [(cols[i * bptt:(i + 1) * bptt].copy(), cols[i * bptt + 1:(i + 1) * bptt + 1]
             .reshape(-1).copy()) for i in range(n)]


def _lstm_program(torch, models, cfg, compile_module):
    model = models["model"]
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=20.0)
    model = compile_module(model)
    zeros = torch.zeros(cfg["nlayers"], cfg["batch"], cfg["nhid"])

    def train_step(data, targets, h, c):
        optimizer.zero_grad()
        output, (h, c) = model(data, (h, c))
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        return loss.detach(), h.detach(), c.detach()
    return train_step, (zeros, zeros.clone())


# ResNet-18 (torchvision's layout) ----------------------------------------------------------

def _resnet_build(torch, cfg):
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(out + identity)

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            w = cfg["width"]
            self.conv1 = nn.Conv2d(3, w, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(w)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            chans = [(w, w, 1), (w, 2 * w, 2), (2 * w, 4 * w, 2), (4 * w, 8 * w, 2)]
            for i, (cin, cout, s) in enumerate(chans, 1):
                setattr(self, f"layer{i}", nn.Sequential(BasicBlock(cin, cout, s),
                                                         BasicBlock(cout, cout, 1)))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8 * w, cfg["classes"])
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return {"model": ResNet18()}


def _image_batches(seed, shape, classes, n):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape, dtype=np.float32), rng.integers(0, classes, shape[0]))
            for _ in range(n)]


def _resnet_batches(cfg, n):
    return _image_batches(2, (cfg["batch"], 3, cfg["size"], cfg["size"]), cfg["classes"], n)


def _classifier_program(torch, models, cfg, compile_module, weight_decay=0.0):
    model = models["model"]
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9,
                                weight_decay=weight_decay)
    model = compile_module(model)

    def train_step(x, y):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return train_step, None


def _resnet_program(torch, models, cfg, compile_module):
    return _classifier_program(torch, models, cfg, compile_module, weight_decay=1e-4)


# LeNet (PyTorch's "Neural Networks" tutorial) ----------------------------------------------

def _lenet_build(torch, cfg):
    from convnet import _lenet      # PyTorch's tutorial LeNet, written once (convnet.py)
    return {"model": _lenet(torch)}


def _lenet_batches(cfg, n):
    return _image_batches(3, (cfg["batch"], 1, 32, 32), 10, n)


# DCGAN (pytorch/examples' dcgan, at 32x32) -------------------------------------------------

def _dcgan_build(torch, cfg):
    nn = torch.nn
    nz, ngf, ndf, nc = cfg["nz"], cfg["ngf"], cfg["ndf"], cfg["nc"]

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),       # 4x4
                nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # 8x8
                nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),      # 16x16
                nn.BatchNorm2d(ngf), nn.ReLU(True),
                nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),           # 32x32
                nn.Tanh())

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),                    # 16x16
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),               # 8x8
                nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),           # 4x4
                nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False))                 # 1x1 logit

        def forward(self, input):
            return self.main(input).view(-1, 1).squeeze(1)

    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    return {"netG": netG, "netD": netD}


def _dcgan_batches(cfg, n):
    """Real images in [-1, 1] (a blob per image) and the generator's noise."""
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[0:32, 0:32]
    out = []
    for _ in range(n):
        centre = rng.integers(8, 24, size=(cfg["batch"], 2))
        blobs = np.exp(-((yy - centre[:, :1, None]) ** 2 + (xx - centre[:, 1:, None]) ** 2) / 32)
        real = np.repeat((2 * blobs - 1).astype(np.float32)[:, None], cfg["nc"], axis=1)
        out.append((real, rng.standard_normal((cfg["batch"], cfg["nz"], 1, 1), dtype=np.float32)))
    return out


def _dcgan_program(torch, models, cfg, compile_module):
    netG, netD = models["netG"], models["netD"]
    criterion = torch.nn.BCEWithLogitsLoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    netG, netD = compile_module(netG), compile_module(netD)

    def train_step(real, noise):
        netD.zero_grad()
        label = torch.full((real.size(0),), 1.0, dtype=real.dtype, device=real.device)
        errD_real = criterion(netD(real), label)
        errD_real.backward()
        fake = netG(noise)
        label.fill_(0.0)
        errD_fake = criterion(netD(fake.detach()), label)
        errD_fake.backward()
        optimizerD.step()
        netG.zero_grad()
        label.fill_(1.0)
        errG = criterion(netD(fake), label)
        errG.backward()
        optimizerG.step()
        return (errD_real + errD_fake + errG).detach()
    return train_step, None


# VAE (pytorch/examples' vae) ---------------------------------------------------------------

def _vae_build(torch, cfg):
    nn, F = torch.nn, torch.nn.functional
    image, hidden, latent = cfg["image"], cfg["hidden"], cfg["latent"]

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(image, hidden)
            self.fc21 = nn.Linear(hidden, latent)
            self.fc22 = nn.Linear(hidden, latent)
            self.fc3 = nn.Linear(latent, hidden)
            self.fc4 = nn.Linear(hidden, image)

        def forward(self, x, eps):
            h1 = F.relu(self.fc1(x.view(-1, image)))
            mu, logvar = self.fc21(h1), self.fc22(h1)
            z = mu + eps * torch.exp(0.5 * logvar)
            return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar

    return {"model": VAE()}


def _vae_batches(cfg, n):
    """Binary images and the reparameterisation's noise (drawn here: both libraries see
    the same noise)."""
    rng = np.random.default_rng(5)
    return [((rng.random((cfg["batch"], cfg["image"])) < 0.3).astype(np.float32),
             rng.standard_normal((cfg["batch"], cfg["latent"]), dtype=np.float32))
            for _ in range(n)]


def _vae_program(torch, models, cfg, compile_module):
    model = models["model"]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model = compile_module(model)

    def train_step(x, eps):
        optimizer.zero_grad()
        recon, mu, logvar = model(x, eps)
        bce = torch.nn.functional.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = bce + kld
        loss.backward()
        optimizer.step()
        return loss.detach()
    return train_step, None


# W3's MLP (WORKLOADS.md) -------------------------------------------------------------------

def _w3_build(torch, cfg):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(cfg["d_in"], cfg["d_hidden"])
            self.act = nn.GELU(approximate="tanh")
            self.fc2 = nn.Linear(cfg["d_hidden"], cfg["d_in"])

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    return {"model": MLP()}


def _w3_batches(cfg, n):
    rng = np.random.default_rng(0)
    shape = (cfg["batch"], cfg["d_in"])
    return [(rng.standard_normal(shape, dtype=np.float32),
             rng.standard_normal(shape, dtype=np.float32)) for _ in range(n)]


def _w3_program(torch, models, cfg, compile_module):
    model = models["model"]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model = compile_module(model)

    def train_step(x, t):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), t)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return train_step, None


# putting them together ---------------------------------------------------------------------

_PARTS = {
    "gpt_small": (_gpt_build, _gpt_batches, _gpt_program),
    "gpt_large": (_gpt_build, _gpt_batches, _gpt_program),
    "lstm_lm": (_lstm_build, _lstm_batches, _lstm_program),
    "resnet18": (_resnet_build, _resnet_batches, _resnet_program),
    "lenet": (_lenet_build, _lenet_batches, _classifier_program),
    "dcgan": (_dcgan_build, _dcgan_batches, _dcgan_program),
    "vae": (_vae_build, _vae_batches, _vae_program),
    "w3_mlp": (_w3_build, _w3_batches, _w3_program),
}


def config(name, size="full"):
    """``name``'s sizes: "full", "small", or "gpu" (the full sizes, and ResNet-18 at
    ImageNet's 224x224 with batch 64)."""
    if size == "gpu":
        return GPU_SIZES.get(name, SIZES[name]["full"])
    return SIZES[name][size]


def build(torch, name, cfg, seed=0):
    torch.manual_seed(seed)
    return _PARTS[name][0](torch, cfg)


def batches(name, cfg, n):
    return _PARTS[name][1](cfg, n)


def save_weights(torch, name, cfg, path):
    """Build ``name``'s modules seeded in ``torch`` and save their ``state_dict``s to
    ``path`` (the file every system of a run loads, so all start from the same weights)."""
    models = build(torch, name, cfg)
    torch.save({k: m.state_dict() for k, m in models.items()}, path)


def program(torch, name, cfg, how, weights=None, n_batches=4, device="cpu"):
    """``(step, compiled)``: ``step(i)`` runs one training step of ``name`` on batch
    ``i % n_batches`` and returns the loss (a detached tensor); ``how`` is "eager", "model"
    or "step" (see the module's docstring); ``compiled``, what ``torch.compile`` made (for
    waiting on background builds and for inspection). ``step.models`` holds the modules
    (the originals, not compiled wrappers). ``weights``: a file of ``save_weights``;
    ``device``: where the modules, the data and the carried state live."""
    models = build(torch, name, cfg)
    if weights is not None:
        state = torch.load(weights)
        for k, m in models.items():
            m.load_state_dict(state[k])
    for m in models.values():
        m.to(device)
        m.train()
    compiled = []

    def compile_module(m):
        if how != "model":
            return m
        compiled.append(torch.compile(m))
        return compiled[-1]
    train_step, carry = _PARTS[name][2](torch, models, cfg, compile_module)
    if how == "step":
        train_step = torch.compile(train_step)
        compiled.append(train_step)
    data = [tuple(torch.from_numpy(a).to(device) for a in b)
            for b in batches(name, cfg, n_batches)]

    if carry is None:
        def step(i):
            return train_step(*data[i % len(data)])
        step.models = models
        return step, compiled

    state = {"carry": [c.to(device) for c in carry]}

    def step(i):            # the hidden state carried from step to step (detached)
        loss, *state["carry"] = train_step(*data[i % len(data)], *state["carry"])
        return loss
    step.models = models
    return step, compiled
