"""Learning-rate schedules (chapters 3, 6, 7): one factory, each schedule with the cadence it expects."""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch.optim import lr_scheduler

SCHEDULES = ("constant", "step", "cosine", "warmup_cosine", "onecycle")
# The unit a schedule counts in: "epoch" -> step it once per epoch; "update" -> once per optimizer.step().
CADENCE = {"constant": "epoch", "step": "epoch", "cosine": "epoch", "warmup_cosine": "update",
           "onecycle": "update"}


class Schedule(NamedTuple):
    """A torch scheduler and the cadence at which the loop must step it."""

    scheduler: lr_scheduler.LRScheduler
    cadence: str


def warmup_cosine_factor(update: int, total: int, warmup: int) -> float:
    """LR multiplier after `update` updates: linear warmup over `warmup` updates, then cosine to 0 (chapter 7)."""
    if update < warmup:
        return (update + 1) / warmup
    progress = min(1.0, (update - warmup) / max(1, total - warmup))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def make_scheduler(name: str, optimizer: torch.optim.Optimizer, *, epochs: int, steps_per_epoch: int,
                   warmup: float = 0.1, step_size: int | None = None, gamma: float = 0.1) -> Schedule:
    """Build schedule `name` for a run of `epochs` x `steps_per_epoch` updates (chapters 6, 7).

    constant: LambdaLR at factor 1. step: StepLR(step_size epochs, default epochs // 3, gamma).
    cosine: CosineAnnealingLR(T_max=epochs) to 0. warmup_cosine: LambdaLR, linear warmup over a
    fraction `warmup` of all updates (at least one), then cosine to 0. onecycle: OneCycleLR with
    max_lr = the optimizer's lr over all updates; it cycles momentum only when the optimizer already
    has some (plain SGD stays plain).
    """
    if name not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {name!r}")
    if epochs < 1 or steps_per_epoch < 1:
        raise ValueError(f"epochs and steps_per_epoch must be >= 1, got {epochs} and {steps_per_epoch}")
    if not 0.0 <= warmup < 1.0:
        raise ValueError(f"warmup must be a fraction in [0, 1), got {warmup!r}")
    total = epochs * steps_per_epoch
    if name == "constant":
        scheduler = lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    elif name == "step":
        scheduler = lr_scheduler.StepLR(optimizer, step_size=step_size or max(1, epochs // 3), gamma=gamma)
    elif name == "cosine":
        scheduler = lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    elif name == "warmup_cosine":
        warm = max(1, round(warmup * total))
        scheduler = lr_scheduler.LambdaLR(optimizer, lambda u: warmup_cosine_factor(u, total, warm))
    else:
        defaults = optimizer.defaults
        has_momentum = "betas" in defaults or defaults.get("momentum", 0) > 0
        scheduler = lr_scheduler.OneCycleLR(optimizer, max_lr=[g["lr"] for g in optimizer.param_groups],
                                            total_steps=total, cycle_momentum=has_momentum)
    return Schedule(scheduler, CADENCE[name])


def lr_curve(name: str, lr: float, epochs: int, steps_per_epoch: int, **options) -> list[float]:
    """The learning rate each update uses, from a real scheduler stepped at its cadence (chapters 6, 7 plots)."""
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=lr)
    scheduler, cadence = make_scheduler(name, optimizer, epochs=epochs, steps_per_epoch=steps_per_epoch,
                                        **options)
    curve = []
    for _ in range(epochs):
        for _ in range(steps_per_epoch):
            curve.append(optimizer.param_groups[0]["lr"])
            optimizer.step()  # no gradient: nothing moves, but the scheduler sees a step was taken
            if cadence == "update":
                scheduler.step()
        if cadence == "epoch":
            scheduler.step()
    return curve


def onecycle_cadence_demo(updates: int = 8, accum_steps: int = 4, lr: float = 0.1) -> tuple[list[float], list[float], str]:
    """OneCycleLR sized for `updates` optimizer updates, stepped per update vs per micro-batch (chapter 3).

    Returns the lr at each update stepped correctly, the lrs seen per micro-batch when stepped K times
    per update until torch refuses, and torch's error message then.
    """
    def fresh():
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
        return optimizer, lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=updates)

    optimizer, scheduler = fresh()
    right = []
    for _ in range(updates):
        right.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    optimizer, scheduler = fresh()
    wrong, error = [], ""
    import warnings
    with warnings.catch_warnings():   # stepping the scheduler before the first optimizer.step() is the bug shown
        warnings.simplefilter("ignore", UserWarning)
        return right, *_onecycle_per_micro_batch(optimizer, scheduler, updates, accum_steps)


def _onecycle_per_micro_batch(optimizer, scheduler, updates: int, accum_steps: int) -> tuple[list[float], str]:
    wrong, error = [], ""
    try:
        for _ in range(updates):
            for _ in range(accum_steps):
                wrong.append(optimizer.param_groups[0]["lr"])
                scheduler.step()                       # the bug: once per micro-batch
            optimizer.step()
    except ValueError as exc:
        error = f"ValueError: {exc}"
    return wrong, error
