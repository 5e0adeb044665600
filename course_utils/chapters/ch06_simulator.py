"""Chapter 6's engine: what the training simulator shows, and single runs of the course's loop.

- ``boundary_grid`` evaluates a model on a grid over the data (the decision-boundary panel);
- ``updates_to_reach`` counts the weight updates a run needs to reach a validation accuracy;
- ``lr_outcome``, ``compare_runs`` train single runs; ``run_figure`` freezes a simulator run for the page.

The chapter's experiments, each over five seeds, are in ``ch06_simulator_seeds.py``.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from course_utils.chapters.ch08_arena import race_config
from course_utils.engine.session import Session, TrainConfig

# one colour per class, in the boundary panel, the scatter and the live view (widgets/live_plot.py)
CLASS_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


# --- the decision-boundary panel -----------------------------------------------------------------

def data_extent(points: torch.Tensor, margin: float = 0.15) -> tuple[float, float, float, float]:
    """A square (xmin, xmax, ymin, ymax) around 2-D points with a margin, for the boundary panel (chapter 6)."""
    lo, hi = points.min(dim=0).values, points.max(dim=0).values
    centre, half = (lo + hi) / 2, float((hi - lo).max()) / 2 * (1 + margin) or 1.0
    cx, cy = float(centre[0]), float(centre[1])
    return (cx - half, cx + half, cy - half, cy + half)


# modules that compute differently in eval mode: only these are switched for the grid's forward pass
_MODE_DEPENDENT = (nn.Dropout, nn.modules.batchnorm._BatchNorm)


@functools.lru_cache(maxsize=8)
def _grid_points(extent: tuple[float, float, float, float], n: int) -> torch.Tensor:
    """The n x n inputs of the boundary grid, rows from the bottom (computed once per extent; never mutated)."""
    xs = torch.linspace(extent[0], extent[1], n)
    ys = torch.linspace(extent[2], extent[3], n)
    return torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1).reshape(-1, 2)


def boundary_grid(model: nn.Module, extent: tuple[float, float, float, float], n: int = 48) -> tuple[bytes, bytes]:
    """Predicted class and confidence (0-255) on an n x n grid, rows from the bottom (chapter 6).

    Runs in eval mode under no_grad and restores the model's mode: the run it watches is unchanged.
    """
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    grid = _grid_points(tuple(float(e) for e in extent), n)
    # eval mode for the modules it changes only: a Step's grid costs one forward pass, not two walks of the model
    switched = [m for m in model.modules() if m.training and isinstance(m, _MODE_DEPENDENT)]
    try:
        for m in switched:
            m.training = False
        with torch.no_grad():
            probs = torch.softmax(model(grid), dim=1)
    finally:
        for m in switched:
            m.training = True
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

    None when the run ends first. The arena's measuring loop (``ch08_arena.race_config``) counts them: validation
    there does not change the run (eval mode, no_grad, no random numbers drawn).
    """
    if not (_finite(target) and 0 < target <= 1):
        raise ValueError(f"target must be an accuracy in (0, 1], got {target!r}")
    return race_config(config, target, stop_at_target=True).updates_to_target


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
    return outcome_of(_quiet(Session(TrainConfig(lr=lr, optimizer=optimizer, measure_memory=False, **config))))


def outcome_of(s: Session) -> LrOutcome:
    """Summarise a finished run as an LrOutcome (chapter 6)."""
    losses = [e.loss for e in s.steps]
    return LrOutcome(s.config.lr, s.config.optimizer, any(math.isnan(x) for x in losses), max(losses),
                     s.epochs[0].train_loss, s.epochs[-1].train_loss, s.epochs[-1].val_acc)


def compare_runs(**changes_by_label: dict) -> dict[str, Session]:
    """Train one run per label, each the default config with its changes, all to the end (chapter 6)."""
    return {label: _quiet(Session(TrainConfig(**changes))) for label, changes in changes_by_label.items()}


FIGURE_WIDTH_IN = 9.4     # 846 px at the notebooks' 90 dpi: shown 1:1 in an 848-px output, so 8 pt = 10 px on screen


def run_figure(session: Session, title: str | None = None):
    """A static picture of a simulator run (chapter 6's closing figure): boundary and five curves, ghost dashed.

    Sized for the notebook's width (text >= 8 pt, 10 px on screen); one legend above the panels says which
    line is which run, and each panel's title names its curves, so no legend covers data.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D


    fig, axes = plt.subplots(2, 3, figsize=(FIGURE_WIDTH_IN, 6.2))
    ax = axes[0, 0]
    x, y = session.state.splits.train.tensors
    extent = data_extent(x)
    n = 80
    classes, confidence = boundary_grid(session.model, extent, n)
    cls = np.frombuffer(classes, dtype=np.uint8).reshape(n, n)
    conf = np.frombuffer(confidence, dtype=np.uint8).reshape(n, n) / 255
    colours = np.array([[int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)] for c in CLASS_COLOURS])
    alpha = (0.15 + 0.45 * conf)[..., None]
    ax.imshow(1 - alpha * (1 - colours[cls % len(colours)]), origin="lower", extent=extent, interpolation="bilinear")
    ax.scatter(x[:, 0].numpy(), x[:, 1].numpy(), c=[CLASS_COLOURS[int(k) % len(CLASS_COLOURS)] for k in y], s=5,
               edgecolors="#222", linewidths=0.3)
    ax.set_title("decision boundary" + (" (bugged run)" if session.ghost is not None else "")
                 + ",\ntraining data", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    runs = [(session.ghost, "#757575", "--")] if session.ghost is not None else []
    runs.append((session, None, "-"))
    panels = [(axes[0, 1], "loss: train per step (blue),\nvalidation per epoch (orange dots)", True),
              (axes[0, 2], "validation accuracy, per epoch", False),
              (axes[1, 0], "gradient norm (pre-clip), per step", True),
              (axes[1, 1], "learning rate, per step", False),
              (axes[1, 2], "graph memory, KiB: per step (purple),\nper evaluation (orange dots)", False)]
    for run, colour, style in runs:
        steps, epochs = run.steps, run.epochs
        xs, ends = [e.step for e in steps], [e.steps for e in epochs]
        axes[0, 1].plot(xs, [e.loss for e in steps], style, color=colour or "#1565c0", lw=1)
        axes[0, 1].plot(ends, [e.val_loss for e in epochs], style, marker="o", ms=3, color=colour or "#e65100", lw=1)
        axes[0, 2].plot(ends, [e.val_acc for e in epochs], style, marker="o", ms=3, color=colour or "#e65100", lw=1)
        axes[1, 0].plot(xs, [max(e.grad_norm, 1e-4) for e in steps], style, color=colour or "#1565c0", lw=1)
        axes[1, 1].plot(xs, [e.lr for e in steps], style, color=colour or "#2e7d32", lw=1)
        axes[1, 2].plot(xs, [e.memory / 1024 for e in steps], style, color=colour or "#6a1b9a", lw=1)
        if run is session:
            axes[1, 2].plot(ends, [e.eval_memory / 1024 for e in epochs], "o", color="#e65100", ms=3)
    for ax, name, log in panels:
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("micro-step", fontsize=8)
        ax.tick_params(labelsize=8)
        if log:
            ax.set_yscale("log")
    key = [Line2D([], [], color="#333", lw=1.2, ls="-",
                  label="bugged run (colours as in each title)" if session.ghost is not None else "run")]
    if session.ghost is not None:
        key.append(Line2D([], [], color="#757575", lw=1.2, ls="--", label="healthy ghost: same seed, no bug"))
    fig.suptitle(title or ("training simulator: " + (" + ".join(session.config.bugs) or "healthy run")), fontsize=10)
    fig.legend(handles=key, loc="upper center", bbox_to_anchor=(0.5, 0.955), ncol=len(key), fontsize=9,
               frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig
