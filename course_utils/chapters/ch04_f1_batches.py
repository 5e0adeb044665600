"""Chapter 4: F1 is no mean over examples, so a mean of per-batch F1 is not the validation set's F1.

One fixed model scores an imbalanced validation set (one example in ten positive); the F1 of the positive class
is computed three ways: once on the whole set, as the trainer used to average any metric (each batch's F1,
weighted by its examples: `PerBatchMean`), and by the metric protocol (`BinaryF1`: update() adds each batch's
counts, compute() divides once). A batch of 16 holds no positive about one time in five (0.9^16 = 0.19); its F1
is 0 however good the model, and the mean drags down.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from course_utils.production.classification_metrics import BinaryF1
from course_utils.production.metrics import PerBatchMean

POSITIVE_SHARE = 0.1
EXAMPLES = 1000


@dataclass(frozen=True)
class F1Batches:
    """One seed's validation set: its F1 once on the whole set, and two ways over batches, by batch size."""

    seed: int
    positives: int
    whole: float                          # F1 computed once from every example
    per_batch_mean: dict[int, float]      # the mean of each batch's F1, weighted by its examples
    without_positive: dict[int, tuple[int, int]]   # (batches holding no positive, batches)
    accumulated: dict[int, float]         # BinaryF1: update() per batch, compute() once


def imbalanced_scores(seed: int, n: int = EXAMPLES) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed linear model's logits on n points, one in ten positive (their first feature 2 higher), and the labels."""
    g = torch.Generator().manual_seed(seed)
    labels = (torch.rand(n, generator=g) < POSITIVE_SHARE).long()
    points = torch.randn(n, 2, generator=g)
    points[:, 0] += 2.0 * labels
    weights, bias = torch.tensor([2.0, 0.5]), -3.0          # the fixed model: logit = 2 x0 + 0.5 x1 - 3
    return points @ weights + bias, labels


def _batch_f1(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """One batch's F1, alone (0 for a batch with no positive and no positive prediction)."""
    one = BinaryF1()
    one.update(outputs, targets)
    return one.compute()


def f1_over_batches(seed: int, batch_sizes: tuple[int, ...] = (16, 32)) -> F1Batches:
    """F1 on one seed's imbalanced validation set: whole, per-batch mean and accumulated, by batch size (chapter 4)."""
    logits, labels = imbalanced_scores(seed)
    whole = BinaryF1()
    whole.update(logits, labels)
    means, accumulated, empty = {}, {}, {}
    for size in batch_sizes:
        empty[size] = (sum(int(part.sum()) == 0 for part in labels.split(size)), len(labels.split(size)))
        mean, protocol = PerBatchMean(_batch_f1), BinaryF1()
        for part, targets in zip(logits.split(size), labels.split(size)):
            mean.update(part, targets)
            protocol.update(part, targets)
        means[size], accumulated[size] = float(mean.compute()), float(protocol.compute())
    return F1Batches(seed, int(labels.sum()), float(whole.compute()), means, empty, accumulated)


def f1_batches_conclusion(runs: list[F1Batches], gaps: dict[int, float]) -> list[str]:
    """What the runs show, as counts (chapter 4): the per-batch mean below the whole set's F1 by more than
    gaps[size] on how many seeds, and the protocol equal to it; digits only where no run is near them."""
    n = len(runs)
    lowest, highest = min(r.whole for r in runs), max(r.whole for r in runs)
    lines = [f"{EXAMPLES} validation examples, about {POSITIVE_SHARE:.0%} positive, one fixed model, {n} seeds",
             f"  F1 on the whole set, computed once: between {math.floor(lowest * 10) / 10} and "
             f"{math.ceil(highest * 10) / 10} on {n} of {n} seeds"]
    for size, gap in gaps.items():
        below = sum(r.whole - r.per_batch_mean[size] > gap for r in runs)
        empty = sum(r.without_positive[size][0] for r in runs)
        batches = sum(r.without_positive[size][1] for r in runs)
        lines.append(f"  batches of {size}: {empty} of {batches} hold no positive (F1 0); the mean of per-batch F1 is "
                     f"below the whole set's by more than {gap} on {below} of {n} seeds")
    same = sum(all(abs(r.accumulated[size] - r.whole) < 1e-12 for size in gaps) for r in runs)
    lines.append(f"  BinaryF1, update() on every batch and compute() once: equal to the whole set's on {same} of {n} "
                 "seeds, at every batch size")
    return lines
