"""The learning-rate range test (chapter 6): an exponentially growing lr on the run it tunes.

Each micro-batch uses a larger learning rate than the last, from ``start_lr`` to ``end_lr`` in equal
ratios, over ``iterations`` micro-batches of the run being tuned (its own data and batch size, epoch
after epoch as fastai's ``lr_find`` does). The loss, smoothed with a bias-corrected moving average,
first falls, then turns and explodes; the sweep stops once the smoothed loss passes ``diverge``
times its best. The suggestion is the learning rate where the smoothed loss falls fastest (steepest
descent per decade of lr), before its minimum; ``minimum_rule`` is the other common rule (fastai's
``minimum``: the lr of the lowest loss divided by 10).

Where this differs from fastai (all fine for a 600-example spiral, but worth knowing): the sweep
starts at 1e-5 (fastai 1e-7), smooths with beta 0.9 (fastai 0.98), suggests the steepest point
(fastai's default suggestion is ``valley``), and trains a fresh run instead of restoring the
learner's weights afterwards. The suggestion is an order of magnitude, not a number: chapter 6
measures how far it moves from seed to seed.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace

from course_utils.engine.loop import StepEvent, train_epoch
from course_utils.infra.notebook import one_thread
from course_utils.engine.session import TrainConfig, build

# the simulator's default run (600 examples, batch 32: 19 micro-batches an epoch), swept for 100 micro-batches
LR_FIND = TrainConfig(measure_memory=False)
ITERATIONS = 100


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
    n_train: int = 0         # the run it swept: dataset size and batch size
    batch_size: int = 0

    @property
    def minimum_rule(self) -> float:
        """fastai's other rule: the lr of the lowest smoothed loss, divided by 10."""
        return self.min_loss_lr / 10

    def text(self) -> str:
        """The sweep in a few stable lines (chapter 6's notebook prints it)."""
        from course_utils.infra.notebook import sig
        end = "stopped when the loss diverged" if self.stopped_early else "reached the end of the range"
        on = f" of the run it tunes (N={self.n_train}, B={self.batch_size})" if self.n_train else ""
        return (f"LR range test ({self.optimizer}): {len(self.lrs)} micro-batches{on}, lr {sig(self.lrs[0]):g} to "
                f"{sig(self.lrs[-1]):g}, {end}\n"
                f"  lowest smoothed loss {sig(min(self.smoothed)):g} at lr {sig(self.min_loss_lr):g}\n"
                f"  suggested lr (steepest descent) {sig(self.suggested):g}")


def _micro_batches(state) -> Iterator[StepEvent]:
    """The run's micro-batches, epoch after epoch, without evaluating (the sweep needs only training losses)."""
    while True:
        yield from train_epoch(state)


def lr_find(config: TrainConfig = LR_FIND, start_lr: float = 1e-5, end_lr: float = 10.0, beta: float = 0.9,
            diverge: float = 4.0, iterations: int = ITERATIONS) -> LrSweep:
    """Sweep the lr exponentially over `iterations` micro-batches of `config`'s run and suggest one (chapter 6)."""
    for name, value in [("start_lr", start_lr), ("end_lr", end_lr)]:
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if end_lr <= start_lr:
        raise ValueError(f"end_lr must be larger than start_lr, got {end_lr!r} <= {start_lr!r}")
    if not 0 <= beta < 1:
        raise ValueError(f"beta must be in [0, 1), got {beta!r}")
    if not diverge > 1:
        raise ValueError(f"diverge must be > 1, got {diverge!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 5:
        raise ValueError(f"the range test needs at least 5 micro-batches (iterations), got {iterations!r}")
    config = replace(config, schedule="constant", accum_steps=1)
    state = build(config)
    if len(state.train_loader) == 0:
        raise ValueError(f"dataset size {config.n_train} with batch size {config.batch_size} and drop_last "
                         "gives no micro-batch to sweep on")
    lrs, losses, smoothed, average, stopped = [], [], [], 0.0, False
    events = _micro_batches(state)
    with warnings.catch_warnings(), one_thread():
        warnings.simplefilter("ignore", UserWarning)
        for i in range(iterations):
            lr = start_lr * (end_lr / start_lr) ** (i / (iterations - 1))
            for group in state.optimizer.param_groups:
                group["lr"] = lr
            loss = next(events).loss
            average = beta * average + (1 - beta) * loss
            lrs.append(lr)
            losses.append(loss)
            smoothed.append(average / (1 - beta ** (i + 1)))
            if not math.isfinite(loss) or (i > 5 and smoothed[-1] > diverge * min(smoothed)):
                stopped = i < iterations - 1
                break
    events.close()
    finite = [s if math.isfinite(s) else math.inf for s in smoothed]
    best = min(range(len(finite)), key=finite.__getitem__)
    slopes = [(finite[i + 1] - finite[i - 1]) / math.log10(lrs[i + 1] / lrs[i - 1]) for i in range(1, best)]
    steepest = 1 + min(range(len(slopes)), key=slopes.__getitem__) if slopes else best
    return LrSweep(config.optimizer, lrs, losses, smoothed, stopped, lrs[steepest], lrs[best],
                   config.n_train, config.batch_size)


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
    ax.set_title(f"LR range test, {label or sweep.optimizer}: {len(sweep.lrs)} micro-batches, lr growing at every one",
                 fontsize=10)
    ax.legend(fontsize=9, frameon=True, framealpha=0.9, edgecolor="none", loc="upper left")
    fig.subplots_adjust(left=0.09, right=0.98, top=0.9, bottom=0.17)
    return fig
