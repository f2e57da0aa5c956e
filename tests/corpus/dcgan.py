"""A DCGAN in the shape of pytorch/examples' ``dcgan``, at 16x16 with one channel.

A ``ConvTranspose2d`` generator (BatchNorm, ReLU, Tanh) and a ``Conv2d`` discriminator
(LeakyReLU(0.2), BatchNorm), the example's ``weights_init`` applied by class name, two Adam
optimizers with ``betas=(0.5, 0.999)``, ``BCEWithLogitsLoss`` (the discriminator ends in
logits), labels from ``torch.full``, and the noise drawn by the caller so both libraries see
the same noise. One step updates D on a real and a fake batch, then G through D.
"""
import numpy as np

NZ, NGF, NDF, NC, BATCH = 8, 8, 8, 1, 4
STEPS = 3


def weights_init(torch, m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


def build(torch):
    nn = torch.nn

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                # input is Z, going into a convolution
                nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),
                nn.BatchNorm2d(NGF * 2),
                nn.ReLU(True),
                # state size. (ngf*2) x 4 x 4
                nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),
                nn.BatchNorm2d(NGF),
                nn.ReLU(True),
                # state size. (ngf) x 8 x 8
                nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False),
                nn.Tanh(),
                # state size. (nc) x 16 x 16
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                # input is (nc) x 16 x 16
                nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                # state size. (ndf) x 8 x 8
                nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(NDF * 2),
                nn.LeakyReLU(0.2, inplace=True),
                # state size. (ndf*2) x 4 x 4
                nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
            )

        def forward(self, input):
            return self.main(input).view(-1, 1).squeeze(1)

    netG = Generator()
    netG.apply(lambda m: weights_init(torch, m))
    netD = Discriminator()
    netD.apply(lambda m: weights_init(torch, m))
    return {"netG": netG, "netD": netD}


def data(steps):
    """``steps`` batches of (real images in [-1, 1], the generator's noise)."""
    rng = np.random.default_rng(4)
    out = []
    for _ in range(steps):
        yy, xx = np.mgrid[0:16, 0:16]
        centre = rng.integers(4, 12, size=(BATCH, 2))
        blobs = np.exp(-((yy - centre[:, :1, None]) ** 2 + (xx - centre[:, 1:, None]) ** 2) / 8)
        real = (2 * blobs - 1).astype(np.float32)[:, None]
        out.append((real, rng.standard_normal((BATCH, NZ, 1, 1)).astype(np.float32)))
    return out


def train(torch, models, batches, how="eager"):
    netG, netD = models["netG"], models["netD"]
    netG.train()
    netD.train()
    criterion = torch.nn.BCEWithLogitsLoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    if how == "model":
        netG, netD = torch.compile(netG), torch.compile(netD)

    def train_step(real_cpu, noise):
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        optimizerD.step()
        # (2) Update G network: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
        return errD.detach(), errG.detach()

    compiled = [netG, netD] if how == "model" else []
    if how == "step":
        train_step = torch.compile(train_step)
        compiled = [train_step]
    losses = []
    for real, noise in batches:
        errD, errG = train_step(torch.from_numpy(real), torch.from_numpy(noise))
        losses += [errD.item(), errG.item()]
    return {"loss": losses}, compiled
