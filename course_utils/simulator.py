"""Chapter 6's engine: what the training simulator and its experiments measure on the course's loop.

- ``boundary_grid`` evaluates a model on a grid over the data (the decision-boundary panel);
- ``updates_to_reach`` counts the weight updates a run needs to reach a validation accuracy;
- ``lr_one_adam``, ``sgd_vs_adam``, ``zero_grad_experiment``, ``no_grad_memory``, ``cosine_vs_constant``
  are the chapter's five experiments, each a real run whose figures the notebook prints.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.session import Session, TrainConfig


# --- the decision-boundary panel -----------------------------------------------------------------

def data_extent(points: torch.Tensor, margin: float = 0.15) -> tuple[float, float, float, float]:
    """A square (xmin, xmax, ymin, ymax) around 2-D points with a margin, for the boundary panel (chapter 6)."""
    lo, hi = points.min(dim=0).values, points.max(dim=0).values
    centre, half = (lo + hi) / 2, float((hi - lo).max()) / 2 * (1 + margin) or 1.0
    cx, cy = float(centre[0]), float(centre[1])
    return (cx - half, cx + half, cy - half, cy + half)


def boundary_grid(model: nn.Module, extent: tuple[float, float, float, float], n: int = 48) -> tuple[bytes, bytes]:
    """Predicted class and confidence (0-255) on an n x n grid, rows from the bottom (chapter 6).

    Runs in eval mode under no_grad and restores the model's mode: the run it watches is unchanged.
    """
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    xs = torch.linspace(extent[0], extent[1], n)
    ys = torch.linspace(extent[2], extent[3], n)
    grid = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1).reshape(-1, 2)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            probs = torch.softmax(model(grid), dim=1)
    finally:
        model.train(was_training)
    confidence, classes = probs.max(dim=1)
    classes_count = probs.shape[1]
    # confidence runs from 1/C (a guess) to 1 (certain): stretch it onto 0-255
    scaled = ((confidence - 1 / classes_count) / (1 - 1 / classes_count)).clamp(0, 1).nan_to_num(0.0)
    return (classes.to(torch.uint8).numpy().tobytes(), (scaled * 255).round().to(torch.uint8).numpy().tobytes())


# --- the experiments -----------------------------------------------------------------------------

def _quiet(session: Session) -> Session:
    with warnings.catch_warnings():   # torch's scheduler-order warning is a bug's symptom, not news here
        warnings.simplefilter("ignore", UserWarning)
        session.run_to_end()
    return session


def updates_to_reach(config: TrainConfig, target: float) -> int | None:
    """Weight updates until validation accuracy first reaches `target`, checked after every update (chapter 6).

    None when the run ends first. Validation here does not change the run (eval mode, no_grad, own RNG).
    """
    if not (_finite(target) and 0 < target <= 1):
        raise ValueError(f"target must be an accuracy in (0, 1], got {target!r}")
    session = Session(config)
    while not session.done:
        event = session.step()
        if event is None:
            break
        if event.update and session.evaluate()[1] >= target:
            return event.updates
    return None


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class LrOutcome:
    """What one learning rate did to a run: NaN or not, the loss extremes, the final validation accuracy."""

    lr: float
    optimizer: str
    any_nan: bool
    max_loss: float
    first_epoch_train_loss: float
    final_train_loss: float
    final_val_acc: float


def lr_outcome(lr: float, optimizer: str = "adam", **config) -> LrOutcome:
    """Train a run at `lr` to the end and summarise it (chapter 6's lr=1.0 experiment)."""
    s = _quiet(Session(TrainConfig(lr=lr, optimizer=optimizer, measure_memory=False, **config)))
    losses = [e.loss for e in s.steps]
    return LrOutcome(lr, optimizer, any(math.isnan(x) for x in losses), max(losses), s.epochs[0].train_loss,
                     s.epochs[-1].train_loss, s.epochs[-1].val_acc)


@dataclass(frozen=True)
class Race:
    """Updates SGD and Adam needed to reach `target` validation accuracy at the same learning rate."""

    lr: float
    target: float
    max_updates: int
    sgd: int | None
    adam: int | None

    def ratio(self) -> float | None:
        """SGD's updates over Adam's (None if either never got there)."""
        return None if self.sgd is None or self.adam is None else self.sgd / self.adam


def sgd_vs_adam(lr: float, target: float = 0.9, epochs: int = 20, **config) -> Race:
    """Chapter 6: the same lr for plain SGD and Adam, measured as updates to reach `target` accuracy."""
    base = TrainConfig(lr=lr, epochs=epochs, measure_memory=False, **config)
    counts = [updates_to_reach(TrainConfig(**{**vars(base), "optimizer": name}), target) for name in ("sgd", "adam")]
    return Race(lr, target, base.arithmetic().total_weight_updates, *counts)


def compare_runs(**changes_by_label: dict) -> dict[str, Session]:
    """Train one run per label, each the default config with its changes, all to the end (chapter 6)."""
    return {label: _quiet(Session(TrainConfig(**changes))) for label, changes in changes_by_label.items()}
