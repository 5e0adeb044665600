"""Chapter 6's exercise: the learning-rate range test, checked against the same sweep on a copy (an optimizer step
hook reads the rate each update really used)."""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.words import Fail, as_numbers, kind, need_tuple, number, pair, show, values_pair


# --- chapter 6: lr_range_test -------------------------------------------------------------------------------

def reference_range_test(model, loader, loss_fn, optimizer, start_lr, end_lr) -> tuple[list[float], list[float]]:
    """The oracle: batch i uses start_lr * (end_lr / start_lr) ** (i / (n - 1)); its loss is taken before its update."""
    n = len(loader)
    lrs, losses = [], []
    for i, (inputs, targets) in enumerate(loader):
        lr = start_lr * (end_lr / start_lr) ** (i / (n - 1)) if n > 1 else start_lr
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        lrs.append(lr)
        losses.append(loss.item())
    return lrs, losses


def _numbers(value: object, n: int, what: str) -> list[float]:
    listed = as_numbers(value)
    if listed is None or len(listed) != n:
        raise Fail(f"{what} should be a list of {n} numbers, one per batch; yours is {kind(value)} ({show(value)}).",
                   "Append a Python float (`.item()` for the loss) for every batch.")
    return [float(v) for v in listed]


class _Passes(DataLoader):
    """A DataLoader that counts how many times it is iterated."""

    passes = 0

    def __iter__(self):
        self.passes += 1
        return super().__iter__()


def _range_case(attempt: Attempt, batches: int, make_optimizer, name: str, start_lr: float, end_lr: float,
                last_batch: int = 16) -> None:
    data = spiral_splits(16 * (batches - 1) + last_batch, 1, seed=batches).train
    torch.manual_seed(batches)
    model = MLP(hidden=16)
    optimizer = make_optimizer(model.parameters())
    twin, twin_opt = copy.deepcopy((model, optimizer))
    spare = copy.deepcopy((model, optimizer))           # for the losses after each update (a common slip)
    unzeroed = copy.deepcopy((model, optimizer))        # for the losses of a sweep that never clears .grad
    used: list[float] = []
    groups: list[list[float]] = []
    def record(opt, *_) -> None:
        used.append(opt.param_groups[0]["lr"])
        groups.append([g["lr"] for g in opt.param_groups])
    optimizer.register_step_pre_hook(record)
    what = (f"{batches} batches of 16" + (f" (the last of {last_batch})" if last_batch != 16 else "")
            + f", {name}, start_lr={start_lr:g}, end_lr={end_lr:g}")
    loader = _Passes(data, batch_size=16)
    got = attempt.call(what, model, loader, nn.CrossEntropyLoss(), optimizer, start_lr, end_lr)
    if loader.passes > 1:
        raise Fail(f"your function went over the loader {loader.passes} times; the test is one pass (a shuffled "
                   "loader deals another order each time, and each pass loads the data again).",
                   "n is len(loader): no pass is needed to count the batches.")
    lrs, losses = need_tuple(got, 2, "your function", "lrs, losses")
    want_lrs, want_losses = reference_range_test(twin, DataLoader(data, batch_size=16), nn.CrossEntropyLoss(),
                                                 twin_opt, start_lr, end_lr)
    if len(used) != batches:
        raise Fail(f"your range test made {len(used)} optimizer steps; one pass over {batches} batches makes {batches}.",
                   "One update per batch, each with its own learning rate.")
    split = next((i for i, rates in enumerate(groups) if len(set(rates)) > 1), None)
    if split is not None:
        shown = ", ".join(f"group {g}: {number(r)}" for g, r in enumerate(groups[split]))
        raise Fail(f"batch {split} trained the optimizer's {len(groups[split])} parameter groups at different rates "
                   f"({shown}); the test sets one rate for the whole model.",
                   "Set the lr of every group: `for group in optimizer.param_groups: group['lr'] = lr`.")
    close = lambda a, b: all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b))  # noqa: E731 (float32 logspace too)
    if not close(used, want_lrs):
        linear = [start_lr + (end_lr - start_lr) * i / max(1, batches - 1) for i in range(batches)]
        short = [start_lr * (end_lr / start_lr) ** (i / batches) for i in range(batches)]
        examples = [start_lr * (end_lr / start_lr) ** (i / (len(data) - 1)) for i in range(batches)]
        if close(used, linear):
            hint = "The steps are equal ratios, not equal differences: the same factor from one batch to the next."
        elif close(used, short):
            hint = "The last batch must use end_lr itself."
        elif close(used, examples):
            hint = f"n is the number of batches, len(loader) = {batches}, not the number of examples ({len(data)})."
        elif batches > 2 and close(used, [start_lr * (end_lr / start_lr) ** (i / (batches - 2)) for i in range(batches)]):
            hint = (f"Your n is {batches - 1}, the full batches (len(dataset) // batch_size); the loader yields "
                    f"{batches}, the last one partial: n is len(loader).")
        elif close(used[1:], want_lrs[:-1]):
            hint = "Each step used the previous batch's lr: set the lr before optimizer.step(), not after."
        else:
            hint = ""           # no one slip fits these rates: no hint
        mine, right = values_pair(torch.tensor(used, dtype=torch.float64), torch.tensor(want_lrs, dtype=torch.float64))
        raise Fail(f"the optimizer stepped with the learning rates {mine}; the test uses {right}.", hint)
    lrs = _numbers(lrs, batches, "the lrs you returned")
    if not close(lrs, used):
        mine, right = values_pair(torch.tensor(lrs, dtype=torch.float64), torch.tensor(used, dtype=torch.float64))
        raise Fail(f"the lrs you returned, {mine}, are not the ones the optimizer used, {right}.",
                   "Record the lr each batch was trained with.")
    losses = _numbers(losses, batches, "the losses you returned")
    for i, (g, w) in enumerate(zip(losses, want_losses)):
        if abs(g - w) > 1e-5 * max(1.0, abs(w)):
            mine, right = pair(g, w)
            after = _losses_after(*spare, DataLoader(data, batch_size=16), want_lrs)
            if all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(losses, after)):
                raise Fail(f"the loss of batch {i} is {mine}, its loss after its own update; before the update, the "
                           f"loss backward() used, it is {right}.", "Record the loss you called backward() on.")
            stale = _losses_after(*unzeroed, DataLoader(data, batch_size=16), want_lrs, zero_grad=False)
            if all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(losses, stale)):
                raise Fail(f"the loss of batch {i} is {mine}; trained the same way it is {right}: your sweep never "
                           "cleared the gradients, so every update also applied all the earlier batches' gradients.",
                           "backward() adds to .grad: call optimizer.zero_grad() before each batch's backward().")
            raise Fail(f"the loss of batch {i} is {mine}; trained the same way it is {right} (the batch's "
                       "loss before its own update).")


def _losses_after(model, optimizer, loader, lrs: list[float], zero_grad: bool = True) -> list[float]:
    """Each batch's loss measured right after its own update (the same sweep otherwise); with zero_grad=False, each
    batch's loss before its update in a sweep that never clears the gradients."""
    found = []
    for lr, (inputs, targets) in zip(lrs, loader):
        for group in optimizer.param_groups:
            group["lr"] = lr
        if zero_grad:
            optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        if not zero_grad:
            found.append(loss.item())
            continue
        with torch.no_grad():
            found.append(nn.functional.cross_entropy(model(inputs), targets).item())
    return found


def check_lr_range_test(attempt: Attempt) -> str:
    """The oracle: the same sweep on a copy; a step hook records the lr each update really used."""
    _range_case(attempt, 12, lambda ps: torch.optim.SGD(ps, lr=0.1), "SGD", 1e-4, 1.0)
    _range_case(attempt, 2, lambda ps: torch.optim.SGD(ps, lr=0.1), "SGD", 0.01, 0.1)
    _range_case(attempt, 9, _adam_two_groups, "Adam with two parameter groups", 1e-5, 10.0)
    _range_case(attempt, 5, lambda ps: torch.optim.SGD(ps, lr=0.1), "SGD", 1e-3, 1.0, last_batch=5)
    _range_case(attempt, 10, lambda ps: torch.optim.SGD(ps, lr=0.1), "SGD", 1e-3, 1000.0)   # diverges: 1.1 -> 28
    return ("5 sweeps (12 batches with SGD, 2 batches, 9 with Adam over two parameter groups, 5 whose last batch is "
            "partial, 10 whose loss diverges, still trained to the last batch): the lr each "
            "update really used, in every group, grows in equal ratios from start_lr to end_lr, and the returned lrs "
            "and losses match the same sweep run by the course.")


def _adam_two_groups(parameters) -> torch.optim.Optimizer:
    """Adam with the biases in a group of their own (no weight decay), as real training code often builds it."""
    params = list(parameters)
    return torch.optim.Adam([{"params": [p for p in params if p.dim() > 1], "weight_decay": 1e-4},
                             {"params": [p for p in params if p.dim() <= 1], "lr": 0.05}], lr=0.1)


def exercises() -> list[Exercise]:
    """Chapter 6."""
    return [
        Exercise("lr_range_test", "06", "the learning-rate range test",
                 "lr_range_test(model, loader, loss_fn, optimizer, start_lr, end_lr) -> (lrs, losses)",
                 check_lr_range_test, arity=(6,), time_limit=20.0,
                 oracle="the same sweep on a copy; an optimizer step hook reads the lr used"),
    ]
