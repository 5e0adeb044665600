"""Chapter 5: leakage through preprocessing, measured with real runs.

A preprocessing step that is fitted (its statistics computed) on data that includes the validation
set lets the validation score see that data twice. How much that inflates the score depends on what
the step learns from the data:

- ``normalisation_leak``: mean and standard deviation fitted on train + validation instead of train
  only, on the spiral. They describe the inputs only, never the labels, and the splits come from one
  distribution, so the statistics barely move and neither do the accuracies.
- ``selection_leak``: keep the features most correlated with the labels, chosen on train +
  validation. On pure noise (labels independent of every feature) the chosen features fit the
  validation labels by construction: validation accuracy far above chance, fresh test data at chance.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from course_utils.data import spiral_splits
from course_utils.models import MLP


@dataclass(frozen=True)
class LeakRun:
    """One way of preprocessing, trained and scored: validation (what you would report) and a clean test set."""

    val_acc: float
    test_acc: float


def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def _fit(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float) -> nn.Module:
    """Full-batch Adam on (x, y): the same number of steps for every variant being compared."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return model


def normalisation_leak(seed: int = 0, n_train: int = 150, n_val: int = 150, n_test: int = 600,
                       steps: int = 300) -> dict[str, LeakRun]:
    """The spiral's MLP trained on inputs normalised with train-only vs train + validation statistics."""
    splits = spiral_splits(n_train, n_val, n_test, seed=seed)
    (x, y), (xv, yv), (xt, yt) = (s.tensors for s in (splits.train, splits.val, splits.test))
    runs = {}
    for name, fitted_on in [("train only", x), ("train + val", torch.cat([x, xv]))]:
        mean, std = fitted_on.mean(0), fitted_on.std(0)
        torch.manual_seed(seed)
        model = _fit(MLP(2, 64, 3, 2), (x - mean) / std, y, steps, lr=0.01)
        runs[name] = LeakRun(_accuracy(model, (xv - mean) / std, yv), _accuracy(model, (xt - mean) / std, yt))
    return runs


def selection_leak(seed: int = 0, n_train: int = 100, n_val: int = 100, n_test: int = 1000,
                   features: int = 1000, keep: int = 20, steps: int = 200) -> dict[str, LeakRun]:
    """Pure noise, two classes: keep the `keep` features most correlated with the labels, chosen on
    train only vs on train + validation, then fit a linear classifier on the training rows."""
    generator = torch.Generator().manual_seed(seed)
    n = n_train + n_val + n_test
    x = torch.randn(n, features, generator=generator)
    y = torch.randint(0, 2, (n,), generator=generator)        # independent of every feature
    train, val, test = slice(0, n_train), slice(n_train, n_train + n_val), slice(n_train + n_val, n)
    runs = {}
    for name, rows in [("train only", train), ("train + val", slice(0, n_train + n_val))]:
        xs, ys = x[rows], y[rows].float()
        centred = xs - xs.mean(0)
        correlation = (centred * (ys - ys.mean())[:, None]).sum(0) / (centred.norm(dim=0) * (ys - ys.mean()).norm())
        chosen = correlation.abs().topk(keep).indices
        torch.manual_seed(seed)
        model = _fit(nn.Linear(keep, 2), x[train][:, chosen], y[train], steps, lr=0.05)
        runs[name] = LeakRun(_accuracy(model, x[val][:, chosen], y[val]),
                             _accuracy(model, x[test][:, chosen], y[test]))
    return runs
