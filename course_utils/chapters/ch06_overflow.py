"""Chapter 6: a learning rate past the stable limit of least squares, whose error feeds on itself: the loss falls,
then grows by the same factor every step until it overflows to inf, and the next step makes it NaN.

Gradient descent on a mean squared error is stable for lr < 2 / λ, λ the largest eigenvalue of the loss's Hessian
(for a linear model, 2 XᵀX / n over the inputs with a column of ones for the bias). Just past it, the error along
that one direction is multiplied by |1 − lr · λ| > 1 each step. The loss grows from the first steps, stays finite
for over a hundred, overflows to inf when the squared errors pass float32's limit (the weights are still finite), and
turns NaN over a hundred steps later, when the weights themselves overflow and inf − inf appears: the
"NaN after 2,000 iterations" of a learner's question. A ReLU network at a high lr dies instead (its units stop
firing): chapter 6's runs show that.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.chapters.over_seeds import SEEDS
from course_utils.infra.parallel import map_runs


@dataclass(frozen=True)
class OverflowRun:
    """One least-squares run: the loss at the start and at step 50, where it first overflowed, and its end."""

    start: float
    at_50: float
    first_inf: int | None          # the first step (1-based) whose loss was inf
    first_nan: int | None          # the first step whose loss was NaN
    weights_finite_at_inf: bool    # were all weights finite when the loss first read inf?
    final: float


def stable_limit(x: torch.Tensor) -> float:
    """2 / λ: the largest lr at which gradient descent on mean((x·w + b − y)²) does not diverge."""
    design = torch.cat([x, torch.ones(len(x), 1)], dim=1).double()
    return 2 / (2 * torch.linalg.eigvalsh(design.T @ design / len(x)).max().item())


def least_squares_run(seed: int, lr_factor: float, steps: int = 2000, n: int = 256, features: int = 8) -> OverflowRun:
    """SGD, full batch, on a linear regression at lr = `lr_factor` times its stable limit."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = x @ torch.randn(features, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    torch.manual_seed(seed)
    model = nn.Linear(features, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr_factor * stable_limit(x))
    losses, finite_at_inf = [], None
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        value = loss.item()
        if math.isinf(value) and finite_at_inf is None:          # the first inf: are the weights still finite?
            finite_at_inf = all(bool(p.isfinite().all()) for p in model.parameters())
        loss.backward()
        optimizer.step()
        losses.append(value)
        if math.isnan(value):
            break
    first_inf = next((i + 1 for i, v in enumerate(losses) if math.isinf(v)), None)
    first_nan = next((i + 1 for i, v in enumerate(losses) if math.isnan(v)), None)
    return OverflowRun(losses[0], losses[49], first_inf, first_nan, bool(finite_at_inf), losses[-1])


def overflow_lines(seeds=SEEDS, past: float = 1.1, within: float = 0.5, steps: int = 1000) -> list[str]:
    """Chapter 6: least squares just past its stable lr, and at half the limit, counted on `seeds`."""
    n = len(seeds)
    runs = map_runs(least_squares_run, [(s, past, steps) for s in seeds] + [(s, within, steps // 4) for s in seeds])
    high, low = runs[:n], runs[n:]
    return [
        f"least squares, SGD on the full batch, {steps:,} steps, {n} seeds; lr = {past:g} x the stable limit 2/λ:",
        f"  the loss at step 50 above 10x its start (the warning, from the first steps): "
        f"{sum(r.at_50 > 10 * r.start for r in high)} of {n}",
        f"  finite for more than 100 steps, then inf within {steps:,}: "
        f"{sum(r.first_inf is not None and r.first_inf > 100 for r in high)} of {n}",
        f"  the weights all finite when the loss first read inf: {sum(r.weights_finite_at_inf for r in high)} of {n}",
        f"  NaN more than 100 steps after the first inf: "
        f"{sum(r.first_inf is not None and r.first_nan is not None and r.first_nan > r.first_inf + 100 for r in high)}"
        f" of {n}",
        f"lr = {within:g} x the limit, {steps // 4} steps: finite to the end and below 0.05: "
        f"{sum(math.isfinite(r.final) and r.final < 0.05 and r.first_inf is None for r in low)} of {n}",
    ]
