"""Chapter 4: a model is trained on inputs as its preprocessing made them, and is evaluated correctly only on
inputs made the same way. A downloaded checkpoint scored with another normalisation (another dataset's mean and
standard deviation, or none) is scored on inputs it never saw. Measured on the spiral moved away from 0 and
stretched, as raw features and pixel values are, with a model trained on the training set's standardisation."""
from __future__ import annotations

import torch
from torch.nn import functional as F

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP

SEEDS = (0, 1, 2)


def normalisation_accuracies(seed: int, steps: int = 300) -> dict[str, float]:
    splits = spiral_splits(600, 300, seed=seed)
    shift, scale = torch.tensor([3.0, -2.0]), torch.tensor([4.0, 0.5])
    x, y = splits.train.tensors
    vx, vy = splits.val.tensors
    x, vx = x * scale + shift, vx * scale + shift                 # the raw features
    mean, std = x.mean(0), x.std(0)                              # the training set's statistics
    torch.manual_seed(seed)
    model = MLP(hidden=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model((x - mean) / std), y).backward()
        optimizer.step()
    model.eval()
    ways = {"standardised with the training set's mean and std (as trained)": (vx - mean) / std,
            "standardised with the validation set's own mean and std": (vx - vx.mean(0)) / vx.std(0),
            "standardised with another dataset's mean 0.5 and std 0.25": (vx - 0.5) / 0.25,
            "not standardised (the raw features)": vx}
    with torch.no_grad():
        return {name: (model(inputs).argmax(1) == vy).float().mean().item() for name, inputs in ways.items()}


def normalisation_lines(seeds=SEEDS) -> list[str]:
    runs = [normalisation_accuracies(s) for s in seeds]
    n = len(runs)
    right = [r["standardised with the training set's mean and std (as trained)"] for r in runs]
    lines = [f"spiral MLP trained on standardised inputs, validation accuracy in eval mode, {n} seeds; "
             f"as trained: above 0.85 on {sum(a > 0.85 for a in right)} of {n}"]
    for name in list(runs[0])[1:]:
        drops = sum(r[name] < a - 0.1 for r, a in zip(runs, right))
        near = sum(abs(r[name] - a) <= 0.05 for r, a in zip(runs, right))
        lines.append(f"  validation inputs {name}: more than 0.1 below on {drops} of {n}, within 0.05 on {near} of {n}")
    return lines
