"""Exercises of chapter 8: the arena's measuring loop (race to a target), and the examples an arena run processed."""
from __future__ import annotations

import copy
import functools

import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.engine.arithmetic import batch_sizes
from course_utils.engine.data import spiral_splits
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.guards import Watch
from course_utils.exercises.search import search
from course_utils.exercises.words import ACCURACY_HINT, Fail, Stop, need_int, number
from course_utils.engine.models import MLP


# --- race_to_target -----------------------------------------------------------------------------------------

def reference_race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates) -> int | None:
    """The oracle: train batch after batch (epochs repeat); after each update, measure in eval mode under no_grad."""
    updates = 0
    while updates < max_updates:
        for inputs, targets in train_loader:
            model.train()
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
            updates += 1
            if _accuracy(model, val_inputs, val_targets) >= target:
                return updates
            if updates == max_updates:
                return None
    return None


def _accuracy(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        hits = (model(inputs).argmax(dim=1) == targets).sum().item()     # the accuracy rule: an integer count
    model.train()
    return hits / len(targets)


VAL_SIZE = 300      # as in the arena: hits / 300 is not exact in float32 (232/300 is 0.77333331 there), so a target
CURVE = 60          # the run hits exactly separates the course's accuracy rule (an integer count over 300, in Python
                    # floats) from a float32 mean (CURVE: updates of the oracle's run that targets are chosen from)


def _setup():
    splits = spiral_splits(300, VAL_SIZE, seed=3)
    torch.manual_seed(3)
    model = MLP(hidden=32, dropout=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    loader = DataLoader(splits.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(3))
    return model, optimizer, loader, *splits.val.tensors


@functools.lru_cache(maxsize=1)
def _curve(max_updates: int) -> tuple[float, ...]:
    """Validation accuracy after each update of the oracle's run (to pick targets that are hit exactly)."""
    model, optimizer, loader, vx, vy = _setup()
    accs: list[float] = []
    torch.manual_seed(0)
    while len(accs) < max_updates:
        for inputs, targets in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
            accs.append(_accuracy(model, vx, vy))
            if len(accs) == max_updates:
                break
    return tuple(accs)


def _strict(accs: list[float], target: float) -> int | None:
    """Where a race that needs accuracy *above* the target would stop."""
    return next((i + 1 for i, a in enumerate(accs) if a > target), None)


def _below_in_float32(accuracy: float) -> bool:
    return float(torch.tensor(accuracy, dtype=torch.float32)) < accuracy


def _race_case(attempt: Attempt, target: float, max_updates: int, passed_exact: bool = False) -> None:
    """One race; `passed_exact`: an earlier race passed whose target the run hits exactly and float32 rounds up (so
    a float64 accuracy compared with `>` would have failed it)."""
    model, optimizer, loader, vx, vy = _setup()
    twin = copy.deepcopy((model, optimizer))
    steps = [0]
    optimizer.register_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    optimizer.register_step_pre_hook(lambda *_: _budget(steps[0], max_updates))
    given = vx.clone()
    watch = Watch(model, mark=given)
    what = (f"target={target:g} (exactly {round(target * VAL_SIZE)} of {VAL_SIZE} right), max_updates={max_updates}, "
            f"300 training and {VAL_SIZE} validation points (targets int64), a model with Dropout, Adam")
    torch.manual_seed(0)
    try:
        got = attempt.call(what, model, optimizer, loader, given, vy.clone(), target, max_updates)
    finally:
        watch.close()
    if got is not None:
        got = need_int(got)
    _state_around(watch, steps[0], max_updates)
    left = [name or "the model" for name, m in model.named_modules() if not m.training]
    if left:
        raise Fail(f"your function returned with {left[0]}{' and others' if len(left) > 1 else ''} in eval mode: "
                   "the statement says eval mode for the measurement, then back to train mode, and the training "
                   "that goes on after the race needs Dropout on.",
                   "Call model.train() right after every measurement, before you return.")
    _, _, twin_loader, _, _ = _setup()
    torch.manual_seed(0)
    want = reference_race(twin[0], twin[1], twin_loader, vx, vy, target, max_updates)
    if got == want and steps[0] == (want or max_updates):
        return
    accs = _curve(CURVE)
    said = "None (never reached)" if got is None else str(got)
    if want is None:
        truth = f"the run does not reach it within {max_updates} updates (best {number(max(accs[:max_updates]))})"
    else:
        truth = (f"accuracy first reaches {target:g} after update {want} (accuracy after updates "
                 f"{max(1, want - 2)} to {want}: {', '.join(f'{a:g}' for a in accs[max(0, want - 3):want])})")
    if got == want and steps[0] < (want or max_updates):
        raise Fail(f"your function returned {said}, but it stopped after {steps[0]} updates: the race goes on, epoch "
                   f"after epoch, until the target or max_updates={max_updates}.",
                   "Loop over the loader again and again (an epoch is not the budget); count the updates.")
    if got == want:
        raise Fail(f"your function returned {said}, right, but it made {steps[0]} updates: the race stops at the "
                   f"target ({want or max_updates} updates).", "Stop training as soon as the target is reached, or "
                                                               "at max_updates.")
    if (passed_exact and want is not None and accs[want - 1] == target and _below_in_float32(target)
            and _strict(accs, target) == got):
        # the earlier exact target rounds up in float32: a float64 race with ">" failed there, a float32 one did not
        raise Fail(f"your function returned {said}, but {truth}. Your race stopped right on an earlier target it hit "
                   f"exactly; here {round(target * VAL_SIZE)}/{VAL_SIZE} is "
                   f"{float(torch.tensor(target, dtype=torch.float32)):.8f} in float32, below the target "
                   f"{target:.8f}: the course's rule takes an accuracy as an integer count over the number of points.",
                   ACCURACY_HINT)
    if want is not None and accs[want - 1] == target and _strict(accs, target) == got:
        hint = "Reaching the target means an accuracy of at least the target; equal counts."
    elif got is not None and steps[0] == got + 1:
        hint = "Count updates from 1: after the first update the count is 1."
    elif got is not None and steps[0] == got and want is not None and got == want + 1:
        hint = "Measure after every update, the first included, and stop at the first that reaches the target."
    else:
        hint = ""               # no one slip fits this count: no hint
    raise Fail(f"your function returned {said}, but {truth}.", hint)


def _budget(made: int, max_updates: int) -> None:
    """Stop a race at the first update past max_updates (one that never reaches its target would run forever)."""
    if made >= max_updates:
        raise Stop(Fail(f"your function went on to update {made + 1}; max_updates is {max_updates}.",
                        "Stop after max_updates updates, and return None if the target was not reached by then."))


def _state_around(watch: Watch, steps: int, max_updates: int) -> None:
    """Fail on what the forwards show: measured in train mode or with a graph, trained in eval mode; the budget."""
    measured = watch.marked()
    if any(f.training for f in measured):
        raise Fail("your function measured the validation accuracy with the model in train mode: Dropout dropped "
                   "units, and the random numbers it drew changed the training that followed.",
                   "Switch to eval mode (model.eval()) for the measurement, then back with model.train().")
    if any(f.grad for f in measured):
        raise Fail("your function measured the validation accuracy with autograd on: every measurement built a "
                   "graph that no backward uses (the statement says no graph).",
                   "Run the measurement under `with torch.no_grad():`.")
    trained = watch.unmarked()
    if measured and any(not f.training for f in trained):
        late = sum(not f.training for f in trained)
        raise Fail(f"{late} of your {len(trained)} training forward passes ran in eval mode: after a measurement the "
                   "model was not switched back, so Dropout stopped dropping while it trained.",
                   "After each measurement, call model.train() before the next training step.")
    if steps > max_updates:
        raise Fail(f"your function made {steps} updates; max_updates is {max_updates}.",
                   "Stop after max_updates updates, and return None if the target was not reached by then.")


def check_race_to_target(attempt: Attempt) -> str:
    """The oracle: the same race on a copy (same seeds); a step hook counts the updates really made."""
    _race_case(attempt, 1.0, 15)                           # not reached: None (first: a stub answers at once)
    model, _, _, vx, vy = _setup()
    before = _accuracy(model, vx, vy)                      # the targets below are above it; one below it is last
    fair = [a for a in _curve(CURVE)[:40] if a > before]
    firsts = [a for i, a in enumerate(_curve(CURVE)[:40]) if a in fair and a > max(_curve(CURVE)[:i], default=0)]
    # levels the run first reaches by hitting them exactly: one that float32 rounds up (separates ">=" from ">" in
    # float64), then one that float32 rounds down (separates the accuracy rule from a float32 mean)
    _race_case(attempt, max(a for a in firsts if float(torch.tensor(a, dtype=torch.float32)) > a), CURVE)
    below = max(a for a in firsts if _below_in_float32(a))
    _race_case(attempt, below, CURVE, passed_exact=True)
    # just above a level hit exactly (5e-9 relative: beyond the rule's 1e-9, within float32's rounding): not reached
    # there; a float32 comparison, or a count over one point too few, stops there
    _race_case(attempt, below * (1 + 5e-9), CURVE)
    _race_case(attempt, min(fair), CURVE)                  # a level reached early
    accs = _curve(CURVE)
    last = next(i + 1 for i, a in enumerate(accs) if a >= max(fair))
    _race_case(attempt, max(fair), last)                   # reached at the very last update allowed: not None
    _race_case(attempt, before / 2, CURVE)                 # met before training: still measured after update 1 on
    return ("7 races agree with the course's (same seeds, a model with Dropout): a target the untrained model already "
            "meets (the count starts after the first update), two targets hit exactly (at least "
            "counts; the accuracy an integer count over 300, not a float32 mean), one 5e-9 above a level hit exactly "
            "(not reached there), one reached early, one reached at the last update allowed, one never reached; measured in eval "
            "mode without a graph, trained in train mode and left in it, and the number of updates made stops at the "
            "target or at max_updates.")


# --- examples_processed -------------------------------------------------------------------------------------

def examples_after(updates: int, N: int, B: int, drop_last: bool) -> int:
    """The oracle: the batch sizes a DataLoader yields each epoch (engine.arithmetic), epoch after epoch."""
    sizes = batch_sizes(N, B, drop_last)
    if not sizes:                 # drop_last with B > N: no batch at all, so no update can have been made
        return 0
    epochs, rest = divmod(updates, len(sizes))
    return epochs * sum(sizes) + sum(sizes[:rest])


def _examples_case(attempt: Attempt, updates: int, N: int, B: int, drop_last: bool) -> None:
    got = need_int(attempt.call(f"updates={updates}, N={N}, B={B}, drop_last={drop_last}", updates, N, B, drop_last))
    want = examples_after(updates, N, B, drop_last)
    if got == want:
        return
    sizes = batch_sizes(N, B, drop_last)
    if not sizes:
        raise Fail(f"your function returned {got:,}; with drop_last=True and B larger than N an epoch has no batch, "
                   "so no update was made and no example processed: 0.",
                   "An epoch with no batch cannot be divided into: there is nothing to count.")
    epochs, rest = divmod(updates, len(sizes))
    if got == updates * B:
        hint = "Not every batch holds B examples: each epoch's last batch may be smaller."
    elif drop_last and got == examples_after(updates, N, B, False):
        hint = "With drop_last=True the partial batch is never trained on."
    else:
        hint = ""               # no one slip fits this count: no hint
    last = f", the last of {sizes[-1]}" if sizes[-1] != B else ""
    raise Fail(f"your function returned {got:,}, but {updates} updates are {epochs} whole epoch{'s' * (epochs != 1)} "
               f"of {len(sizes)} batch{'es' * (len(sizes) != 1)} ({sum(sizes):,} examples each{last}) and {rest} more batch{'es' * (rest != 1)}"
               f": {want:,} examples.", hint)


def check_examples_processed(attempt: Attempt) -> str:
    """Edge cases, then hypothesis; the oracle counts a DataLoader's batch sizes epoch by epoch."""
    edge = [(19, 600, 32, False), (20, 600, 64, False), (10, 600, 64, False), (25, 600, 64, True), (0, 100, 8, False),
            (3, 5, 8, False), (7, 10, 3, True), (50, 300, 300, False), (0, 5, 8, True)]
    for case in edge:
        _examples_case(attempt, *case)
    got = need_int(attempt.call("updates=3, N=10, B=4, drop_last not given", 3, 10, 4))
    if got != examples_after(3, 10, 4, False):
        raise Fail(f"called without drop_last, your function returned {got}; drop_last defaults to False (the partial "
                   f"batch is trained on), which gives {examples_after(3, 10, 4, False)}.",
                   "Keep the stub's signature: `drop_last=False`.")
    from hypothesis import strategies as st
    cases = st.tuples(st.integers(1, 3000), st.booleans()).flatmap(
        lambda nd: st.tuples(st.integers(0, 2000), st.just(nd[0]), st.integers(1, 2 * nd[0]), st.just(nd[1]))).map(
        lambda c: (0, *c[1:]) if c[3] and c[2] > c[1] else c)    # B > N too; with drop_last no batch, so no update
    tried = search(cases, lambda case: _examples_case(attempt, *case), examples=150)
    return (f"{len(edge) + tried + 1} cases agree with a DataLoader's batch sizes, epoch after epoch: a partial last "
            "batch, drop_last (False when not given; B larger than N), an update count inside an epoch and across "
            "several, zero updates.")


def exercises() -> list[Exercise]:
    """Chapter 8."""
    return [
        Exercise("race_to_target", "08", "the arena's measuring loop",
                 "race_to_target(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates) "
                 "-> int | None", check_race_to_target, arity=(7,), time_limit=30.0,
                 oracle="the same race on a copy; a step hook counts the updates"),
        Exercise("examples_processed", "08", "examples processed after some updates",
                 "examples_processed(updates, N, B, drop_last=False) -> int", check_examples_processed, arity=(4,),
                 oracle="a DataLoader's batch sizes (course_utils.engine.arithmetic.batch_sizes), epoch after epoch"),
    ]
