"""The arena (chapter 8): race the course's loop to a target validation accuracy in the fewest updates.

A ``Challenge`` fixes the data, the model, the target and the epoch limit; ``Knobs`` are what the
learner chooses (batch size, optimizer, learning rate, schedule, epochs). ``race`` trains the
challenge's ``TrainConfig`` with the course's own loop (``session.build`` + ``loop.stream``) and,
after every optimizer update, measures validation accuracy on the whole validation set (eval mode,
no_grad; no random numbers are drawn, so the run is the one it would be without watching).
The search for "the target in under U updates" is in ``ch08_arena_search.py``.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from course_utils.engine.loop import StepEvent, stream
from course_utils.engine.models import OPTIMIZERS
from course_utils.engine.schedules import SCHEDULES
from course_utils.engine.session import TrainConfig, build

MAX_EPOCHS = 20


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


@dataclass(frozen=True)
class Challenge:
    """Data, model, target and limits of one race (chapter 8); its `key` names its scoreboard."""

    n_train: int = 600
    n_val: int = 300
    noise: float = 0.2
    hidden: int = 64
    depth: int = 2
    target: float = 0.9
    max_epochs: int = MAX_EPOCHS
    seed: int = 0

    def __post_init__(self):
        _check(isinstance(self.target, (int, float)) and 0 < self.target <= 1,
               f"target accuracy must be in (0, 1], got {self.target!r}")
        _check(isinstance(self.max_epochs, int) and 1 <= self.max_epochs <= MAX_EPOCHS,
               f"max epochs must be an integer from 1 to {MAX_EPOCHS}, got {self.max_epochs!r}")

    @property
    def key(self) -> str:
        """A stable name: everything that makes two races comparable."""
        return (f"spiral N={self.n_train} val={self.n_val} noise={self.noise:g} mlp {self.depth}x{self.hidden} "
                f"target={self.target:.0%} max {self.max_epochs} epochs seed={self.seed}")

    def config(self, knobs: "Knobs") -> TrainConfig:
        """The full TrainConfig of `knobs` on this challenge (ValueError naming the knob if invalid)."""
        knobs.check(self)
        return TrainConfig(n_train=self.n_train, n_val=self.n_val, noise=self.noise, hidden=self.hidden,
                           depth=self.depth, seed=self.seed, batch_size=knobs.batch_size, lr=knobs.lr,
                           optimizer=knobs.optimizer, schedule=knobs.schedule, epochs=knobs.epochs,
                           measure_memory=True)


@dataclass(frozen=True)
class Knobs:
    """What the learner picks in the arena (chapter 8)."""

    batch_size: int = 32
    optimizer: str = "sgd"
    lr: float = 0.01
    schedule: str = "constant"
    epochs: int = MAX_EPOCHS

    def check(self, challenge: Challenge) -> None:
        """ValueError in the arena's words for a knob the challenge does not allow."""
        b = self.batch_size
        _check(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= challenge.n_train,
               f"batch size B must be a whole number from 1 to {challenge.n_train} (the dataset size), got {b!r}")
        _check(self.optimizer in OPTIMIZERS, f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        _check(isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and 0 < self.lr <= 10,
               f"learning rate must be a number above 0 and at most 10, got {self.lr!r}")
        _check(self.schedule in SCHEDULES, f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        _check(isinstance(self.epochs, int) and not isinstance(self.epochs, bool)
               and 1 <= self.epochs <= challenge.max_epochs,
               f"epochs must be a whole number from 1 to {challenge.max_epochs}, got {self.epochs!r}")

    def label(self) -> str:
        return f"{self.optimizer} lr={self.lr:g} B={self.batch_size} {self.schedule} {self.epochs} ep"


BASELINE = Knobs(batch_size=32, optimizer="sgd", lr=0.01, schedule="constant", epochs=MAX_EPOCHS)


@dataclass(frozen=True)
class RaceResult:
    """What one race measured (chapter 8). Accuracies are on the validation set after each update."""

    target: float
    knobs: Knobs
    config: TrainConfig
    updates_to_target: int | None   # the first update after which val accuracy >= target (None: never)
    final_acc: float                # val accuracy after the last update run
    best_acc: float
    peak_memory: int                # peak bytes autograd saved for backward in one step (CPU meter)
    total_updates: int              # optimizer.step() calls run
    wall_s: float                   # seconds, this machine (varies: never printed where nbval compares)
    curve: tuple[tuple[int, float], ...] = field(repr=False)   # (updates, val accuracy), one per update
    stopped: bool = False           # the learner pressed Stop
    capped: bool = False            # ended early by max_updates or stop_at_target (a probe, not a full run)

    @property
    def reached(self) -> bool:
        return self.updates_to_target is not None

    def summary(self) -> str:
        """One line, no wall time (what nbval compares)."""
        hit = (f"{self.target:.0%} after {self.updates_to_target} updates" if self.reached
               else f"{self.target:.0%} not reached in {self.total_updates} updates")
        at_hit = self.capped and self.updates_to_target == self.total_updates
        end = " (stopped)" if self.stopped else " (ended at the target)" if at_hit else " (capped)" if self.capped else ""
        return (f"{self.knobs.label()}: {hit}; final val acc {self.final_acc:.1%}, best {self.best_acc:.1%}, "
                f"peak memory {self.peak_memory:,} B, {self.total_updates} updates{end}")


@dataclass(frozen=True)
class Progress:
    """Sent to the view after every update: where the race is."""

    updates: int
    planned_updates: int
    epoch: int
    val_acc: float
    updates_to_target: int | None


def _val_accuracy(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Validation accuracy in eval mode under no_grad, the model's mode restored (chapter 8)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        hits = (model(inputs).argmax(dim=1) == targets).sum().item()
    model.train(was_training)
    return hits / len(targets)          # counted exactly: 270 / 300 is 0.9, a float32 mean is 0.8999...


def race_config(config: TrainConfig, target: float, knobs: Knobs | None = None, *,
                progress: Callable[[Progress], None] | None = None, stop: Callable[[], bool] | None = None,
                max_updates: int | None = None, stop_at_target: bool = False,
                at_hit: Callable[[torch.nn.Module], None] | None = None) -> RaceResult:
    """Train `config` with the course's loop, measuring val accuracy after every update (chapter 8).

    `progress` is called after every update; `stop()` returning True ends the race early;
    `max_updates` caps it (the search's probes); `stop_at_target` ends it at the first hit; `at_hit` is
    called once with the model at the first hit (a held-out check). Re-running a stored config repeats
    its counts exactly.
    """
    start = time.perf_counter()
    state = build(config)
    x_val, y_val = state.splits.val.tensors
    planned = config.arithmetic().total_weight_updates
    knobs = knobs or Knobs(config.batch_size, config.optimizer, config.lr, config.schedule, config.epochs)
    curve: list[tuple[int, float]] = []
    hit, peak, epoch, stopped, capped = None, 0, 0, False, False
    for event in stream(state):
        if not isinstance(event, StepEvent):
            continue
        peak, epoch = max(peak, event.memory), event.epoch
        if event.update:
            acc = _val_accuracy(state.model, x_val, y_val)
            curve.append((event.updates, acc))
            if hit is None and acc >= target - 1e-12:
                hit = event.updates
                if at_hit is not None:
                    at_hit(state.model)
            if progress is not None:
                progress(Progress(event.updates, planned, epoch, acc, hit))
            if (max_updates is not None and event.updates >= max_updates) or (stop_at_target and hit is not None):
                capped = event.updates < planned
                break
        if stop is not None and stop():
            stopped = True
            break
    accs = [a for _, a in curve]
    return RaceResult(target=target, knobs=knobs, config=config, updates_to_target=hit,
                      final_acc=accs[-1] if accs else math.nan, best_acc=max(accs, default=math.nan),
                      peak_memory=peak, total_updates=curve[-1][0] if curve else 0,
                      wall_s=time.perf_counter() - start, curve=tuple(curve), stopped=stopped, capped=capped)


def race(challenge: Challenge, knobs: Knobs, **options) -> RaceResult:
    """Race `knobs` on `challenge` (chapter 8); options as in `race_config`."""
    return race_config(challenge.config(knobs), challenge.target, knobs, **options)


def rank_key(result: RaceResult | dict) -> tuple:
    """Scoreboard order: reached first, fewer updates, higher final accuracy, less memory."""
    get = result.get if isinstance(result, dict) else lambda name: getattr(result, name)
    hit = get("updates_to_target")
    return (hit is None, hit if hit is not None else 0, -get("best_acc") if hit is None else 0,
            -get("final_acc"), get("peak_memory"))


def knobs_from(data: dict) -> Knobs:
    """Knobs from a stored dict (the scoreboard)."""
    return Knobs(**{k: data[k] for k in asdict(BASELINE)})
