# Mirrors: pytorch/examples, vae/main.py, snapshot at commit 77f55b912142 (2025-08-25); the file last changed in
# fcce71c (2025-06-15).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: a fully connected VAE whose forward draws its noise (the reparameterisation trick); the loss is the summed
# binary cross-entropy of the reconstruction plus the KL term; Adam(1e-3); per batch zero, forward, loss, backward,
# the loss's .item() added to a running sum, step; the test pass sums the batch losses under no_grad in eval mode
# and divides by the number of examples, keeping a reconstruction strip from its first batch; after each epoch 64
# samples are decoded with the decoder alone under no_grad. Shrunk: 8x8 stand-in digits (256 train, 100 test),
# widths 64-32-4 (not 784-400-20), batch 32 (not 128), 2 epochs (not 10); images go nowhere.
# Added: `with watch(...)` around the epochs.
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.doctor_published.standins import datasets, transforms

PIXELS, LATENT = 64, 4


def keep_grid(images: torch.Tensor, name: str, per_row: int = 8) -> None:
    """Where the script writes an image grid; here it goes nowhere."""


class TinyVAE(nn.Module):
    """64 pixels -> 32 -> (mean, log-variance) of 4 latents; 4 -> 32 -> 64 pixels in (0, 1)."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(PIXELS, 32)
        self.to_mean, self.to_logvar = nn.Linear(32, LATENT), nn.Linear(32, LATENT)
        self.dec_hidden, self.dec_out = nn.Linear(LATENT, 32), nn.Linear(32, PIXELS)

    def decode(self, code):
        return torch.sigmoid(self.dec_out(F.relu(self.dec_hidden(code))))

    def forward(self, images):
        h = F.relu(self.enc(images.reshape(-1, PIXELS)))
        mean, logvar = self.to_mean(h), self.to_logvar(h)
        spread = (0.5 * logvar).exp()
        code = mean + torch.randn_like(spread) * spread
        return self.decode(code), mean, logvar


def elbo_loss(rebuilt, images, mean, logvar):
    """Summed reconstruction cross-entropy plus KL(q(z|x) || N(0, I)), over the whole batch."""
    rebuild = F.binary_cross_entropy(rebuilt, images.reshape(-1, PIXELS), reduction="sum")
    kl = -0.5 * (1 + logvar - mean ** 2 - logvar.exp()).sum()
    return rebuild + kl


def main(watch):
    opts = SimpleNamespace(batch=32, epochs=2, seed=1, every=10)
    torch.manual_seed(opts.seed)
    dev = torch.device("cpu")
    seen = DataLoader(datasets.MNIST("mnist", train=True, download=True, transform=transforms.ToTensor()),
                      batch_size=opts.batch, shuffle=True)
    unseen = DataLoader(datasets.MNIST("mnist", train=False, transform=transforms.ToTensor()),
                        batch_size=opts.batch, shuffle=False)
    vae = TinyVAE().to(dev)
    adam = torch.optim.Adam(vae.parameters(), lr=1e-3)

    def fit(epoch):
        vae.train()
        summed = 0
        for k, (images, _) in enumerate(seen):
            images = images.to(dev)
            adam.zero_grad()
            rebuilt, mean, logvar = vae(images)
            loss = elbo_loss(rebuilt, images, mean, logvar)
            loss.backward()
            summed += loss.item()
            adam.step()
            if k % opts.every == 0:
                print(f"epoch {epoch} batch {k}: {loss.item() / len(images):.4f} per image")
        print(f"epoch {epoch}: mean training loss {summed / len(seen.dataset):.4f}")

    def check(epoch):
        vae.eval()
        summed = 0
        with torch.no_grad():
            for k, (images, _) in enumerate(unseen):
                images = images.to(dev)
                rebuilt, mean, logvar = vae(images)
                summed += elbo_loss(rebuilt, images, mean, logvar).item()
                if k == 0:
                    m = min(images.size(0), 8)
                    strip = torch.cat([images[:m], rebuilt.view(opts.batch, 1, 8, 8)[:m]])
                    keep_grid(strip.cpu(), f"rebuilt_{epoch}.png", per_row=m)
        summed /= len(unseen.dataset)
        print(f"epoch {epoch}: test loss {summed:.4f}")

    with watch(vae, adam):
        for epoch in range(1, opts.epochs + 1):
            fit(epoch)
            check(epoch)
            with torch.no_grad():
                dreams = vae.decode(torch.randn(64, LATENT).to(dev)).cpu()
                keep_grid(dreams.view(64, 1, 8, 8), f"dreams_{epoch}.png")
    return [vae, adam]


from tests.doctor_published import dedent, variant  # noqa: E402

CHECK_LOOP = """\
            for k, (images, _) in enumerate(unseen):
                images = images.to(dev)
                rebuilt, mean, logvar = vae(images)
                summed += elbo_loss(rebuilt, images, mean, logvar).item()
                if k == 0:
                    m = min(images.size(0), 8)
                    strip = torch.cat([images[:m], rebuilt.view(opts.batch, 1, 8, 8)[:m]])
                    keep_grid(strip.cpu(), f"rebuilt_{epoch}.png", per_row=m)
"""
VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("            adam.zero_grad()\n", "")),
    variant("zero_grad_before_step", "zero_grad_after_backward",
            ("            adam.zero_grad()\n", ""),
            ("            summed += loss.item()\n            adam.step()\n",
             "            summed += loss.item()\n            adam.zero_grad()\n            adam.step()\n")),
    variant("test_without_no_grad", "missing_no_grad",
            ("        with torch.no_grad():\n" + CHECK_LOOP, dedent(CHECK_LOOP))),
    variant("train_loss_tensor", "graph_attached_logging",
            ("            summed += loss.item()\n", "            summed += loss\n")),
    variant("test_images_are_training_images", "data_leakage",
            ('datasets.MNIST("mnist", train=False,', 'datasets.MNIST("mnist", train=True,')),
]
