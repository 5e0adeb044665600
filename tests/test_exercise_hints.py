"""Issue 40 item 5: a hint only where the evidence singles out the cause.

Each hint below fires for the mistake it names (and the two hints that used to point the wrong way no longer fire for
those mistakes); where no one mistake fits the answer, the verdict says what is wrong and gives no hint at all.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from course_utils.exercises import EXERCISES
from course_utils.exercises import solutions as S
from course_utils.exercises.words import ACCURACY_HINT


def _verdict(name: str, *functions) -> str:
    verdict = EXERCISES[name].check(*functions, record=False)
    assert not verdict.passed and verdict.counted, verdict.message
    return verdict.message


def _hint(message: str) -> str:
    return next((line.removeprefix("  Hint: ") for line in message.splitlines() if line.startswith("  Hint: ")), "")


# --- mistakes and the hint each must get ------------------------------------------------------------------

def stop_never_reset(losses, patience, min_delta=0.0):
    """The count of checks without improvement is never set back to 0 by an improvement."""
    best, waited = math.inf, 0
    for check, value in enumerate(losses, 1):
        if not math.isfinite(value):
            return check
        if value < best - min_delta:
            best = value
        else:
            waited += 1
        if waited >= patience:
            return check
    return None


def stop_zero_based(losses, patience, min_delta=0.0):
    got = S.stop_check(losses, patience, min_delta)
    return None if got is None else got - 1


def accumulate_zero_every_micro_batch(model, loader, loss_fn, optimizer, K):
    """zero_grad() before every backward: only the window's last micro-batch reaches the step."""
    sizes = [len(t) for _, t in loader]
    updates = 0
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        start = i - i % K
        (loss_fn(model(x), y) * len(y) / sum(sizes[start:start + K])).backward()
        if (i + 1) % K == 0 or i + 1 == len(sizes):
            optimizer.step()
            updates += 1
    return updates


def accumulate_divide_by_k(model, loader, loss_fn, optimizer, K):
    sizes = [len(t) for _, t in loader]
    updates = 0
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / K).backward()
        if (i + 1) % K == 0 or i + 1 == len(sizes):
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return updates


def _float32(name):
    def wrong(*args):
        loss, acc = S.SOLUTIONS[name][0](*args)
        return loss, float(torch.tensor(acc, dtype=torch.float32))
    return wrong


def race_float32(model, optimizer, loader, vx, vy, target, max_updates):
    updates = 0
    while True:
        for x, y in loader:
            model.train()
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            updates += 1
            model.eval()
            with torch.no_grad():
                acc = (model(vx).argmax(1) == vy).float().mean().item()
            model.train()
            if acc >= target:
                return updates
            if updates == max_updates:
                return None


def fixed_loop_validating_once(model, optimizer, scheduler, train_loader, val_loader, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        scheduler.step()
    model.eval()
    with torch.no_grad():
        for _ in range(epochs):
            for x, y in val_loader:
                nn.functional.cross_entropy(model(x), y).item()
    model.train()


def fixed_loop_no_zero_grad(model, optimizer, scheduler, train_loader, val_loader, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        with torch.no_grad():
            for x, y in val_loader:
                nn.functional.cross_entropy(model(x), y).item()


HINTS = [  # (exercise, mistake, words the hint must hold, words it must not hold)
    ("stop_check", stop_never_reset, "starts the count of checks without improvement again", "counted from 1"),
    ("stop_check", stop_zero_based, "Checks are counted from 1", ""),
    ("accumulate_epoch", accumulate_zero_every_micro_batch, "zero_grad() empties .grad", "Weight each"),
    ("accumulate_epoch", accumulate_divide_by_k, "Weight each micro-batch's mean loss by its share", ""),
    ("evaluate", _float32("evaluate"), ACCURACY_HINT, ""),
    ("rank_metrics", _float32("rank_metrics"), ACCURACY_HINT, ""),
    ("race_to_target", race_float32, ACCURACY_HINT, "at least"),
    ("fixed_loop", fixed_loop_validating_once, "inside the epoch loop", ""),
    ("fixed_loop", fixed_loop_no_zero_grad, "optimizer.zero_grad()", "exhibit of this chapter"),
]


@pytest.mark.parametrize("name,mistake,hint,not_hint", HINTS, ids=[f"{h[0]}-{h[1].__name__}" for h in HINTS])
def test_each_hint_fires_for_the_mistake_it_names(name, mistake, hint, not_hint):
    given = _hint(_verdict(name, mistake))
    assert hint.lower() in given.lower(), given
    assert not not_hint or not_hint.lower() not in given.lower(), given


# --- answers no one mistake explains: no hint --------------------------------------------------------------

def _race_late(*args):
    got = S.race_to_target(*args)
    return None if got is None else got + 7


NO_HINT = [
    ("stop_check", lambda losses, patience, min_delta=0.0: 2 if len(losses) > 1 else None),
    ("race_to_target", _race_late),
    ("examples_processed", lambda updates, N, B, drop_last=False: S.examples_processed(updates, N, B, drop_last) + 3),
    ("lr_range_test", lambda m, loader, loss_fn, opt, s, e: S.lr_range_test(m, loader, loss_fn, opt, s, e * 1.5)),
    ("rank_metrics", lambda losses, correct, n: (S.rank_metrics(losses, correct, n)[0] * 1.01,
                                                 S.rank_metrics(losses, correct, n)[1])),
]


@pytest.mark.parametrize("name,answer", NO_HINT, ids=[n for n, _ in NO_HINT])
def test_no_hint_where_no_one_mistake_fits(name, answer):
    message = _verdict(name, answer)
    assert _hint(message) == "", message
