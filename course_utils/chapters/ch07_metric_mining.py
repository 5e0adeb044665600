"""Chapter 7: triplet loss and batch-hard mining. A collapsed embedding (every input mapped to one point) scores
exactly the margin; batch-hard mining scores a good embedding above that, while the mean over
all triplets scores it below. Gaussian clusters, a small MLP, L2-normalised embeddings, seeds counted."""
from __future__ import annotations

import torch
from torch import nn

CLASSES, PER_CLASS, DIM, WIDTH = 8, 40, 20, 16
HARD_FACTOR, SHARE = 3, 0.25     # thresholds the printed counts are stated against


def clusters(seed: int, split: int) -> tuple[torch.Tensor, torch.Tensor]:
    """8 classes around fixed centres (by seed) in 20 dimensions, unit noise; split 0 trains, 1 is held out."""
    centres = torch.randn(CLASSES, DIM, generator=torch.Generator().manual_seed(seed))
    noise = torch.randn(CLASSES * PER_CLASS, DIM, generator=torch.Generator().manual_seed(1000 * seed + split + 1))
    return centres.repeat_interleave(PER_CLASS, 0) + noise, torch.arange(CLASSES).repeat_interleave(PER_CLASS)


def _distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Euclidean distances computed from the differences (not through a matrix product, whose rounding would leave
    identical points a small distance apart, differently on different CPUs)."""
    return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")


def _embedder(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, WIDTH))


def _embed(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return nn.functional.normalize(net(x), dim=1)


def hardest(e: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per anchor: the distance to its farthest positive and to its nearest negative (batch-hard mining)."""
    d = _distances(e, e)
    same = y[:, None] == y[None, :]
    others = same & ~torch.eye(len(y), dtype=torch.bool)
    return d.masked_fill(~others, float("-inf")).amax(1), d.masked_fill(same, float("inf")).amin(1)


def batch_hard_loss(e: torch.Tensor, y: torch.Tensor, margin: float) -> torch.Tensor:
    positive, negative = hardest(e, y)
    return torch.relu(positive - negative + margin).mean()


def all_triplets_loss(e: torch.Tensor, y: torch.Tensor, margin: float) -> torch.Tensor:
    """The mean of max(0, d(a,p) - d(a,n) + margin) over every (anchor, positive, negative) of the batch."""
    d = _distances(e, e)
    same = y[:, None] == y[None, :]
    valid = (same & ~torch.eye(len(y), dtype=torch.bool))[:, :, None] & ~same[:, None, :]
    return torch.relu(d[:, :, None] - d[:, None, :] + margin)[valid].mean()


def collapse_lines(margin: float = 0.01) -> list[str]:
    """A network whose last layer is zeroed maps every input to its bias: every distance is 0, and torch's
    TripletMarginLoss on the batch-hard triplets scores exactly the margin."""
    x, y = clusters(0, 0)
    net = _embedder(0)
    with torch.no_grad():
        net[2].weight.zero_()
        e = _embed(net, x[:64])
        d = _distances(e, e)
        same = y[:64, None] == y[None, :64]
        p = d.masked_fill(~same | torch.eye(64, dtype=torch.bool), -1).argmax(1)
        n = d.masked_fill(same, 9).argmin(1)
        loss = nn.TripletMarginLoss(margin=margin)(e, e[p], e[n]).item()
    return [f"collapsed (every embedding the same point): largest distance {d.max().item():.1g}; "
            f"TripletMarginLoss(margin={margin}) on the batch-hard triplets = {loss:.6f}, the margin: "
            f"{abs(loss - margin) < 1e-5}"]


def mining_lines(seeds: int = 5, margin: float = 0.01, steps: int = 300) -> list[str]:
    """Train on the mean over all triplets (Adam 0.01, batches of 64), then score the held-out points: precision@1,
    and, in batches of 64 as trained (batch-hard depends on the batch's size), the batch-hard loss and the
    all-triplet mean against the margin (a collapsed network's score), and the share of anchors whose farthest
    positive lies beyond their nearest negative. Then train with batch-hard mining itself
    and compare the held-out embeddings' spread (mean distance) with the start's."""
    good = hard_above = all_below = mostly = kept = 0
    for seed in range(seeds):
        x, y = clusters(seed, 0)
        held_x, held_y = clusters(seed, 1)
        spreads = []
        for mining in ("all triplets", "batch-hard"):
            net = _embedder(seed)
            optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
            order = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                start = _distances(_embed(net, held_x), _embed(net, held_x)).mean().item()
            for _ in range(steps):
                idx = torch.randperm(len(x), generator=order)[:64]
                rule = all_triplets_loss if mining == "all triplets" else batch_hard_loss
                loss = rule(_embed(net, x[idx]), y[idx], margin)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            with torch.no_grad():
                e = _embed(net, held_x)
                if mining == "all triplets":
                    d = _distances(e, e).fill_diagonal_(float("inf"))
                    good += (held_y[d.argmin(1)] == held_y).float().mean().item() >= 0.9
                    # scored in batches of 64, as trained: batch-hard mining depends on the batch's size
                    parts = torch.randperm(len(held_x), generator=torch.Generator().manual_seed(seed)).split(64)
                    hard = sum(batch_hard_loss(e[i], held_y[i], margin).item() for i in parts) / len(parts)
                    every = sum(all_triplets_loss(e[i], held_y[i], margin).item() for i in parts) / len(parts)
                    shares = []
                    for i in parts:
                        positive, negative = hardest(e[i], held_y[i])
                        shares.append((positive > negative).float().mean().item())
                    hard_above += hard > HARD_FACTOR * margin
                    all_below += every < margin
                    mostly += sum(shares) / len(shares) >= SHARE
                else:
                    spreads.append(_distances(e, e).mean().item() / start)
        kept += spreads[0] > 0.3
    return [f"trained on all triplets: precision@1 on held-out points at least 0.9 on {good} of {seeds} seeds",
            f"held-out points in batches of 64: their batch-hard loss is over {HARD_FACTOR}x the margin ({margin}, a "
            f"collapsed network's score) on {hard_above} of {seeds}; the mean over all triplets is below the margin on "
            f"{all_below} of {seeds}",
            f"anchors whose farthest positive in the batch lies beyond their nearest negative: at least {SHARE:.0%} on "
            f"{mostly} of {seeds}",
            f"trained with batch-hard mining itself: held-out spread above 0.3x its start (no collapse) on {kept} of "
            f"{seeds}"]
