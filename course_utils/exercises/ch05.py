"""Exercises of chapter 5: fix a bugged loop (the loop doctor checks it), and accumulate exactly (one big batch per window)."""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.engine.arithmetic import accumulation_window, batch_sizes
from course_utils.engine.data import spiral_splits
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.guards import Watch
from course_utils.exercises.words import Fail, need_int
from course_utils.engine.models import MLP


def _weights(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _close(a: list[torch.Tensor], b: list[torch.Tensor], rtol: float = 1e-5) -> bool:
    return len(a) == len(b) and all(torch.allclose(x, y, rtol=rtol, atol=1e-7) for x, y in zip(a, b))


# --- chapter 5: fix the loop --------------------------------------------------------------------------------

EPOCHS = 3


def _loop_setup():
    """Model (with dropout), Adam, an epoch-based StepLR, seeded loaders (validation draws no global random numbers)."""
    splits = spiral_splits(300, 150, seed=0)
    torch.manual_seed(0)
    model = MLP(hidden=32, dropout=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    train = DataLoader(splits.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    val = DataLoader(splits.val, batch_size=64, generator=torch.Generator().manual_seed(1))
    return model, optimizer, scheduler, train, val


def healthy_loop(model, optimizer, scheduler, train_loader, val_loader, epochs) -> None:
    """The oracle's loop: train every batch, step the epoch schedule once per epoch, validate in eval mode, no graph."""
    for _ in range(epochs):
        model.train()
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        with torch.no_grad():
            for inputs, targets in val_loader:
                nn.functional.cross_entropy(model(inputs), targets).item()


def check_fixed_loop(attempt: Attempt) -> str:
    """The loop doctor names every silent bug it sees; counts and the final weights are compared with a healthy loop."""
    from course_utils.doctor import LoopDoctor

    model, optimizer, scheduler, train, val = _loop_setup()
    updates, evaluations = [0], []      # evaluations: the update count at each forward pass in eval mode
    optimizer.register_step_post_hook(lambda *_: updates.__setitem__(0, updates[0] + 1))
    model.register_forward_hook(lambda module, *_: None if module.training else evaluations.append(updates[0]))
    what = (f"{EPOCHS} epochs of 10 batches on the spiral, Adam, StepLR(step_size=2) stepped per epoch, a model with "
            "Dropout, validation on 150 examples")
    watch = Watch(model)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        try:
            with LoopDoctor(model, optimizer, scheduler, train_data=train, val_data=val) as doctor:
                attempt.call(what, model, optimizer, scheduler, train, val, EPOCHS)
        finally:
            watch.close()
    findings = doctor.report().findings
    if findings:
        listed = "\n  ".join(f"- {f.title}: {f.evidence}" for f in findings)
        raise Fail(f"the loop doctor still sees {len(findings)} silent bug{'s' * (len(findings) > 1)}:\n  {listed}",
                   (f"First one: {findings[0].fix}" if len(findings) > 1 else findings[0].fix))
    planned = EPOCHS * len(train)
    if updates[0] != planned:
        raise Fail(f"your loop made {updates[0]} updates; {EPOCHS} epochs of {len(train)} batches make {planned}.",
                   "Every training batch ends with one optimizer step.")
    if scheduler.last_epoch != EPOCHS:
        raise Fail(f"the scheduler was stepped {scheduler.last_epoch} times; an epoch schedule over {EPOCHS} epochs "
                   f"is stepped {EPOCHS} times.", "StepLR counts epochs.")
    ends = [len(train) * (e + 1) for e in range(EPOCHS)]
    missed = [e for e, end in enumerate(ends) if end not in evaluations]
    if missed:
        ran = sorted(set(evaluations))
        when = ("no validation ran at all" if not ran else "validation ran only after update" + "s" * (len(ran) > 1)
                + " " + ", ".join(map(str, ran)))
        raise Fail(f"{when}; validation should run after every epoch (after updates "
                   f"{', '.join(map(str, ends))}): epoch {missed[0]} ended without one.",
                   "Keep the validation inside the epoch loop, after each epoch's training.")
    twin, twin_opt, twin_sched, twin_train, twin_val = _loop_setup()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        healthy_loop(twin, twin_opt, twin_sched, twin_train, twin_val, EPOCHS)
    if not _close(_weights(model), _weights(twin), rtol=1e-4):
        in_eval = sum(1 for f in watch.forwards if f.grad and not f.training)
        hint = (f"{in_eval} training forward passes ran in eval mode: training after validation must switch the "
                "model back with model.train()." if in_eval else "")   # nothing else singles out a cause
        raise Fail("the doctor sees no bug, but your final weights differ from the healthy loop's (same seeds, same "
                   "data): your loop trains differently.", hint)
    _rising_validation_case(attempt)
    return (f"the loop doctor found no silent bug in {EPOCHS} epochs; {planned} updates, {EPOCHS} scheduler steps, "
            "validation every epoch, and the final weights equal the healthy loop's; with a validation loss that "
            f"rises every epoch, still all {RISING_EPOCHS} epochs trained.")


RISING_EPOCHS = 6


def _rising_validation_case(attempt: Attempt) -> None:
    """The same setup, validated on the training examples with every label moved to the next class: the better the
    model learns, the higher that loss (it rises after each of the first 6 epochs, measured). A loop that stops when
    validation stops improving trains fewer epochs than it was asked to."""
    model, optimizer, scheduler, train, _ = _loop_setup()
    inputs, targets = train.dataset.tensors
    rising = DataLoader(TensorDataset(inputs, (targets + 1) % (int(targets.max()) + 1)), batch_size=64)
    updates = [0]
    optimizer.register_step_post_hook(lambda *_: updates.__setitem__(0, updates[0] + 1))
    what = (f"{RISING_EPOCHS} epochs, validated on the training examples with wrong labels: the validation loss "
            "rises every epoch")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        attempt.call(what, model, optimizer, scheduler, train, rising, RISING_EPOCHS)
    planned = RISING_EPOCHS * len(train)
    if updates[0] != planned:
        raise Fail(f"with a validation loss that rises every epoch your loop made {updates[0]} updates; "
                   f"{RISING_EPOCHS} epochs of {len(train)} batches make {planned}: it stopped early.",
                   "Train every one of the `epochs` epochs: when to stop is the caller's decision (chapter 6's "
                   "stop_check decides it from the losses), not this loop's.")


# --- chapter 5: accumulate_epoch ----------------------------------------------------------------------------

def _accumulation_case(attempt: Attempt, n: int, batch_size: int, K: int, seed: int, comes_in_eval: bool = False,
                       drop_last: bool = False) -> None:
    g = torch.Generator().manual_seed(seed)
    data = TensorDataset(torch.randn(n, 3, generator=g, dtype=torch.double), torch.randint(0, 2, (n,), generator=g))
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)).double().train(not comes_in_eval)
    optimizer = torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters()}], lr=0.5)
    start = _weights(model)
    sizes = batch_sizes(n, batch_size, drop_last)
    loader = DataLoader(data, batch_size=batch_size, drop_last=drop_last)
    recorded: list[list[torch.Tensor]] = []
    optimizer.register_step_post_hook(lambda *_: recorded.append(_weights(model)))
    modes_seen: list[bool] = []
    model.register_forward_pre_hook(lambda module, _: modes_seen.append(module.training))
    what = (f"N={n}, B={batch_size}" + (", drop_last=True" if drop_last else "") + f" (batch sizes {sizes}), K={K}, "
            "an optimizer with two parameter groups" + (", the model left in eval mode" if comes_in_eval else ""))
    got = attempt.call(what, model, loader, nn.CrossEntropyLoss(), optimizer, K)
    if not all(modes_seen):
        raise Fail(f"{modes_seen.count(False)} of your {len(modes_seen)} training forwards ran in eval mode: the model "
                   "came in eval mode, as a validation leaves it, and the epoch never switched it back (here no layer "
                   "cares; with Dropout or BatchNorm the epoch would train a different model).",
                   "Call model.train() at the start of the epoch.")
    windows = sorted({tuple(accumulation_window(i, len(sizes), K)) for i in range(len(sizes))})
    if len(recorded) != len(windows):
        if len(recorded) == len(sizes) // K:
            hint = "The epoch's last, short window must be flushed: step at the end of the epoch too."
        elif len(recorded) == len(sizes) and K > 1:
            hint = "Step once per window of K micro-batches, not after every batch."
        else:
            hint = ""           # no one reading fits the count: no hint
        made = f"{len(recorded)} update{'s' * (len(recorded) != 1)}"
        listed = ", ".join(str([sizes[i] for i in w]) for w in windows)
        raise Fail(f"your loop made {made}; {len(sizes)} micro-batches in windows of K={K} make {len(windows)}: "
                   f"{listed}.", hint)
    returned = need_int(got)
    if returned != len(recorded):
        raise Fail(f"your function returned {returned}, but it made {len(recorded)} updates.",
                   "Return the number of optimizer steps.")
    weights, xs, ys = start, *data.tensors
    offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    previous: tuple[list[torch.Tensor], list] = ([], [])
    for u, window in enumerate(windows):
        lo, hi = offsets[window[0]], offsets[window[-1] + 1]
        big = [(xs[lo:hi], ys[lo:hi], 1.0)]
        want = _step(weights, _window_grads(model, weights, big))
        if _close(recorded[u], want):
            previous, weights = (weights, big), want
            continue
        parts = [(xs[offsets[i]:offsets[i + 1]], ys[offsets[i]:offsets[i + 1]]) for i in window]
        alternatives = {
            "each micro-batch's loss divided by K": [(x, y, 1 / K) for x, y in parts],
            "each loss divided by the number of micro-batches in the window": [(x, y, 1 / len(parts)) for x, y in parts],
            "the losses summed without dividing": [(x, y, 1.0) for x, y in parts],
            f"each loss weighted by its size over K times the batch size ({K * batch_size}), as if every window "
            "were full": [(x, y, len(y) / (K * batch_size)) for x, y in parts],
        }
        named = next((k for k, terms in alternatives.items()
                      if _close(recorded[u], _step(weights, _window_grads(model, weights, terms)))), "")
        if u > 0 and not named:
            stale = _window_grads(model, *previous)     # the last window's gradients, left in .grad
            leaked = _step(weights, [a + b for a, b in zip(_window_grads(model, weights, big), stale)])
            if _close(recorded[u], leaked):
                raise Fail(f"update {u + 1} also applied the gradients of window {u}: they were still in .grad.",
                           "backward() adds to .grad: clear it after each update.")
        sizes_in = [sizes[i] for i in window]
        if not named and len(parts) > 1:
            last_x, last_y = parts[-1]
            if any(_close(recorded[u], _step(weights, _window_grads(model, weights, [(last_x, last_y, w)])))
                   for w in {len(last_y) / sum(sizes_in), 1.0, 1 / K, 1 / len(parts)}):
                earlier = (f"micro-batch {window[0]}'s gradient was" if len(parts) == 2 else
                           f"the gradients of micro-batches {window[0]} to {window[-2]} were")
                raise Fail(f"update {u + 1} applied only the last micro-batch of its window (micro-batch {window[-1]}): "
                           f"{earlier} gone by the step.",
                           "zero_grad() empties .grad: call it once per update (after the step), not before every "
                           "micro-batch's backward().")
        span = None if named else _covered(model, weights, recorded[u], xs, ys, offsets, window[0], len(sizes))
        if span is not None and span != (window[0], window[-1]):
            raise Fail(f"update {u + 1} applied micro-batches {span[0]} to {span[1]} (batch sizes "
                       f"{sizes[span[0]:span[1] + 1]}); its window is micro-batches {window[0]} to {window[-1]} "
                       f"({sizes_in}).", "Step after micro-batch i when (i + 1) % K == 0, and after the last one.")
        raise Fail(f"update {u + 1} (window of batch sizes {sizes_in}) differs from one big batch of the same "
                   f"{sum(sizes_in)} examples" + (f": yours has {named}." if named else "."),
                   "Weight each micro-batch's mean loss by its share of the window's examples; then the window "
                   "equals one big batch, a short window too." if named else "")


def _covered(model, weights, update, xs, ys, offsets, first: int, count: int) -> tuple[int, int] | None:
    """Which run of micro-batches from `first`, taken as one big batch, gives this update (None if none does)."""
    for last in range(first, min(count, first + 8)):
        lo, hi = offsets[first], offsets[last + 1]
        if _close(update, _step(weights, _window_grads(model, weights, [(xs[lo:hi], ys[lo:hi], 1.0)]))):
            return first, last
    return None


def _window_grads(model: nn.Module, at: list[torch.Tensor], terms) -> list[torch.Tensor]:
    """The gradient, at weights `at`, of sum(weight * mean cross-entropy of (x, y)) over `terms`."""
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for p, w in zip(twin.parameters(), at):
            p.copy_(w)
    twin.zero_grad()
    sum(w * nn.functional.cross_entropy(twin(x), y) for x, y, w in terms).backward()
    return [p.grad.clone() for p in twin.parameters()]


def _step(weights: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """One SGD step at the check's learning rate, 0.5."""
    return [w - 0.5 * g for w, g in zip(weights, grads)]


def check_accumulate_epoch(attempt: Attempt) -> str:
    """The oracle: every update compared with one SGD step on the window's examples as one big batch."""
    for n, b, k, seed in ((10, 4, 2, 0), (22, 4, 4, 1), (12, 4, 3, 2), (8, 4, 5, 3), (9, 2, 1, 4), (37, 5, 3, 5)):
        _accumulation_case(attempt, n, b, k, seed)
    _accumulation_case(attempt, 10, 4, 2, 6, comes_in_eval=True)
    _accumulation_case(attempt, 10, 4, 2, 7, drop_last=True)
    _accumulation_case(attempt, 18, 4, 3, 8, drop_last=True)
    return ("9 epochs (a partial last batch inside a short last window, K that divides and does not, K larger than "
            "the epoch, K = 1, a model left in eval mode, a loader that drops its last batch, two parameter groups): "
            "every update equals one step on a big batch of its window's examples, every forward in train mode, the "
            "short last window is flushed, and the count returned is the count made.")


def exercises() -> list[Exercise]:
    """Chapter 5."""
    return [
        Exercise("fixed_loop", "05", "fix a loop with silent bugs",
                 "fixed_loop(model, optimizer, scheduler, train_loader, val_loader, epochs) -> None", check_fixed_loop,
                 arity=(6,), time_limit=30.0, oracle="the loop doctor, and a healthy loop from the same seeds"),
        Exercise("accumulate_epoch", "05", "an accumulation loop equal to big batches",
                 "accumulate_epoch(model, loader, loss_fn, optimizer, K) -> int", check_accumulate_epoch, arity=(5,),
                 time_limit=20.0, oracle="one SGD step on each window's examples as one big batch"),
    ]
