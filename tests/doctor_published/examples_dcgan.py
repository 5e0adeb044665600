# Mirrors: pytorch/examples, dcgan/main.py, snapshot at commit 77f55b912142 (2025-08-25); the file last changed
# in cc8e404 (2025-05-13).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a generator and a discriminator (BatchNorm, N(0, 0.02) init), BCE, one Adam each (beta1 0.5); per batch
# the discriminator is zeroed, backwarded on a real batch and then on detached fakes (two backward passes, one
# step), then the generator is zeroed and backwarded through the discriminator and stepped; every 100th batch
# sample images are drawn from a fixed noise batch; both state_dicts are saved after each epoch.
# Shrunk: the CIFAR-10 branch only, 8x8 stand-in images, latent 8, widths 4 (one up/down stage fewer), 2 epochs
# (not 25), a fixed seed; images and checkpoints go nowhere (no files). Added: `with watch(...)` around the epochs.
# Real bug (published file, line 268, in the every-100th-batch branch): the sample images are drawn from the fixed
# noise with gradients enabled and bound to the same name as the training fakes, so autograd records a graph of the
# generator that nobody backwards (it lives until the name is rebound in the next iteration).
import io
import random
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms

IS_REAL, IS_FAKE = 1.0, 0.0


@dataclass
class GanSettings:
    batch: int = 64
    side: int = 8
    latent: int = 8
    g_width: int = 4
    d_width: int = 4
    epochs: int = 2
    lr: float = 2e-4
    beta1: float = 0.5
    smoke: bool = False
    seed: int = 999


def write_png(images: torch.Tensor, name: str, normalize: bool = False) -> None:
    """Where the script saves an image grid to a file; here the grid goes nowhere."""


def dcgan_init(layer: nn.Module) -> None:
    if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(layer.weight, 0.0, 0.02)
    elif isinstance(layer, nn.BatchNorm2d):
        nn.init.normal_(layer.weight, 1.0, 0.02)
        nn.init.zeros_(layer.bias)


class Painter(nn.Module):
    """Latent vector (latent x 1 x 1) -> 4x4 feature map -> 3 x 8 x 8 image in [-1, 1]."""

    def __init__(self, latent: int, width: int, channels: int = 3):
        super().__init__()
        self.layers = nn.Sequential(
            nn.ConvTranspose2d(latent, 2 * width, 4, 1, 0, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(True),
            nn.ConvTranspose2d(2 * width, channels, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.layers(z)


class Critic(nn.Module):
    """3 x 8 x 8 image -> probability that it is real, one per image."""

    def __init__(self, width: int, channels: int = 3):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(channels, width, 4, 2, 1, bias=False), nn.LeakyReLU(negative_slope=0.2, inplace=True),
            nn.Conv2d(width, 2 * width, 3, 1, 1, bias=False), nn.BatchNorm2d(2 * width),
            nn.LeakyReLU(negative_slope=0.2, inplace=True),
            nn.Conv2d(2 * width, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, images):
        return self.layers(images).flatten()


def main(watch):
    cfg = GanSettings()
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    dev = torch.device("cpu")
    to_unit = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    pictures = datasets.CIFAR10(root="cifar", download=True, transform=to_unit)
    loader = DataLoader(pictures, batch_size=cfg.batch, shuffle=True, num_workers=0)

    gen = Painter(cfg.latent, cfg.g_width).to(dev)
    gen.apply(dcgan_init)
    disc = Critic(cfg.d_width).to(dev)
    disc.apply(dcgan_init)
    bce = nn.BCELoss()
    fixed_z = torch.randn(cfg.batch, cfg.latent, 1, 1, device=dev)
    opt_d = torch.optim.Adam(disc.parameters(), lr=cfg.lr, betas=(cfg.beta1, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=cfg.lr, betas=(cfg.beta1, 0.999))

    with watch([disc, gen], [opt_d, opt_g]):
        for epoch in range(cfg.epochs):
            for step, batch in enumerate(loader):
                # the critic: a real batch, then the generator's fakes, one backward each, one step
                disc.zero_grad()
                real = batch[0].to(dev)
                n = real.size(0)
                target = torch.full((n,), IS_REAL, dtype=real.dtype, device=dev)
                verdict = disc(real)
                loss_real = bce(verdict, target)
                loss_real.backward()
                on_real = verdict.mean().item()

                z = torch.randn(n, cfg.latent, 1, 1, device=dev)
                fakes = gen(z)
                target.fill_(IS_FAKE)
                verdict = disc(fakes.detach())
                loss_fake = bce(verdict, target)
                loss_fake.backward()
                on_fake = verdict.mean().item()
                loss_d = loss_real + loss_fake
                opt_d.step()

                # the generator: its fakes, labelled real, through the critic
                gen.zero_grad()
                target.fill_(IS_REAL)
                verdict = disc(fakes)
                loss_g = bce(verdict, target)
                loss_g.backward()
                on_fake_after = verdict.mean().item()
                opt_g.step()

                print(f"{epoch}/{cfg.epochs} {step}/{len(loader)} critic {loss_d.item():.4f} "
                      f"generator {loss_g.item():.4f} D(real) {on_real:.3f} D(fake) {on_fake:.3f}->{on_fake_after:.3f}")
                if step % 100 == 0:
                    write_png(real, "real.png", normalize=True)
                    fakes = gen(fixed_z)
                    write_png(fakes.detach(), f"fakes_{epoch:03d}.png", normalize=True)
                if cfg.smoke:
                    break
            for net in (gen, disc):
                torch.save(net.state_dict(), io.BytesIO())
    return [disc, gen, opt_d, opt_g]


from tests.doctor_published import variant  # noqa: E402

REAL = {"missing_no_grad": "dcgan/main.py line 268: the sample images are drawn from the fixed noise with "
                           "gradients enabled"}
SAMPLES_NO_GRAD = ("                    fakes = gen(fixed_z)\n",
                   "                    with torch.no_grad():\n                        fakes = gen(fixed_z)\n")
VARIANTS = [
    variant("samples_under_no_grad", set(), SAMPLES_NO_GRAD, fixes={"missing_no_grad"}),
    variant("watching_the_discriminator_only", set(), SAMPLES_NO_GRAD,
            ("    with watch([disc, gen], [opt_d, opt_g]):", "    with watch(disc, opt_d):"),
            fixes={"missing_no_grad"}),
    variant("samples_first_in_each_iteration", set(),
            ("            for step, batch in enumerate(loader):\n",
             "            for step, batch in enumerate(loader):\n                with torch.no_grad():\n"
             "                    write_png(gen(fixed_z), 'now.png', normalize=True)\n"),
            SAMPLES_NO_GRAD, fixes={"missing_no_grad"}),
    variant("no_discriminator_zero_grad", "missing_zero_grad", ("                disc.zero_grad()\n", "")),
    variant("no_generator_zero_grad", "missing_zero_grad", ("                gen.zero_grad()\n", "")),
    variant("generator_zero_grad_after_backward", "zero_grad_after_backward",
            ("                gen.zero_grad()\n", ""),
            ("                loss_g.backward()\n",
             "                loss_g.backward()\n                gen.zero_grad()\n")),
    variant("discriminator_losses_kept", "graph_attached_logging",
            ("    fixed_z = torch", "    critic_losses = []\n    fixed_z = torch"),
            ("                opt_d.step()\n",
             "                opt_d.step()\n                critic_losses.append(loss_d)\n")),
]
