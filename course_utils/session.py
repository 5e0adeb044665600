"""One run of the course's loop (chapters 5, 6, 8): its configuration, how it is built, and a Session.

``TrainConfig`` holds every knob and validates it; ``build(config)`` makes the data, model,
optimizer, schedule and loaders from the config's seed; ``run(config)`` streams the loop's events
(``course_utils/loop.py``); ``Session`` lets a widget pull them one micro-batch or one epoch at a time.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.arithmetic import TrainingArithmetic, training_arithmetic
from course_utils.bugs import make_plan
from course_utils.checks import is_real as _real, require as _require
from course_utils.data import spiral_splits
from course_utils.loop import (EpochEvent, Event, RunState, StepEvent, _PrivateRng, evaluate_run, stream)
from course_utils.memory import GraphMemoryMeter
from course_utils.models import MLP, OPTIMIZERS, make_optimizer
from course_utils.schedules import SCHEDULES, make_scheduler

DEFAULT_LEAK = 0.5  # share of the validation set the data_leakage bug copies from training data


# --- configuration -------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainConfig:
    """Every knob of one run of the course's loop (chapters 5, 6, 8); invalid values raise ValueError."""

    n_train: int = 600
    n_val: int = 300
    classes: int = 3
    noise: float = 0.2
    hidden: int = 64
    depth: int = 2
    dropout: float = 0.0
    batchnorm: bool = False
    batch_size: int = 32
    lr: float = 0.01
    optimizer: str = "adam"
    momentum: float = 0.9
    weight_decay: float | None = None   # None: the optimizer's own default (AdamW 0.01, the others 0)
    schedule: str = "constant"
    epochs: int = 10
    accum_steps: int = 1
    clip_norm: float | None = None
    bugs: tuple[str, ...] = ()      # names from bugs.LOOP_BUGS, at most one per operation
    seed: int = 0
    measure_memory: bool = True     # False skips the graph-memory meter (memory figures read 0)
    drop_last: bool = False
    leak: float = 0.0               # share of validation copied from training (data_leakage uses 0.5 if 0)
    n_test: int = 0                 # a clean held-out test set, evaluated at every epoch's end if > 0

    def __post_init__(self):
        for name, minimum in [("n_train", 1), ("n_val", 1), ("n_test", 0), ("classes", 2), ("hidden", 1),
                              ("depth", 0), ("batch_size", 1), ("epochs", 1), ("accum_steps", 1), ("seed", 0)]:
            value = getattr(self, name)
            _require(isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
                     name, f"an integer >= {minimum}", value)
        _require(self.seed < 2**64, "seed", "an integer in [0, 2**64)", self.seed)   # torch's seed range
        _require(_real(self.lr) and self.lr > 0, "lr", "a finite number > 0", self.lr)
        _require(_real(self.noise) and self.noise >= 0, "noise", "a finite number >= 0", self.noise)
        _require(_real(self.dropout) and 0 <= self.dropout < 1, "dropout", "in [0, 1)", self.dropout)
        _require(_real(self.momentum) and 0 <= self.momentum < 1, "momentum", "in [0, 1)", self.momentum)
        _require(self.weight_decay is None or (_real(self.weight_decay) and self.weight_decay >= 0),
                 "weight_decay", "None or a finite number >= 0", self.weight_decay)
        _require(_real(self.leak) and 0 <= self.leak <= 1, "leak", "in [0, 1]", self.leak)
        _require(self.clip_norm is None or (_real(self.clip_norm) and self.clip_norm > 0), "clip_norm",
                 "None or a finite number > 0", self.clip_norm)
        _require(self.optimizer in OPTIMIZERS, "optimizer", f"one of {OPTIMIZERS}", self.optimizer)
        _require(self.schedule in SCHEDULES, "schedule", f"one of {SCHEDULES}", self.schedule)
        for name in ("batchnorm", "measure_memory", "drop_last"):
            _require(isinstance(getattr(self, name), bool), name, "True or False", getattr(self, name))
        _require(not isinstance(self.bugs, (str, bytes)) and hasattr(self.bugs, "__iter__"), "bugs",
                 "a tuple of bug names", self.bugs)
        object.__setattr__(self, "bugs", tuple(self.bugs))
        _require(all(isinstance(name, str) for name in self.bugs), "bugs", "a tuple of bug names (strings)",
                 self.bugs)
        make_plan(self.bugs)
        if "epoch_schedule_per_batch" in self.bugs and self.schedule == "onecycle" and self.accum_steps > 1:
            raise ValueError("bugs: epoch_schedule_per_batch with schedule='onecycle' and accum_steps > 1 would "
                             "step OneCycleLR past its total_steps, which torch refuses mid-run")
        last_batch = self.n_train % self.batch_size
        if self.batchnorm and (self.batch_size == 1 or (last_batch == 1 and not self.drop_last)):
            raise ValueError(f"batch_size={self.batch_size} leaves a batch of one example, which BatchNorm cannot "
                             "normalise in train mode; change batch_size or set drop_last=True")

    def arithmetic(self) -> TrainingArithmetic:
        """Chapter 0's counts for this run (the loop's counted updates match them)."""
        return training_arithmetic(self.n_train, self.batch_size, self.epochs, self.accum_steps,
                                   drop_last=self.drop_last)


def build(config: TrainConfig) -> RunState:
    """Data, model, optimizer, schedule and loaders for `config`, all from its seed (chapters 5, 6, 8)."""
    plan = make_plan(config.bugs)
    leak = config.leak or (DEFAULT_LEAK if plan.variant("data") == "overlap" else 0.0)
    splits = spiral_splits(config.n_train, config.n_val, config.n_test, classes=config.classes,
                           noise=config.noise, seed=config.seed, leak=leak)
    rng = _PrivateRng(config.seed)
    with rng:
        model = MLP(2, config.hidden, config.classes, config.depth, config.dropout, config.batchnorm)
    optimizer = make_optimizer(config.optimizer, model.parameters(), lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay)
    updates_per_epoch = max(1, config.arithmetic().updates_per_epoch)
    scheduler, cadence = make_scheduler(config.schedule, optimizer, epochs=config.epochs,
                                        steps_per_epoch=updates_per_epoch)
    shuffle = torch.Generator().manual_seed(config.seed)
    return RunState(
        config=config, plan=plan, splits=splits, model=model, loss_fn=nn.CrossEntropyLoss(),
        optimizer=optimizer, scheduler=scheduler, cadence=cadence,
        train_loader=DataLoader(splits.train, batch_size=config.batch_size, shuffle=True,
                                drop_last=config.drop_last, generator=shuffle),
        val_loader=DataLoader(splits.val, batch_size=config.batch_size),
        meter=GraphMemoryMeter() if config.measure_memory else None, rng=rng, params=list(model.parameters()),
        eval_rng=_PrivateRng(config.seed + 1_000_003))   # evaluation's own stream (train-mode eval draws here)


def run(config: TrainConfig) -> Iterator[Event]:
    """Build a run from `config` and stream its events (chapters 5, 6, 8)."""
    return stream(build(config))


class Session:
    """A run widgets pull one step at a time: step(), run_epoch(), run_to_end(), reset() (chapters 5, 6, 8).

    With ``ghost=True`` and bugs in the config, a healthy twin (same config and seed, no bugs) is pulled
    in lockstep, event for event: the simulator draws it faintly behind the bugged run (chapter 6).
    ``set_lr`` changes the learning rate mid-run; ``request_stop`` ends a running epoch after its current step.
    """

    def __init__(self, config: TrainConfig | None = None, ghost: bool = False):
        self.want_ghost = ghost
        self.reset(config or TrainConfig())

    def reset(self, config: TrainConfig | None = None) -> None:
        """Start again from scratch, with the same config or a new one."""
        self.config = config or self.config
        self.state = build(self.config)
        self._events = stream(self.state)
        self.history: list[Event] = []
        self.epochs_done = 0                               # EpochEvents so far (without scanning history)
        self.done = False
        self.stop_requested = False
        self.lr_changes: list[tuple[int, float]] = []   # (micro-steps done when it changed, new base lr)
        self.ghost = (Session(replace(self.config, bugs=()))
                      if self.want_ghost and self.config.bugs else None)

    @property
    def model(self) -> nn.Module:
        """The model being trained (for the decision-boundary plot)."""
        return self.state.model

    @property
    def steps(self) -> list[StepEvent]:
        """Every StepEvent so far."""
        return [e for e in self.history if isinstance(e, StepEvent)]

    @property
    def epochs(self) -> list[EpochEvent]:
        """Every EpochEvent so far."""
        return [e for e in self.history if isinstance(e, EpochEvent)]

    @property
    def lr(self) -> float:
        """The learning rate the next update will use."""
        return self.state.optimizer.param_groups[0]["lr"]

    def _pull(self) -> Event | None:
        event = next(self._events, None)
        if event is None:
            self.done = True
        else:
            self.history.append(event)
            self.epochs_done += isinstance(event, EpochEvent)
        if self.ghost is not None:                        # the healthy twin takes the same event
            self.ghost._pull()
        return event

    def step(self) -> StepEvent | None:
        """Train on one micro-batch; if it was the epoch's last, the epoch's evaluation runs too."""
        event = self._pull()
        while isinstance(event, EpochEvent):              # epochs without any batch (drop_last)
            event = self._pull()
        if event is not None and event.batch == len(self.state.train_loader):
            self._pull()
        return event

    def epoch_steps(self) -> Iterator[StepEvent]:
        """Step to the end of the current epoch, one micro-batch per item; stops early after request_stop().

        A stop requested before it starts (say, while the previous epoch was ending) ends it at once: a
        caller that begins a new run of epochs clears old requests first (``clear_stop``).
        """
        start = self.epochs_done                           # a counter: each micro-batch costs O(1), not O(history)
        while not self.done and self.epochs_done == start:
            if self.stop_requested:
                self.stop_requested = False
                return
            event = self.step()
            if event is None:
                return
            yield event

    def run_epoch(self) -> EpochEvent | None:
        """Train to the end of the current epoch and evaluate; returns that epoch's event (None if stopped)."""
        start = self.epochs_done
        for _ in self.epoch_steps():
            pass
        if self.epochs_done == start:
            return None
        return next(e for e in reversed(self.history) if isinstance(e, EpochEvent))

    def run_to_end(self) -> EpochEvent | None:
        """Train every remaining epoch; returns the last epoch's event."""
        while self._pull() is not None:
            pass
        return self.epochs[-1] if self.epochs else None

    def clear_stop(self) -> None:
        """Forget a stop request that no running epoch consumed (call before starting to train)."""
        self.stop_requested = False

    def request_stop(self) -> None:
        """Ask a running epoch_steps() / run_epoch() to stop after the micro-batch it is on (chapter 6)."""
        self.stop_requested = True

    def set_lr(self, lr: float) -> None:
        """Change the learning rate mid-run: the schedule goes on, scaled to the new base lr (chapter 6).

        Every lr the optimizer and scheduler keep (current, initial, OneCycle's max and min, the
        scheduler's base lrs) is multiplied by new / old base lr, so the shape of the schedule stays.
        """
        _require(_real(lr) and lr > 0, "learning rate", "a finite number > 0", lr)
        scheduler = self.state.scheduler
        ratio = lr / self.base_lr
        for group in self.state.optimizer.param_groups:
            for key in ("lr", "initial_lr", "max_lr", "min_lr"):
                if key in group:
                    group[key] *= ratio
        scheduler.base_lrs = [base * ratio for base in scheduler.base_lrs]
        if hasattr(scheduler, "_last_lr"):
            scheduler._last_lr = [group["lr"] for group in self.state.optimizer.param_groups]
        self.lr_changes.append((self.state.step, float(lr)))
        if self.ghost is not None:
            self.ghost.set_lr(lr)

    @property
    def base_lr(self) -> float:
        """The base learning rate now: the config's, or the last one set mid-run."""
        return self.lr_changes[-1][1] if self.lr_changes else self.config.lr

    def evaluate(self) -> tuple[float, float]:
        """Validate now, as the run would (bugs included), restoring the model's mode afterwards."""
        was_training = self.model.training
        loss, acc, _ = evaluate_run(self.state, self.state.val_loader)
        self.model.train(was_training)
        return loss, acc
