"""The LR scheduler gallery (chapter 7): six torch schedulers, each stepped at the cadence it expects.

Every curve is read from a real ``torch.optim.lr_scheduler`` object driving a real optimizer: the
learning rate each update uses, one value per update. Epoch schedulers are stepped once per epoch,
update schedulers once per ``optimizer.step()``, and ReduceLROnPlateau once per epoch *with the
validation metric* (``scheduler.step(val_loss)``; torch 2.13 has no ``verbose`` argument). Given a
metric, the gallery runs one epoch per value: no value is dropped.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.optim import lr_scheduler

from course_utils.engine.schedules import make_scheduler


@dataclass(frozen=True)
class Entry:
    """One scheduler of the gallery: its torch name, the cadence it expects, the call the loop makes."""

    name: str
    cadence: str  # "epoch", "update" or "metric" (once per epoch, with the validation metric)
    call: str
    note: str
    built: str    # how the gallery builds it (E epochs, U updates in all)


PLATEAU = {"factor": 0.5, "patience": 2}  # torch's defaults are factor 0.1, patience 10 (threshold 1e-4, relative)

GALLERY: tuple[Entry, ...] = (
    Entry("StepLR", "epoch", "scheduler.step()  # after each epoch", "multiplies the LR by gamma every step_size epochs",
          "StepLR(opt, step_size=E // 3, gamma=0.5)"),
    Entry("CosineAnnealingLR", "epoch", "scheduler.step()  # after each epoch",
          "lr_t = lr_min + (lr - lr_min) * (1 + cos(pi * t / T_max)) / 2, t counted in epochs",
          "CosineAnnealingLR(opt, T_max=E)"),
    Entry("OneCycleLR", "update", "scheduler.step()  # after each optimizer.step()",
          "warms up to max_lr, then anneals far below the start; total_steps = every update of the run",
          "OneCycleLR(opt, max_lr=lr, total_steps=U)"),
    Entry("ReduceLROnPlateau", "metric", "scheduler.step(val_loss)  # after each validation",
          "multiplies the LR by `factor` once the metric has not improved for more than `patience` epochs",
          "ReduceLROnPlateau(opt, factor={factor}, patience={patience})".format(**PLATEAU)),
    Entry("CosineAnnealingWarmRestarts", "update", "scheduler.step()  # after each optimizer.step()",
          "cosine down, then back up to the start: cycles of T_0, 2*T_0, 4*T_0 updates",
          "CosineAnnealingWarmRestarts(opt, T_0=ceil(U / 7), T_mult=2)"),
    Entry("warmup + cosine (LambdaLR)", "update", "scheduler.step()  # after each optimizer.step()",
          "linear warmup over the first 10% of updates, then cosine to 0",
          "LambdaLR(opt, warmup 10% of U, then cosine)"),
)
NAMES = tuple(e.name for e in GALLERY)
BY_NAME = {e.name: e for e in GALLERY}


def build(name: str, optimizer: torch.optim.Optimizer, epochs: int, steps_per_epoch: int):
    """The torch scheduler `name` for a run of `epochs` x `steps_per_epoch` updates (chapter 7 gallery)."""
    total = epochs * steps_per_epoch
    if name == "StepLR":
        return make_scheduler("step", optimizer, epochs=epochs, steps_per_epoch=steps_per_epoch,
                              step_size=max(1, epochs // 3), gamma=0.5).scheduler
    if name == "CosineAnnealingLR":
        return make_scheduler("cosine", optimizer, epochs=epochs, steps_per_epoch=steps_per_epoch).scheduler
    if name == "OneCycleLR":
        return make_scheduler("onecycle", optimizer, epochs=epochs, steps_per_epoch=steps_per_epoch).scheduler
    if name == "ReduceLROnPlateau":
        return lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", **PLATEAU)
    if name == "CosineAnnealingWarmRestarts":  # three cycles (T_0, 2 T_0, 4 T_0) cover the run: it ends low
        return lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=math.ceil(total / 7), T_mult=2)
    if name == "warmup + cosine (LambdaLR)":
        return make_scheduler("warmup_cosine", optimizer, epochs=epochs, steps_per_epoch=steps_per_epoch).scheduler
    raise ValueError(f"scheduler must be one of {list(NAMES)}, got {name!r}")


def curve(name: str, lr: float = 0.1, epochs: int | None = None, steps_per_epoch: int = 10,
          metric: Sequence[float] | None = None, cadence: str | None = None) -> list[float]:
    """The LR of every update when scheduler `name` is stepped at `cadence` (default: the one it expects).

    `metric`: one validation value per epoch, required by ReduceLROnPlateau; `epochs` defaults to its
    length (12 without one), and a metric of another length is refused rather than cut. Passing the
    other cadence shows the classic mistake (an update scheduler stepped per epoch, or the reverse).
    """
    epochs = _epochs(epochs, metric)
    entry = BY_NAME.get(name)
    if entry is None:
        raise ValueError(f"scheduler must be one of {list(NAMES)}, got {name!r}")
    if epochs < 1 or steps_per_epoch < 1:
        raise ValueError(f"epochs and steps per epoch must be at least 1, got {epochs} and {steps_per_epoch}")
    cadence = cadence or entry.cadence
    if cadence not in ("epoch", "update", "metric"):
        raise ValueError(f"cadence must be 'epoch', 'update' or 'metric', got {cadence!r}")
    if cadence == "metric" and metric is None:
        raise ValueError(f"{name} stepped with the metric needs one validation value per epoch ({epochs})")
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=lr, momentum=0.9)
    scheduler = build(name, optimizer, epochs, steps_per_epoch)
    lrs: list[float] = []
    for epoch in range(epochs):
        for _ in range(steps_per_epoch):
            lrs.append(optimizer.param_groups[0]["lr"])
            optimizer.step()  # no gradient: nothing moves, but the scheduler sees that a step happened
            if cadence == "update":
                scheduler.step()
        if cadence == "epoch":
            scheduler.step()
        elif cadence == "metric":
            scheduler.step(metric[epoch])
    return lrs


def _epochs(epochs: int | None, metric: Sequence[float] | None) -> int:
    """One epoch per metric value: a metric longer or shorter than the run is an error, never cut silently."""
    if metric is not None and epochs is not None and len(metric) != epochs:
        raise ValueError(f"the metric has {len(metric)} values but the run has {epochs} epochs: "
                         "give one validation value per epoch")
    if metric is not None and not all(math.isfinite(v) for v in metric):
        raise ValueError("the metric must hold finite numbers")
    return epochs if epochs is not None else (len(metric) if metric is not None else 12)


def gallery_table(lr: float = 0.1, epochs: int | None = None, steps_per_epoch: int = 10,
                  metric: Sequence[float] | None = None) -> list[tuple[str, str, float, float, float, float]]:
    """(name, cadence, first LR, peak LR, LR at mid-run, last LR) for every scheduler (chapter 7)."""
    epochs = _epochs(epochs, metric)
    rows = []
    for entry in GALLERY:
        lrs = curve(entry.name, lr, epochs, steps_per_epoch, metric)
        rows.append((entry.name, entry.cadence, lrs[0], max(lrs), lrs[len(lrs) // 2], lrs[-1]))
    return rows


def gallery_figure(lr: float = 0.1, epochs: int | None = None, steps_per_epoch: int = 10,
                   metric: Sequence[float] | None = None):
    """Six small panels: the LR of every update, from torch's own schedulers (chapter 7)."""
    import matplotlib.pyplot as plt

    epochs = _epochs(epochs, metric)
    fig, axes = plt.subplots(2, 3, figsize=(9.0, 4.6), sharex=True)
    for ax, entry in zip(axes.flat, GALLERY):
        lrs = curve(entry.name, lr, epochs, steps_per_epoch, metric)
        ax.plot(range(1, len(lrs) + 1), lrs, color="#2471a3", lw=1.6)
        how = {"metric": "epoch, with val loss (factor {factor}, patience {patience})".format(**PLATEAU)}
        ax.set_title(f"{entry.name}\nstepped per {how.get(entry.cadence, entry.cadence)}", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=8)
    for ax in axes[1]:
        ax.set_xlabel(f"update ({epochs} epochs x {steps_per_epoch})", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("learning rate", fontsize=8)
    fig.tight_layout()
    return fig
