"""Measured demos for the registry entries the loop doctor added (chapter 5): no loop variation, a run.

``scheduler_before_optimizer`` records the learning rate each update really used, in the healthy
order and with ``scheduler.step()`` moved before ``optimizer.step()``. ``softmax_before_cross_entropy``
trains the same MLP twice, once on raw logits and once on softmax probabilities fed to
``cross_entropy`` (which applies its own log-softmax), and measures how far each got.
``update_schedule_per_epoch`` records the learning rates a OneCycleLR gives when stepped after every
update (as documented) and when stepped once per epoch.
This module imports nothing from ``bugs.py``, which imports it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from course_utils.engine.data import make_spiral
from course_utils.engine.models import MLP
from course_utils.engine.schedules import make_scheduler


@dataclass(frozen=True)
class ScheduleOrderDemo:
    """The learning rate each of the first updates used, healthy order versus scheduler first."""

    schedule: str
    healthy: tuple[float, ...]
    scheduler_first: tuple[float, ...]


@dataclass(frozen=True)
class CadenceDemo:
    """OneCycleLR stepped per update (healthy) or per epoch: the learning rates the updates really used."""

    epochs: int
    updates_per_epoch: int
    max_lr: float
    peak_healthy: float        # the largest lr any update used
    peak_per_epoch: float
    last_healthy: float        # the lr of the last update
    last_per_epoch: float


@dataclass(frozen=True)
class SoftmaxDemo:
    """Two runs from the same start: cross_entropy on logits versus on softmax probabilities."""

    updates: int
    first_grad_norm_logits: float
    first_grad_norm_softmax: float
    final_loss_logits: float     # cross_entropy on the logits, measured the same way for both runs
    final_loss_softmax: float
    accuracy_logits: float
    accuracy_softmax: float


def _lrs_used(scheduler_first: bool, schedule: str, updates: int) -> tuple[float, ...]:
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scheduler, _ = make_scheduler(schedule, optimizer, epochs=1, steps_per_epoch=updates, warmup=0.3)
    used = []
    for _ in range(updates):
        optimizer.zero_grad()
        weight.sum().backward()
        if scheduler_first:
            scheduler.step()
        used.append(round(optimizer.param_groups[0]["lr"], 6))   # the lr this update applies
        optimizer.step()
        if not scheduler_first:
            scheduler.step()
    return tuple(used)


def scheduler_before_optimizer(schedule: str = "warmup_cosine", updates: int = 10) -> ScheduleOrderDemo:
    """Chapter 5: the lr each update used, with scheduler.step() after (healthy) or before optimizer.step()."""
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected call of")
        bugged = _lrs_used(True, schedule, updates)
    return ScheduleOrderDemo(schedule, _lrs_used(False, schedule, updates), bugged)


def _train_softmax(softmax: bool, updates: int, seed: int) -> tuple[float, float, float]:
    inputs, targets = make_spiral(300, seed=seed).tensors
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MLP(hidden=32)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    first_norm = 0.0
    for update in range(updates):
        optimizer.zero_grad()
        logits = model(inputs)
        scores = torch.softmax(logits, dim=1) if softmax else logits
        nn.functional.cross_entropy(scores, targets).backward()
        if update == 0:
            first_norm = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.parameters()])).item()
        optimizer.step()
    with torch.no_grad():
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits, targets).item()
        accuracy = (logits.argmax(dim=1) == targets).float().mean().item()
    return first_norm, loss, accuracy


def softmax_before_cross_entropy(updates: int = 150, seed: int = 0) -> SoftmaxDemo:
    """Chapter 5: train on logits and on softmax probabilities from the same start; measure both runs."""
    norm_l, loss_l, acc_l = _train_softmax(False, updates, seed)
    norm_s, loss_s, acc_s = _train_softmax(True, updates, seed)
    return SoftmaxDemo(updates, norm_l, norm_s, loss_l, loss_s, acc_l, acc_s)


def update_schedule_per_epoch(epochs: int = 5, updates_per_epoch: int = 20, max_lr: float = 0.1) -> CadenceDemo:
    """Chapter 5: OneCycleLR(total_steps = all updates) stepped after every update, or once per epoch."""
    used = {}
    for per_epoch in (False, True):
        weight = torch.zeros(1, requires_grad=True)
        optimizer = torch.optim.SGD([weight], lr=max_lr)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, epochs=epochs,
                                                        steps_per_epoch=updates_per_epoch)
        lrs = []
        for _ in range(epochs):
            for _ in range(updates_per_epoch):
                lrs.append(optimizer.param_groups[0]["lr"])
                optimizer.step()
                if not per_epoch:
                    scheduler.step()
            if per_epoch:
                scheduler.step()
        used[per_epoch] = lrs
    healthy, bugged = used[False], used[True]
    return CadenceDemo(epochs, updates_per_epoch, max_lr, round(max(healthy), 6), round(max(bugged), 6),
                       round(healthy[-1], 8), round(bugged[-1], 6))
