"""Chapter 5: leakage through preprocessing, measured with real runs.

A preprocessing step that is fitted (its statistics computed) on data that includes the validation
set lets the validation score see that data twice. How much that inflates the score depends on what
the step learns from the data:

- ``normalisation_leak``: mean and standard deviation fitted on train + validation instead of train
  only, on the spiral. They are one shift and one scale per feature, computed without the labels and
  applied to every split alike, and a first Linear layer can absorb any shift and scale: the leak only
  changes where training starts. ``leak_effect`` measures over seeds whether that flatters validation.
- ``selection_leak``: keep the features most correlated with the labels, chosen on train +
  validation. On pure noise (labels independent of every feature) the chosen features fit the
  validation labels by construction: validation accuracy far above chance, fresh test data at chance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import torch
from torch import nn

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.infra.parallel import map_runs


@dataclass(frozen=True)
class LeakRun:
    """One way of preprocessing, trained and scored: validation (what you would report) and a clean test set."""

    val_acc: float
    test_acc: float


@dataclass(frozen=True)
class LeakEffect:
    """One leak measured over several seeds: how much fitting on train + val instead of train only moved each score.

    `inflation` is what the leak added to the validation score beyond what it added on the clean test set:
    the part of a validation gain that new data will not confirm.
    """

    runs: tuple[dict[str, LeakRun], ...]      # one per seed, keyed "train only" and "train + val"

    def changes(self, split: str) -> list[float]:
        """Per seed, leaked minus clean accuracy on `split` ("val" or "test")."""
        return [getattr(r["train + val"], f"{split}_acc") - getattr(r["train only"], f"{split}_acc") for r in self.runs]

    @property
    def val_change(self) -> float:
        return sum(self.changes("val")) / len(self.runs)

    @property
    def test_change(self) -> float:
        return sum(self.changes("test")) / len(self.runs)

    @property
    def inflation(self) -> float:
        return self.val_change - self.test_change

    @property
    def largest(self) -> tuple[float, float]:
        """(val change, test change) of the seed whose validation score the leak moved most."""
        return max(zip(self.changes("val"), self.changes("test")), key=lambda pair: abs(pair[0]))


def leak_effect(leak: Callable[[int], dict[str, LeakRun]], seeds: Iterable[int]) -> LeakEffect:
    """Run `leak(seed)` (e.g. `normalisation_leak`) for every seed (chapter 5)."""
    runs = tuple(map_runs(leak, [(seed,) for seed in seeds]))
    if not runs:
        raise ValueError("seeds must name at least one seed")
    return LeakEffect(runs)


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
                       steps: int = 100) -> dict[str, LeakRun]:
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
                   features: int = 1000, keep: int = 20, steps: int = 100) -> dict[str, LeakRun]:
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
