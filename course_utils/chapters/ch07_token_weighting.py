"""Chapter 7: gradient accumulation with a token-level loss over padded sequences.

K micro-batches of sequences of random lengths, padded per micro-batch, targets at padding set to
ignore_index. One big batch averages over every real token of the window. Accumulating each micro-batch's
mean divided by K (what "divide by K", or weighting by examples when micro-batches hold equal numbers of
sequences, gives) weights a token of a short micro-batch more than one of a long micro-batch; weighting by
real tokens gives the big batch's gradient.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

SEEDS = (0, 1, 2, 3, 4)
VOCAB, K, ROWS, MAX_LEN = 16, 4, 4, 24
IGNORE = -100


def _window(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """K micro-batches (inputs, targets), each padded to its own longest sequence; padding targets IGNORE."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(K):
        lengths = torch.randint(1, MAX_LEN + 1, (ROWS,), generator=g).tolist()
        width = max(lengths)
        inputs = torch.zeros(ROWS, width, dtype=torch.long)
        targets = torch.full((ROWS, width), IGNORE)
        for r, n in enumerate(lengths):
            inputs[r, :n] = torch.randint(1, VOCAB, (n,), generator=g)
            targets[r, :n] = torch.randint(1, VOCAB, (n,), generator=g)
        batches.append((inputs, targets))
    return batches


def _grad(model: nn.Module, losses) -> torch.Tensor:
    model.zero_grad()
    for loss in losses:
        loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


@dataclass(frozen=True)
class TokenWeighting:
    """Per seed: real tokens per micro-batch, and each rule's gradient error against the big batch."""

    tokens: dict[int, list[int]]
    mean_of_means: dict[int, float]
    token_weighted: dict[int, float]
    divided_after: dict[int, float]       # token sums backpropagated as they are, .grad divided once at the end

    def text(self) -> str:
        counts = [n for c in self.tokens.values() for n in c]
        low, high = min(self.mean_of_means.values()), max(self.mean_of_means.values())
        return "\n".join([
            f"{K} micro-batches of {ROWS} padded sequences (1 to {MAX_LEN} tokens each), seeds 0-4: "
            f"{min(counts)} to {max(counts)} real tokens per micro-batch",
            "gradient's distance from one big batch's (mean over the window's real tokens), relative to its size:",
            f"  each micro-batch's own mean / K: {100 * low:.0f}% to {100 * high:.0f}% off",
            f"  each micro-batch's token sum / the window's real tokens: below 1e-6 on every seed: "
            f"{max(self.token_weighted.values()) < 1e-6}",
            f"  each token sum as it is, the gradients divided by the window's real tokens after the last backward: "
            f"below 1e-6 on every seed: {max(self.divided_after.values()) < 1e-6}",
        ])


def token_weighting() -> TokenWeighting:
    """Chapter 7: mean of micro-batch means against token weighting, with padding, on seeds 0-4."""
    tokens, mom, tw, after = {}, {}, {}, {}
    for seed in SEEDS:
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Embedding(VOCAB, 8), nn.Linear(8, VOCAB))
        window = _window(seed)
        counts = [int((t != IGNORE).sum()) for _, t in window]
        total = sum(counts)
        width = max(t.shape[1] for _, t in window)
        pad = lambda x, v: F.pad(x, (0, width - x.shape[1]), value=v)  # noqa: E731
        x = torch.cat([pad(i, 0) for i, _ in window])
        y = torch.cat([pad(t, IGNORE) for _, t in window])
        big = _grad(model, [F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE)])
        means = _grad(model, [F.cross_entropy(model(i).flatten(0, 1), t.flatten(), ignore_index=IGNORE) / K
                              for i, t in window])
        sums = _grad(model, [F.cross_entropy(model(i).flatten(0, 1), t.flatten(), ignore_index=IGNORE,
                                             reduction="sum") / total for i, t in window])
        summed = _grad(model, [F.cross_entropy(model(i).flatten(0, 1), t.flatten(), ignore_index=IGNORE,
                                               reduction="sum") for i, t in window]) / total
        tokens[seed] = counts
        mom[seed] = ((means - big).norm() / big.norm()).item()
        tw[seed] = ((sums - big).norm() / big.norm()).item()
        after[seed] = ((summed - big).norm() / big.norm()).item()
    return TokenWeighting(tokens, mom, tw, after)
