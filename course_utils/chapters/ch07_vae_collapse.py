"""A VAE whose KL term goes to zero: the reconstruction's reduction decides the KL's weight (chapter 7).

Data: 32-dimensional points made from 4 hidden factors (x = tanh(z A / 2) + noise). A VAE with a 4-dimensional
latent, the usual loss reconstruction + KL, the KL summed over the latent dimensions and averaged over the batch.
The only difference between the two runs is the reconstruction's reduction: ``F.mse_loss(recon, x)`` (the mean
over the 32 dimensions, as the function's default gives) or the sum over them (the Gaussian log-likelihood up to
constants). Averaging divides the reconstruction by 32, which weighs the KL 32 times more: a beta-VAE with
beta = 32 nobody chose. Reported: the KL, the latent dimensions still in use (KL above 0.01 nats), and the
reconstruction error against the data's variance, which is the error of predicting the mean.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

DIM, FACTORS = 32, 4


def _data(seed: int, n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mixing = torch.randn(FACTORS, DIM, generator=g)
    return torch.tanh(torch.randn(n, FACTORS, generator=g) @ mixing / 2) + 0.05 * torch.randn(n, DIM, generator=g)


class VAE(nn.Module):
    def __init__(self, latent: int = FACTORS):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, 64), nn.ReLU(), nn.Linear(64, DIM))

    def forward(self, x: torch.Tensor):
        mu, log_var = self.encoder(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * log_var).exp()
        return self.decoder(z), mu, log_var


def kl_per_dimension(mu: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
    """KL(q(z|x) || N(0, 1)) for each example and latent dimension."""
    return -0.5 * (1 + log_var - mu ** 2 - log_var.exp())


def _terms(model: VAE, x: torch.Tensor, reduction: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(reconstruction, KL) of a batch: F.mse_loss reduced by `reduction` over each example's values ("mean" or
    "sum"), the KL summed over the latent dimensions; both averaged over the batch."""
    recon, mu, log_var = model(x)
    squared = F.mse_loss(recon, x, reduction="none")
    return squared.mean() if reduction == "mean" else squared.sum(1).mean(), kl_per_dimension(mu, log_var).sum(1).mean()


@dataclass(frozen=True)
class VaeOutcome:
    kl: float                 # nats per example, summed over the latent dimensions
    active: int               # latent dimensions whose mean KL is above 0.01 nats
    reconstruction: float     # mean squared error per value, decoding the posterior mean
    variance: float           # the data's variance per value: the error of always predicting the mean


def _fit(seed: int, epochs: int, n: int, lr: float, reduction: str, weight=lambda epoch: 1.0):
    """Adam, batches of 64, on `n` points of seed `seed`; each batch's loss reconstruction + weight(epoch) x KL.
    Yields (model, data, the epoch's weight) at the end of every epoch."""
    x = _data(seed, n)
    torch.manual_seed(seed)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        beta = weight(epoch)
        for batch in torch.randperm(n, generator=generator).split(64):
            reconstruction, kl = _terms(model, x[batch], reduction)
            loss = reconstruction + beta * kl
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        yield model, x, beta


def train_vae(reduction: str, seed: int, epochs: int = 20, n: int = 1000) -> VaeOutcome:
    """Adam 1e-3, batches of 64; the reconstruction term F.mse_loss reduced by `reduction` over the 32 values of each
    example ("mean" or "sum"), the KL summed over the latent dimensions; both averaged over the batch."""
    for model, x, _ in _fit(seed, epochs, n, 1e-3, reduction):
        pass
    with torch.no_grad():
        mu, log_var = model.encoder(x).chunk(2, dim=1)
        per_dimension = kl_per_dimension(mu, log_var).mean(0)
        return VaeOutcome(per_dimension.sum().item(), int((per_dimension > 0.01).sum()),
                          F.mse_loss(model.decoder(mu), x).item(), x.var(0, unbiased=False).mean().item())


def vae_lines(seeds=range(5)) -> list[str]:
    runs = {reduction: [train_vae(reduction, seed) for seed in seeds] for reduction in ("mean", "sum")}
    n = len(seeds)
    lines = [f"VAE, {DIM} values from {FACTORS} factors, latent {FACTORS}, loss = reconstruction + KL, {n} seeds:"]
    for reduction, outcomes in runs.items():
        lines.append(
            f"  F.mse_loss {reduction:4} over the values: KL under 0.01 nats on {sum(o.kl < 0.01 for o in outcomes)} "
            f"of {n}, over 1 nat on {sum(o.kl > 1 for o in outcomes)}; latent dimensions in use: "
            f"{sorted({o.active for o in outcomes})}; reconstruction error = the data's variance (predicting the mean, "
            f"within 1%) on {sum(abs(o.reconstruction - o.variance) < 0.01 * o.variance for o in outcomes)} of {n}, "
            f"under a fifth of it on {sum(o.reconstruction < 0.2 * o.variance for o in outcomes)}")
    return lines


def kl_warmup_run(seed: int, epochs: int = 16, n: int = 384) -> tuple[list[float], list[float]]:
    """The summed-reconstruction VAE with the KL's weight raised linearly from 0 (first epoch) to 1 (last), Adam
    3e-3. At each epoch's end, on all the training points, decoding the posterior mean (no sampling noise): the
    loss it minimises (reconstruction + weight x KL) and reconstruction + KL."""
    logged, full = [], []
    for model, x, weight in _fit(seed, epochs, n, 3e-3, "sum", lambda epoch: epoch / (epochs - 1)):
        with torch.no_grad():
            mu, log_var = model.encoder(x).chunk(2, dim=1)
            reconstruction = F.mse_loss(model.decoder(mu), x, reduction="none").sum(1).mean().item()
            kl = kl_per_dimension(mu, log_var).sum(1).mean().item()
        logged.append(reconstruction + weight * kl)
        full.append(reconstruction + kl)
    return logged, full


def kl_warmup_lines(seeds=range(5), epochs: int = 16) -> list[str]:
    runs = [kl_warmup_run(seed, epochs) for seed in seeds]
    n = len(seeds)
    rose = sum(logged[-1] > min(logged) for logged, _ in runs)
    fell = sum(full[-1] < full[logged.index(min(logged))] for logged, full in runs)
    return [f"KL weight raised from 0 to 1 over {epochs} epochs, {n} seeds, each epoch's end:",
            f"  the loss being minimised (reconstruction + weight x KL) ended above its lowest epoch on {rose} of {n}",
            f"  reconstruction + KL (weight 1 throughout, the quantity a VAE is judged by) ended below its value at that "
            f"lowest epoch on {fell} of {n}"]
