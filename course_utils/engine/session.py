"""One run of the course's loop (chapters 5, 6, 8): its configuration, how it is built, and a Session.

``TrainConfig`` (``train_config.py``) holds every knob and validates it; ``build(config)`` makes the data, model,
optimizer, schedule and loaders from the config's seed; ``run(config)`` streams the loop's events
(``course_utils/engine/loop.py``); ``Session`` lets a widget pull them one micro-batch or one epoch at a time.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import torch
from torch import nn

from course_utils.engine.bugs import make_plan
from course_utils.engine.data import batch_loader, spiral_splits
from course_utils.engine.loop import (EpochEvent, Event, RunState, StepEvent, _PrivateRng, evaluate_run, stream)
from course_utils.engine.memory import GraphMemoryMeter
from course_utils.engine.models import MLP, make_optimizer
from course_utils.engine.schedules import make_scheduler
from course_utils.engine.train_config import TrainConfig
from course_utils.infra.checks import is_real as _real, require as _require

__all__ = ["TrainConfig", "build", "run", "Session", "DEFAULT_LEAK"]

DEFAULT_LEAK = 0.5  # share of the validation set the data_leakage bug copies from training data


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
        train_loader=batch_loader(splits.train, config.batch_size, shuffle=True, drop_last=config.drop_last,
                                  generator=shuffle),
        val_loader=batch_loader(splits.val, config.batch_size),
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
