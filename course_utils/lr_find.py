"""The learning-rate range test (chapter 6): one pass with an exponentially growing lr, on the course's loop.

Each micro-batch of a single epoch uses a larger learning rate than the last, from ``start_lr`` to
``end_lr`` in equal ratios. The loss, smoothed with a bias-corrected moving average, first falls,
then turns and explodes; the sweep stops once the smoothed loss passes ``diverge`` times its best.
The suggestion is the learning rate where the smoothed loss falls fastest (steepest descent per
decade of lr), before its minimum: large enough to learn fast, well below where it blows up.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

from course_utils.loop import train_epoch
from course_utils.session import TrainConfig, build

# one pass of 100 micro-batches of 16 examples over the course's spiral
LR_FIND = TrainConfig(n_train=1600, batch_size=16, epochs=1, measure_memory=False)


@dataclass(frozen=True)
class LrSweep:
    """What the range test measured: the lr and (raw and smoothed) loss of every micro-batch it ran."""

    optimizer: str
    lrs: list[float]
    losses: list[float]
    smoothed: list[float]
    stopped_early: bool      # the loss diverged before the sweep reached end_lr
    suggested: float         # steepest descent of the smoothed loss
    min_loss_lr: float       # where the smoothed loss was lowest

    def text(self) -> str:
        """The sweep in a few stable lines (chapter 6's notebook prints it)."""
        from course_utils.notebook import sig
        end = "stopped when the loss diverged" if self.stopped_early else "reached the end of the range"
        return (f"LR range test ({self.optimizer}): {len(self.lrs)} micro-batches, lr {sig(self.lrs[0]):g} to "
                f"{sig(self.lrs[-1]):g}, {end}\n"
                f"  lowest smoothed loss {sig(min(self.smoothed)):g} at lr {sig(self.min_loss_lr):g}\n"
                f"  suggested lr (steepest descent) {sig(self.suggested):g}")


def lr_find(config: TrainConfig = LR_FIND, start_lr: float = 1e-5, end_lr: float = 10.0, beta: float = 0.9,
            diverge: float = 4.0) -> LrSweep:
    """Sweep the lr exponentially over one pass of `config`'s training data and suggest one (chapter 6)."""
    for name, value in [("start_lr", start_lr), ("end_lr", end_lr)]:
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if end_lr <= start_lr:
        raise ValueError(f"end_lr must be larger than start_lr, got {end_lr!r} <= {start_lr!r}")
    if not 0 <= beta < 1:
        raise ValueError(f"beta must be in [0, 1), got {beta!r}")
    if not diverge > 1:
        raise ValueError(f"diverge must be > 1, got {diverge!r}")
    config = replace(config, epochs=1, schedule="constant", accum_steps=1)
    state = build(config)
    steps = len(state.train_loader)
    if steps < 5:
        raise ValueError(f"the range test needs at least 5 micro-batches; dataset size {config.n_train} with "
                         f"batch size {config.batch_size} gives {steps}")
    lrs, losses, smoothed, average, stopped = [], [], [], 0.0, False
    events = train_epoch(state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for i in range(steps):
            lr = start_lr * (end_lr / start_lr) ** (i / (steps - 1))
            for group in state.optimizer.param_groups:
                group["lr"] = lr
            loss = next(events).loss
            average = beta * average + (1 - beta) * loss
            lrs.append(lr)
            losses.append(loss)
            smoothed.append(average / (1 - beta ** (i + 1)))
            if not math.isfinite(loss) or (i > 5 and smoothed[-1] > diverge * min(smoothed)):
                stopped = i < steps - 1
                break
    events.close()
    finite = [s if math.isfinite(s) else math.inf for s in smoothed]
    best = min(range(len(finite)), key=finite.__getitem__)
    slopes = [(finite[i + 1] - finite[i - 1]) / math.log10(lrs[i + 1] / lrs[i - 1]) for i in range(1, best)]
    steepest = 1 + min(range(len(slopes)), key=slopes.__getitem__) if slopes else best
    return LrSweep(config.optimizer, lrs, losses, smoothed, stopped, lrs[steepest], lrs[best])


def sweep_figure(sweep: LrSweep, label: str | None = None):
    """Loss against lr (log axis), raw and smoothed, with the suggestion marked (chapter 6).

    630 x 270 px at the notebook's 90 dpi with fixed margins, shown 1:1: legend text 9 pt = 11 px.
    `label` names the optimizer as the menus do ("SGD + momentum"); the code name otherwise.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 3.0), dpi=90)
    ax.plot(sweep.lrs, sweep.losses, color="#90a4ae", lw=0.8, label="loss (each micro-batch)")
    ax.plot(sweep.lrs, sweep.smoothed, color="#1565c0", lw=1.6, label="smoothed loss")
    ax.axvline(sweep.suggested, color="#2e7d32", ls="--", lw=1.2, label=f"suggested lr {sweep.suggested:.3g}")
    ax.axvline(sweep.min_loss_lr, color="#c62828", ls=":", lw=1.2, label=f"lowest loss at {sweep.min_loss_lr:.3g}")
    ax.set_xscale("log")
    top = max(s for s in sweep.smoothed if math.isfinite(s))
    ax.set_ylim(0, min(top, 3 * sweep.smoothed[0]) * 1.1)
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel("training loss")
    ax.set_title(f"LR range test, {label or sweep.optimizer}: one pass, lr growing every micro-batch", fontsize=10)
    ax.legend(fontsize=9, frameon=True, framealpha=0.9, edgecolor="none", loc="upper left")
    fig.subplots_adjust(left=0.09, right=0.98, top=0.9, bottom=0.17)
    return fig
