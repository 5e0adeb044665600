"""Chapter 5's engine: run the healthy and the bugged loop with the same seed, measure the difference.

- ``compare(bugs, **config)`` trains both runs and returns a ``Comparison`` (curves + signature numbers);
- ``EXHIBITS`` holds, for every loop bug, a configuration in which its signature shows (the same ones
  tests/test_bugs.py checks);
- ``comparison_figure`` draws loss / gradient norm / memory / validation accuracy against the healthy run;
- ``MysteryGame`` hides one of ``LOOP_BUGS`` (a seeded choice), shows its curves and grades a diagnosis.
"""
from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field

from course_utils.bugs import BUGS, LOOP_BUGS
from course_utils.loop import EpochEvent, StepEvent
from course_utils.session import Session, TrainConfig
from course_utils.notebook import sig

BASE = dict(n_train=300, n_val=150, epochs=3, measure_memory=False)

# per loop bug: a small run where its signature shows (from tests/test_bugs.py)
EXHIBITS: dict[str, dict] = {
    "missing_zero_grad": dict(BASE, optimizer="sgd"),
    "zero_grad_after_backward": dict(BASE),
    "eval_in_train_mode": dict(BASE, dropout=0.3),
    "missing_no_grad": dict(BASE, measure_memory=True),
    "graph_attached_logging": dict(BASE, measure_memory=True),
    "missing_train_switch": dict(BASE, dropout=0.5),
    "clip_before_backward": dict(BASE, optimizer="sgd", lr=0.5, clip_norm=0.1),
    "clip_after_step": dict(BASE, optimizer="sgd", lr=0.5, clip_norm=0.1),
    "epoch_schedule_per_batch": dict(BASE, schedule="step"),
    "unscaled_accumulation": dict(BASE, optimizer="sgd", lr=0.05, accum_steps=4),
    "accumulation_without_flush": dict(BASE, accum_steps=4),
    "mean_of_batch_means": dict(BASE),
    "data_leakage": dict(n_train=200, n_val=200, n_test=400, noise=1.0, hidden=256, epochs=30,
                         measure_memory=False),
}


@dataclass(frozen=True)
class Curves:
    """What one run logged: per micro-step and per epoch."""

    loss: list[float]
    grad_norm: list[float]
    memory: list[int]
    lr: list[float]
    graph_nodes: list[int]
    epoch_step: list[int]          # the micro-step count at each epoch's end (x of epoch curves)
    val_loss: list[float]
    val_acc: list[float]
    eval_memory: list[int]
    updates: list[int]
    train_loss: list[float]
    test_acc: list[float | None]

    @classmethod
    def of(cls, session: Session) -> Curves:
        steps: list[StepEvent] = session.steps
        epochs: list[EpochEvent] = session.epochs
        return cls([e.loss for e in steps], [e.grad_norm for e in steps], [e.memory for e in steps],
                   [e.lr for e in steps], [e.graph_nodes for e in steps], [e.steps for e in epochs],
                   [e.val_loss for e in epochs], [e.val_acc for e in epochs], [e.eval_memory for e in epochs],
                   [e.updates for e in epochs], [e.train_loss for e in epochs], [e.test_acc for e in epochs])


# (label, how to read it from Curves) for the signature table
QUANTITIES = [
    ("final train loss", lambda c: c.train_loss[-1]),
    ("final val loss", lambda c: c.val_loss[-1]),
    ("final val accuracy", lambda c: c.val_acc[-1]),
    ("final test accuracy", lambda c: c.test_acc[-1]),
    ("max grad norm", lambda c: max(c.grad_norm)),
    ("last grad norm", lambda c: c.grad_norm[-1]),
    ("peak step memory (bytes)", lambda c: max(c.memory)),
    ("peak eval memory (bytes)", lambda c: max(c.eval_memory)),
    ("graph nodes kept (max)", lambda c: max(c.graph_nodes)),
    ("weight updates", lambda c: c.updates[-1]),
    ("final lr", lambda c: c.lr[-1]),
]


@dataclass(frozen=True)
class Comparison:
    """A healthy and a bugged run of the same configuration and seed."""

    bugs: tuple[str, ...]
    config: dict
    healthy: Curves
    bugged: Curves
    healthy_session: Session = field(repr=False, compare=False)
    bugged_session: Session = field(repr=False, compare=False)

    def signature(self) -> list[tuple[str, float, float]]:
        """(quantity, healthy, bugged) for every quantity this configuration measures."""
        rows = []
        for label, read in QUANTITIES:
            h, b = read(self.healthy), read(self.bugged)
            if h is None or ("memory" in label and not self.config.get("measure_memory", True)):
                continue
            rows.append((label, h, b))
        return rows

    def changed(self) -> list[str]:
        """The quantities whose values differ between the runs."""
        return [label for label, h, b in self.signature() if h != b]

    def identical(self) -> bool:
        """Did the bugged run log exactly the healthy run's losses, norms and metrics?"""
        return self.healthy == self.bugged

    def text(self) -> str:
        name = " + ".join(self.bugs) or "no bug"
        lines = [f"{name}: healthy vs bugged (same seed)"]
        for label, h, b in self.signature():
            mark = "" if h == b else "   <- differs"
            lines.append(f"  {label:<26} {_fmt(h):>12} {_fmt(b):>12}{mark}")
        if self.identical():
            lines.append("  every logged number is identical: this bug leaves no trace in these curves")
        return "\n".join(lines)


def _fmt(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{sig(x):g}"


def compare(bugs: tuple[str, ...] | list[str] | str = (), **config) -> Comparison:
    """Train the healthy and the bugged run (same config, same seed) to the end; ValueError if bugs clash."""
    bugs = (bugs,) if isinstance(bugs, str) else tuple(bugs)
    healthy_config, bugged_config = TrainConfig(**config), TrainConfig(**config, bugs=bugs)
    healthy, bugged = Session(healthy_config), Session(bugged_config)
    with warnings.catch_warnings():   # torch's "scheduler.step() before optimizer.step()" is a bug's symptom here
        warnings.simplefilter("ignore", UserWarning)
        healthy.run_to_end()
        bugged.run_to_end()
    return Comparison(bugs, dict(config), Curves.of(healthy), Curves.of(bugged), healthy, bugged)


def exhibit(bug: str) -> Comparison:
    """One loop bug in its exhibit configuration."""
    return compare((bug,), **EXHIBITS[bug])


def comparison_figure(comp: Comparison, title: str | None = None, show_healthy: bool = True):
    """Four panels against the micro-step: loss, gradient norm, memory, validation accuracy."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(13.0, 2.9))
    runs = [("bugged", comp.bugged, "#c62828", "-")]
    if show_healthy:
        runs.insert(0, ("healthy", comp.healthy, "#1565c0", "--"))
    for label, c, colour, style in runs:
        x = range(1, len(c.loss) + 1)
        axes[0].plot(x, c.loss, style, color=colour, label=label, lw=1.2)
        axes[1].plot(x, c.grad_norm, style, color=colour, label=label, lw=1.2)
        axes[2].plot(x, [m / 1024 for m in c.memory], style, color=colour, label=f"{label} step", lw=1.2)
        axes[2].plot(c.epoch_step, [m / 1024 for m in c.eval_memory], "o", color=colour, ms=4,
                     label=f"{label} eval")
        axes[3].plot(c.epoch_step, c.val_acc, style, marker="o", ms=3, color=colour, label=label, lw=1.2)
    for ax, name in zip(axes, ["training loss", "gradient norm (pre-clip)", "graph memory (KiB)",
                               "validation accuracy"]):
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("micro-step", fontsize=8)
        ax.tick_params(labelsize=7)
    if max(max(comp.bugged.grad_norm), max(comp.healthy.grad_norm)) > 50 * max(min(comp.healthy.grad_norm), 1e-12):
        axes[1].set_yscale("symlog", linthresh=1e-3)
    axes[0].legend(fontsize=7, frameon=False)
    axes[2].legend(fontsize=6, frameon=False)
    fig.suptitle(title or (" + ".join(comp.bugs) or "healthy"), fontsize=10)
    fig.tight_layout()
    return fig


# --- the mystery game -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Grade:
    correct: bool
    guess: str
    answer: str
    message: str


class MysteryGame:
    """Each round hides one loop bug (a seeded choice); the learner sees its curves and names the bug."""

    def __init__(self, seed: int = 0, choices: tuple[str, ...] = LOOP_BUGS):
        self.seed = seed
        self.choices = tuple(choices)
        self.round = 0
        self.hidden: str | None = None
        self.comparison: Comparison | None = None
        self._cache: dict[str, Comparison] = {}

    def new_round(self, bug: str | None = None) -> Comparison:
        """Start a round: hide `bug` (or a seeded random choice) and return its healthy-vs-bugged curves."""
        self.round += 1
        if bug is None:
            bug = random.Random(self.seed * 1000 + self.round).choice(self.choices)
        if bug not in self.choices:
            raise ValueError(f"unknown mystery bug {bug!r}")
        self.hidden = bug
        if bug not in self._cache:
            self._cache[bug] = exhibit(bug)
        self.comparison = self._cache[bug]
        return self.comparison

    def setup_text(self) -> str:
        """The run's settings, with the bug's name left out."""
        if self.comparison is None:
            return "no round yet"
        return ", ".join(f"{k}={v}" for k, v in self.comparison.config.items() if k != "measure_memory")

    def grade(self, guess: str) -> Grade:
        """Compare a diagnosis with the hidden bug; the message reveals the bug, its signature and fix."""
        if self.hidden is None:
            raise ValueError("start a round first")
        bug = BUGS[self.hidden]
        ok = guess == self.hidden
        verdict = "Correct" if ok else f"Not quite: you said {guess}"
        return Grade(ok, guess, self.hidden,
                     f"{verdict}. The hidden bug was {bug.name} ({bug.title}). Signature: {bug.symptom} "
                     f"Fix: {bug.fix}")


# the detector's run: dropout, SGD, accumulation with a remainder, clipping that bites, an epoch schedule,
# a validation set that is not a multiple of the batch and a clean test set, so every toggle shows
DETECTOR = dict(n_train=300, n_val=150, n_test=150, epochs=4, dropout=0.3, optimizer="sgd", lr=0.3,
                accum_steps=3, clip_norm=0.1, schedule="cosine", measure_memory=True)


def sync_cost(steps: int = 200, size: int = 256) -> tuple[float, float]:
    """Seconds per step of a tiny CPU step loop logging loss.item() every step vs keeping the tensor."""
    import time

    import torch

    torch.manual_seed(0)
    layer = torch.nn.Linear(size, size)
    x = torch.randn(64, size)
    results = []
    for item in (True, False):
        start = time.perf_counter()
        total = torch.zeros(())
        for _ in range(steps):
            loss = layer(x).square().mean()
            total = total + (loss.item() if item else loss.detach())
        float(total)
        results.append((time.perf_counter() - start) / steps)
    return results[0], results[1]
