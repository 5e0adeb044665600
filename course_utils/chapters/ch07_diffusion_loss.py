"""A diffusion model's loss that hardly moves while its samples improve (chapter 7).

Data: 8 tight Gaussian blobs (std 0.05) on a circle of radius 2. A DDPM with 50 noise levels (linear betas 1e-4
to 0.2) learns to predict the noise: an MLP (x_t and t/50 in, 128-128 hidden, the noise out), Adam 1e-3, batches
of 128, each example at a random level. At steps 1,000 and 2,000: the last 500 batch losses (their mean and their
spread), the loss on one fixed evaluation set (4,096 examples, their levels and noises drawn once), and 1,000
samples drawn by the reverse process, scored by the share within 0.2 of a blob's centre. For this data the best
possible noise prediction has a closed form (the posterior over the blobs), so the loss's floor is computed, not
guessed. The seeds train at once, as the copies of a StackedMLP (seed_stack.py).
"""
from __future__ import annotations

import math
from collections import deque

import torch
import torch.nn.functional as F

from course_utils.chapters.seed_stack import StackedMLP

LEVELS, BLOB_STD, BATCH, HIDDEN = 50, 0.05, 128, 128
BETAS = torch.linspace(1e-4, 0.2, LEVELS)
ALPHAS_BAR = torch.cumprod(1 - BETAS, 0)
CENTRES = torch.tensor([[2 * math.cos(2 * math.pi * k / 8), 2 * math.sin(2 * math.pi * k / 8)] for k in range(8)])


def blobs(n: int, generator: torch.Generator) -> torch.Tensor:
    return CENTRES[torch.randint(8, (n,), generator=generator)] + BLOB_STD * torch.randn(n, 2, generator=generator)


def noised(x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise."""
    a = ALPHAS_BAR[t].unsqueeze(-1)
    return a.sqrt() * x0 + (1 - a).sqrt() * noise


def _inputs(xt: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return torch.cat([xt, t.unsqueeze(-1).float() / LEVELS], -1)


def best_noise_guess(xt: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """E[noise | x_t]: the posterior over the 8 blobs (equal weights, each N(centre, std^2)), then each blob's
    posterior mean of x0, as Gaussian algebra gives it; the prediction no network can beat on average."""
    a, b2 = ALPHAS_BAR[t].sqrt()[:, None], (1 - ALPHAS_BAR[t])[:, None]
    variance = a ** 2 * BLOB_STD ** 2 + b2                                  # of x_t given the blob
    offset = xt[:, None, :] - a[:, None] * CENTRES[None]                    # (n, 8, 2)
    posterior = (-(offset ** 2).sum(2) / (2 * variance)).softmax(1)        # (n, 8)
    x0_given_blob = CENTRES[None] + (a * BLOB_STD ** 2 / variance)[:, None] * offset
    x0 = (posterior[:, :, None] * x0_given_blob).sum(1)
    return (xt - a * x0) / b2.sqrt()


@torch.no_grad()
def sample(model: StackedMLP, n: int, generators: list[torch.Generator]) -> torch.Tensor:
    """The reverse process from pure noise, every copy at once, each drawing from its own generator: (S, n, 2)."""
    draw = lambda: torch.stack([torch.randn(n, 2, generator=g) for g in generators])     # noqa: E731
    x = draw()
    for t in reversed(range(LEVELS)):
        level = torch.full((model.copies, n), t)
        x = (x - BETAS[t] / (1 - ALPHAS_BAR[t]).sqrt() * model(_inputs(x, level))) / (1 - BETAS[t]).sqrt()
        if t:
            x = x + BETAS[t].sqrt() * draw()
    return x


def near_a_blob(x: torch.Tensor) -> torch.Tensor:
    """Per copy: the share of samples within 0.2 of a blob's centre. x (S, n, 2)."""
    return (torch.cdist(x, CENTRES.expand(len(x), -1, -1)).amin(2) < 0.2).float().mean(1)


def evaluation_set(seed: int = 10 ** 6, n: int = 4096):
    g = torch.Generator().manual_seed(seed)
    x0, t = blobs(n, g), torch.randint(LEVELS, (n,), generator=g)
    noise = torch.randn(n, 2, generator=g)
    return noised(x0, t, noise), t, noise


def train(seeds, steps: int = 2000, every: int = 1000, window: int = 500) -> list[dict[str, list[float]]]:
    """Per seed, every `every` steps: the mean and standard deviation of the last `window` batch losses, the fixed
    set's loss, and the share of 1,000 samples near a blob."""
    seeds = list(seeds)
    model = StackedMLP(seeds, (3, HIDDEN, HIDDEN, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    xt_eval, t_eval, noise_eval = evaluation_set()
    out = [{"step": [], "mean": [], "std": [], "fixed": [], "near": [], "losses": [], "samples": []} for _ in seeds]
    recent: deque[torch.Tensor] = deque(maxlen=window)
    for step in range(1, steps + 1):
        x0 = torch.stack([blobs(BATCH, g) for g in generators])
        t = torch.stack([torch.randint(LEVELS, (BATCH,), generator=g) for g in generators])
        noise = torch.stack([torch.randn(BATCH, 2, generator=g) for g in generators])
        per_copy = F.mse_loss(model(_inputs(noised(x0, t, noise), t)), noise, reduction="none").mean((1, 2))
        optimizer.zero_grad()
        per_copy.sum().backward()
        optimizer.step()
        recent.append(per_copy.detach())
        for record, value in zip(out, per_copy.tolist()):
            record["losses"].append(value)
        if step % every == 0:
            losses = torch.stack(tuple(recent))                                    # (window, S)
            with torch.no_grad():
                guess = model(_inputs(xt_eval.expand(len(seeds), -1, -1), t_eval.expand(len(seeds), -1)))
                fixed = ((guess - noise_eval) ** 2).mean((1, 2))
            drawn = sample(model, 1000, [torch.Generator().manual_seed(7 + s) for s in seeds])
            near = near_a_blob(drawn)
            for i, record in enumerate(out):
                record["samples"].append(drawn[i])
                for key, value in (("step", step), ("mean", losses[:, i].mean().item()),
                                   ("std", losses[:, i].std().item()), ("fixed", fixed[i].item()),
                                   ("near", near[i].item())):
                    record[key].append(value)
    return out


def floor() -> float:
    """The fixed evaluation set's loss under the best possible noise prediction."""
    xt, t, noise = evaluation_set()
    return F.mse_loss(best_noise_guess(xt, t), noise).item()


BANDS = ((1, 5), (6, 25), (26, 50))          # noise levels, 1-based: almost none added, the middle, nearly pure noise


def floor_by_level() -> list[float]:
    """Each band's share of the floor on the fixed set: where the loss no model removes comes from."""
    xt, t, noise = evaluation_set()
    error = ((best_noise_guess(xt, t) - noise) ** 2).sum(1)
    return [(error[(t >= low - 1) & (t <= high - 1)].sum() / error.sum()).item() for low, high in BANDS]


def data_near_a_blob(n: int = 10_000) -> float:
    """The data's own share within 0.2 of a blob's centre: what a perfect sampler would score."""
    return near_a_blob(blobs(n, torch.Generator().manual_seed(5))[None]).item()


def diffusion_figure(run: dict[str, list], lowest: float):
    """Left: every batch loss of one seed, its 100-step running mean and the floor. Then its samples at each
    checkpoint, the blobs' centres marked."""
    import matplotlib.pyplot as plt

    panels = len(run["samples"])
    fig, axes = plt.subplots(1, 1 + panels, figsize=(8.8, 3.0), gridspec_kw={"width_ratios": [1.8] + [1] * panels})
    left = axes[0]
    losses = torch.tensor(run["losses"])
    left.plot(range(1, len(losses) + 1), losses, ".", ms=1.5, color="#95a5a6", label="batch loss")
    left.plot(range(100, len(losses) + 1), losses.unfold(0, 100, 1).mean(1), color="#2471a3", lw=1.5,
              label="mean of the last 100")
    left.axhline(lowest, color="#c0392b", ls="--", lw=1, label=f"best possible ({lowest:.3f})")
    left.set(ylim=(0.15, 0.8), xlabel="step", ylabel="noise-prediction loss", title="the loss (seed 0)")
    left.legend(fontsize=7, loc="upper right")
    for ax, drawn, step, near in zip(axes[1:], run["samples"], run["step"], run["near"]):
        ax.plot(drawn[:, 0], drawn[:, 1], ".", ms=1.2, color="#2471a3", alpha=0.5)
        ax.plot(CENTRES[:, 0], CENTRES[:, 1], "+", ms=6, color="#c0392b")
        ax.set(xlim=(-2.8, 2.8), ylim=(-2.8, 2.8), aspect="equal", xticks=[], yticks=[],
               title=f"samples at step {step:,}\n{near:.0%} within 0.2 of a centre")
    for ax in axes:
        ax.title.set_fontsize(9)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    return fig


def diffusion_lines(runs: list[dict[str, list]], lowest: float) -> list[str]:
    n = len(runs)
    first, last = 0, len(runs[0]["step"]) - 1
    a, b = runs[0]["step"][first], runs[0]["step"][last]
    small = sum(r["mean"][first] - r["mean"][last] < r["std"][last] for r in runs)
    gap = sum(r["fixed"][last] - lowest < 0.85 * (r["fixed"][first] - lowest) for r in runs)
    mostly = sum(lowest > 0.8 * r["fixed"][last] for r in runs)
    better = sum(r["near"][last] > 1.3 * r["near"][first] for r in runs)
    shares = floor_by_level()
    return [f"the fixed evaluation set's loss under the best possible noise prediction (closed form): {lowest:.3f}; "
            f"its share from noise levels " + ", ".join(f"{lo}-{hi}: {sh:.0%}" for (lo, hi), sh in zip(BANDS, shares)),
            f"{n} seeds, from step {a:,} to step {b:,}:",
            f"  batch by batch: the mean of the last 500 batch losses fell by less than one batch's standard deviation "
            f"on {small} of {n}",
            f"  on the fixed set: the loss above the floor shrank by over 15% on {gap} of {n}; at step {b:,} "
            f"the floor is over 80% of that loss on {mostly} of {n}",
            f"  samples within 0.2 of a blob's centre: over 1.3 times as many on {better} of {n} (the data itself: "
            f"{data_near_a_blob():.0%})"]
