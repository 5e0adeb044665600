"""Chapter 7: which learning rate a log shows when two things set it.

A warmup wrapper (the rule of ``pytorch_warmup``: the optimizer uses the schedule's rate times a warmup factor
that rises to 1) and two chained torch schedulers both write ``param_groups[i]["lr"]`` after the schedule has
written it. A scheduler's ``get_last_lr()`` is what that scheduler wrote at its last step, so it misses what came
after it: the rate the optimizer used is ``optimizer.param_groups[i]["lr"]``. Every value is a product of Python
floats, the same on every machine.
"""
from __future__ import annotations

import contextlib
import warnings

import torch
from torch.optim import lr_scheduler as ls

LR, T_MAX, WARMUP = 0.05, 23, 5


class LinearDampening:
    """A warmup wrapper written out: ``with wrapper.dampening(): scheduler.step()`` puts back the rate the schedule
    set, lets the schedule step, keeps the new rate as the schedule's, then multiplies it by
    min(1, (calls + 1) / period) for the optimizer. ``period`` counts calls, whatever the loop's cadence."""

    def __init__(self, optimizer: torch.optim.Optimizer, period: int):
        self.optimizer, self.period, self.calls = optimizer, period, 0
        self.scheduled = [g["lr"] for g in optimizer.param_groups]
        self._dampen()

    def _dampen(self) -> None:
        factor = min(1.0, (self.calls + 1) / self.period)
        for group, lr in zip(self.optimizer.param_groups, self.scheduled):
            group["lr"] = lr * factor

    @contextlib.contextmanager
    def dampening(self):
        for group, lr in zip(self.optimizer.param_groups, self.scheduled):
            group["lr"] = lr
        yield
        self.scheduled = [g["lr"] for g in self.optimizer.param_groups]
        self.calls += 1
        self._dampen()


def _optimizer() -> torch.optim.SGD:
    return torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=LR)


def wrapped_cosine(epochs: int = 7) -> list[tuple[float, float]]:
    """CosineAnnealingLR(T_max=23) under a 5-call linear warmup wrapper, both stepped once per epoch from lr 0.05:
    per epoch, (the rate the optimizer used, the cosine's get_last_lr())."""
    optimizer = _optimizer()
    cosine = ls.CosineAnnealingLR(optimizer, T_max=T_MAX)
    warmup = LinearDampening(optimizer, WARMUP)
    rows = []
    for _ in range(epochs):
        rows.append((optimizer.param_groups[0]["lr"], cosine.get_last_lr()[0]))
        optimizer.step()
        with warmup.dampening():
            cosine.step()
    return rows


def chained(epochs: int = 7) -> list[tuple[float, float, float, float]]:
    """torch's own way, ChainedScheduler([LinearLR(start_factor=0.2, total_iters=4), CosineAnnealingLR(T_max=23)]),
    stepped once per epoch from lr 0.05: per epoch, (the rate the optimizer used, the chain's get_last_lr(), the
    LinearLR's, the cosine's)."""
    optimizer = _optimizer()
    linear = ls.LinearLR(optimizer, start_factor=0.2, total_iters=WARMUP - 1)
    cosine = ls.CosineAnnealingLR(optimizer, T_max=T_MAX)
    chain = ls.ChainedScheduler([linear, cosine])
    rows = []
    for _ in range(epochs):
        rows.append((optimizer.param_groups[0]["lr"], chain.get_last_lr()[0],
                     linear.get_last_lr()[0], cosine.get_last_lr()[0]))
        optimizer.step()
        chain.step()
    return rows


def epoch_argument_warning() -> tuple[str, float, float]:
    """``scheduler.step(epoch)`` with a fractional epoch, as warmup recipes write ``step(epoch + i / iters)``:
    torch's own warning (its first sentence), and the rate it sets over a rate of 0.001 written just before it,
    against CosineAnnealingLR's closed form at 1.5."""
    import math
    optimizer = _optimizer()
    cosine = ls.CosineAnnealingLR(optimizer, T_max=T_MAX)
    optimizer.step()
    optimizer.param_groups[0]["lr"] = 0.001
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cosine.step(1.5)
    message = next(str(w.message) for w in caught if issubclass(w.category, UserWarning))
    closed = LR * (1 + math.cos(math.pi * 1.5 / T_MAX)) / 2
    return message.split(". ")[0] + ".", optimizer.param_groups[0]["lr"], closed


def get_lr_outside_step(step_size: int = 5, gamma: float = 0.5, lr: float = 0.1, reads: int = 12):
    """StepLR read before each of `reads` scheduler.step() calls three ways: get_lr() (the rule step() applies to
    the current rate, here called outside it), get_last_lr() and param_groups[0]["lr"]; and get_lr()'s warning."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    schedule = ls.StepLR(optimizer, step_size=step_size, gamma=gamma)
    rows, message = [], ""
    for _ in range(reads):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rule = schedule.get_lr()[0]
        message = message or str(caught[0].message)
        rows.append((rule, schedule.get_last_lr()[0], optimizer.param_groups[0]["lr"]))
        optimizer.step()
        schedule.step()
    return rows, message


def get_lr_lines(step_size: int = 5, gamma: float = 0.5, lr: float = 0.1, reads: int = 12) -> list[str]:
    """Where get_lr() parts from the rate used, as chapter 7 prints it."""
    rows, message = get_lr_outside_step(step_size, gamma, lr, reads)
    apart = [i for i, (rule, last, used) in enumerate(rows) if rule != used]
    return [f"StepLR(step_size={step_size}, gamma={gamma}), lr {lr}, read before each scheduler.step():",
            f"  get_last_lr() equals param_groups[0]['lr'] at all {reads} reads: "
            f"{all(last == used for _, last, used in rows)}",
            f"  get_lr() differs at i = {apart}: " + ", ".join(f"{rows[i][0]:g} against {rows[i][2]:g}" for i in apart),
            f"  get_lr() warns: {message}"]


def logged_lr_lines() -> list[str]:
    """The three runs as the chapter prints them."""
    def r(v: float) -> str:
        return f"{v:.4f}"
    rows = wrapped_cosine()
    lines = [f"warmup wrapper (5 calls) on CosineAnnealingLR(T_max={T_MAX}), lr {LR}, both stepped per epoch:",
             "  epoch:                 " + "".join(f"{e:>8}" for e in range(len(rows))),
             "  optimizer's lr:        " + "".join(f"{r(a):>8}" for a, _ in rows),
             "  cosine.get_last_lr():  " + "".join(f"{r(b):>8}" for _, b in rows)]
    rows = chained()
    lines += ["ChainedScheduler([LinearLR(start_factor=0.2, total_iters=4), CosineAnnealingLR(T_max=23)]):",
              "  optimizer's lr:        " + "".join(f"{r(row[0]):>8}" for row in rows),
              "  chain.get_last_lr():   " + "".join(f"{r(row[1]):>8}" for row in rows),
              "  LinearLR's own:        " + "".join(f"{r(row[2]):>8}" for row in rows)]
    ok = all(row[0] == row[1] for row in rows)
    lines.append(f"  the chain reports the optimizer's lr at every epoch: {ok}; "
                 f"LinearLR's own report differs at {sum(row[0] != row[2] for row in rows)} of {len(rows)} epochs")
    message, used, closed = epoch_argument_warning()
    lines += [f"cosine.step(1.5): UserWarning: {message}",
              f"  lr written as 0.001 just before; after the call: {r(used)}, the closed form at epoch 1.5: {r(closed)}"]
    return lines
