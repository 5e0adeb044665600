"""Counter-examples for the statement -> check table of the exercises of chapters 4.3 to 8 (issue 40 item 1).

Same shape as tests/exercise_rule_counterexamples.py, which merges these into its COUNTER: each breaks exactly the one
sentence (or part of it) its rule names and is otherwise the course's own solution.
"""
from __future__ import annotations

import copy
import torch
from torch import nn

from course_utils.exercises.solutions import SOLUTIONS

S = {name: functions[0] for name, functions in SOLUTIONS.items()}


# --- rank_metrics -------------------------------------------------------------------------------------------

def _rank_padded(losses, correct, n):
    """Every entry counted, the padding copies too."""
    count = sum(len(l) for l in losses)
    return float(torch.cat(losses).double().sum()) / count, int(torch.cat(correct).sum()) / count


def _rank_first_n(losses, correct, n):
    """The first n entries rank after rank taken as the n examples."""
    return float(torch.cat(losses).double()[:n].mean()), int(torch.cat(correct)[:n].sum()) / n


def _rank_fewer(losses, correct, n):
    """Right, except that a rank holding only copies is treated as holding real ones (n < world_size breaks it)."""
    if n < len(losses):
        return _rank_padded(losses, correct, n)
    return S["rank_metrics"](losses, correct, n)


def _rank_float32_accuracy(losses, correct, n):
    loss, acc = S["rank_metrics"](losses, correct, n)
    return loss, float(torch.tensor(acc, dtype=torch.float32))


def _rank_in_place(losses, correct, n):
    got = S["rank_metrics"](losses, correct, n)
    losses[0].mul_(1.0)
    correct[-1].zero_()
    return got


# --- fixed_loop ---------------------------------------------------------------------------------------------

def _loop(model, optimizer, scheduler, train_loader, val_loader, epochs, *, zero_grad=True, lr_scale=1.0,
          validate="each", scheduler_per_batch=False, skip_last_batch=False, stop_early=False):
    best = float("inf")
    for epoch in range(epochs):
        model.train()
        for i, (xb, yb) in enumerate(train_loader):
            if skip_last_batch and i == len(train_loader) - 1:
                continue
            if zero_grad:
                optimizer.zero_grad()
            (lr_scale * nn.functional.cross_entropy(model(xb), yb)).backward()
            optimizer.step()
            if scheduler_per_batch:
                scheduler.step()
        if not scheduler_per_batch:
            scheduler.step()
        if validate == "each" or (validate == "last" and epoch == epochs - 1):
            model.eval()
            with torch.no_grad():
                for _ in range(1 if validate == "each" else epochs):     # as many passes in total, all at the end
                    loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
            model.train()
            if stop_early and loss > best:        # early stopping with patience 1: the caller's decision, taken here
                break
            best = min(best, loss)


# --- accumulate_epoch ---------------------------------------------------------------------------------------

def _accumulate(model, loader, loss_fn, optimizer, K, *, weight="share", flush=True, big_k=True, returned=None,
                train=True):
    sizes = [len(t) for _, t in loader]
    if not big_k and K > len(sizes):
        K = len(sizes) - 1 or 1                   # an epoch shorter than K: windows made smaller
    updates = 0
    if train:
        model.train()
    optimizer.zero_grad()
    for i, (inputs, targets) in enumerate(loader):
        start = i - i % K
        in_window = sum(sizes[start:start + K])
        w = {"share": len(targets) / in_window, "mean_of_means": 1 / K,
             "nominal": len(targets) / (K * sizes[0])}[weight]
        (loss_fn(model(inputs), targets) * w).backward()
        if (i + 1) % K == 0 or (flush and i + 1 == len(sizes)):
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return returned(updates) if returned else updates


# --- lr_range_test ------------------------------------------------------------------------------------------

def _range(model, loader, loss_fn, optimizer, start_lr, end_lr, *, rate=None, groups="all", after=False,
           loss_after=False, returned=None):
    n = len(loader)
    lrs, losses = [], []
    for i, (inputs, targets) in enumerate(loader):
        lr = rate(i, n, start_lr, end_lr) if rate else start_lr * (end_lr / start_lr) ** (i / (n - 1))
        chosen = optimizer.param_groups if groups == "all" else optimizer.param_groups[:1]
        if not after:
            for group in chosen:
                group["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        if after:
            for group in chosen:
                group["lr"] = lr
        if loss_after:
            with torch.no_grad():
                loss = loss_fn(model(inputs), targets)
        lrs.append(lr)
        losses.append(loss.item())
    return returned(lrs, losses) if returned else (lrs, losses)


# --- snapshot -----------------------------------------------------------------------------------------------

def _snap_params_only(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _snap_with_unsaved(model):
    snap = S["snapshot"](model)
    snap.update({k: v.clone() for k, v in model.named_buffers()})
    return snap


def _snap_train_mode(model):
    snap = S["snapshot"](model)
    model.train()
    return snap


def _snap_touches_weights(model):
    snap = S["snapshot"](model)
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    return snap


def _snap_grad_mode(model):
    snap = S["snapshot"](model)
    torch.set_grad_enabled(True)
    return snap


# --- checkpoint_pair ----------------------------------------------------------------------------------------

def _save_without_rng(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": epoch}, path)


def _load_without_rng(path, model, optimizer, scheduler):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state["epoch"] + 1


def _load_into_new(path, model, optimizer, scheduler):
    """Restores into copies built inside the function: the objects training goes on with stay fresh."""
    state = torch.load(path)
    new_model = copy.deepcopy(model)
    new_model.load_state_dict(state["model"])
    torch.set_rng_state(state["rng"])
    return state["epoch"] + 1


def _load_same_epoch(path, model, optimizer, scheduler):
    return SOLUTIONS["checkpoint_pair"][1](path, model, optimizer, scheduler) - 1


def _load_without_scheduler(path, model, optimizer, scheduler):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    return state["epoch"] + 1


# --- token_window_losses ------------------------------------------------------------------------------------

def _tokens_bool_only(token_losses, masks):
    token_losses, masks = list(token_losses), list(masks)
    total = sum(int(m.sum()) for m in masks)
    if total == 0:
        raise ValueError("no real token")
    return [loss[m].sum() / total for loss, m in zip(token_losses, masks)]     # an int mask indexes, not masks


def _tokens_walk_twice(token_losses, masks):
    total = sum(int(m.sum()) for m in masks)
    if total == 0:
        raise ValueError("no real token")
    return [torch.where(m.bool(), loss, torch.zeros_like(loss)).sum() / total for loss, m in zip(token_losses, masks)]


def _tokens_per_micro_mean(token_losses, masks):
    token_losses, masks = list(token_losses), [m.bool() for m in masks]
    if sum(int(m.sum()) for m in masks) == 0:
        raise ValueError("no real token")
    K = len(masks)
    return [torch.where(m, l, torch.zeros_like(l)).sum() / max(1, int(m.sum())) / K for l, m in zip(token_losses, masks)]


def _tokens_detached(token_losses, masks):
    return [loss.detach() for loss in S["token_window_losses"](token_losses, masks)]


def _tokens_plain_zero(token_losses, masks):
    token_losses, masks = list(token_losses), [m.bool() for m in masks]
    got = S["token_window_losses"](token_losses, masks)
    return [g if m.any() else torch.tensor(0.0) for g, m in zip(got, masks)]


def _tokens_no_raise(token_losses, masks):
    token_losses, masks = list(token_losses), [m.bool() for m in masks]
    total = max(1, sum(int(m.sum()) for m in masks))
    return [torch.where(m, l, torch.zeros_like(l)).sum() / total for l, m in zip(token_losses, masks)]


def _tokens_in_place(token_losses, masks):
    token_losses, masks = list(token_losses), list(masks)
    got = S["token_window_losses"](token_losses, masks)
    for loss, m in zip(token_losses, masks):
        loss.data.mul_(m.to(loss.dtype))            # zero the padding in place
    return got


# --- race_to_target -----------------------------------------------------------------------------------------

def _race(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates, *, one_epoch=False,
          measure_mode="eval", graph=False, back_to_train=True, accuracy="count", ge=True, from_one=True,
          stop=True, budget=True, returned=None):
    updates, found = 0, None
    while updates < max_updates or not budget:
        for inputs, targets in train_loader:
            model.train() if back_to_train or updates == 0 else None
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
            updates += 1
            if measure_mode == "eval":
                model.eval()
            with torch.set_grad_enabled(graph):
                hits = model(val_inputs).argmax(dim=1) == val_targets
                acc = hits.float().mean().item() if accuracy == "float32" else int(hits.sum()) / len(val_targets)
                acc = acc * (1 - 1e-8) if accuracy == "low" else acc      # off the exact fraction by 1e-8
            if back_to_train:
                model.train()
            reached = acc >= target if ge else acc > target
            if reached and found is None:
                found = updates if from_one else updates - 1
                if stop:
                    return returned(found) if returned else found
            if updates == max_updates and budget:
                return returned(found) if returned else found
            if not budget and updates == max_updates + 1:
                return found
        if one_epoch:
            return found
    return found


COUNTER_MORE: dict[str, dict[str, object]] = {
    "rank_metrics": {
        "floats": lambda *a: tuple(torch.tensor(v) for v in S["rank_metrics"](*a)),
        "padding": _rank_padded,
        "layout": _rank_first_n,
        "fewer": _rank_fewer,
        "loss_tolerance": lambda *a: (S["rank_metrics"](*a)[0] * (1 + 1e-4), S["rank_metrics"](*a)[1]),
        "accuracy_rule": _rank_float32_accuracy,
        "untouched": _rank_in_place,
    },
    "fixed_loop": {
        "nothing_else": lambda *a: _loop(*a, lr_scale=0.5),
        "every_batch": lambda *a: _loop(*a, skip_last_batch=True),
        "epoch_schedule": lambda *a: _loop(*a, scheduler_per_batch=True),
        "validate_each": lambda *a: _loop(*a, validate="last"),
        "doctor": lambda *a: _loop(*a, zero_grad=False),
        "all_epochs": lambda *a: _loop(*a, stop_early=True),
    },
    "accumulate_epoch": {
        "big_batch": lambda *a: _accumulate(*a, weight="mean_of_means"),
        "flush": lambda *a: _accumulate(*a, flush=False),
        "real_size": lambda *a: _accumulate(*a, weight="nominal"),
        "large_k": lambda *a: _accumulate(*a, big_k=False),
        "train_mode": lambda *a: _accumulate(*a, train=False),
        "count": lambda *a: _accumulate(*a, returned=lambda u: u + 1),
        "int": lambda *a: _accumulate(*a, returned=float),
    },
    "lr_range_test": {
        "one_pass": lambda m, loader, *a: _range(m, list(loader)[:-1], *a, rate=lambda i, n, s, e: s * (e / s) ** (
            i / n)),
        "ratio": lambda *a: _range(*a, rate=lambda i, n, s, e: s + (e - s) * i / (n - 1)),
        "ends": lambda *a: _range(*a, rate=lambda i, n, s, e: s * (e / s) ** (i / n)),
        "groups": lambda *a: _range(*a, groups="first"),
        "tuple": lambda *a: _range(*a, returned=lambda lrs, losses: {"lrs": lrs, "losses": losses}),
        "lists": lambda *a: _range(*a, returned=lambda lrs, losses: (lrs, torch.tensor(losses).sum().item())),
        "before": lambda *a: _range(*a, loss_after=True),
        "really_used": lambda *a: _range(*a, after=True),
    },
    "snapshot": {
        "every_entry": _snap_params_only,
        "no_other": _snap_with_unsaved,
        "later_training": lambda model: model.state_dict(),
        "detached": lambda model: {k: v * 1 if v.requires_grad else v.detach().clone()
                                   for k, v in model.state_dict(keep_vars=True).items()},
        "mode": _snap_train_mode,
        "weights": _snap_touches_weights,
        "grad_mode": _snap_grad_mode,
        "dtype": lambda model: {k: v.float() for k, v in S["snapshot"](model).items()},
        "shape": lambda model: {k: v.reshape(-1) for k, v in S["snapshot"](model).items()},
    },
    "checkpoint_pair": {
        "next_epoch": (SOLUTIONS["checkpoint_pair"][0], _load_same_epoch),
        "bit_for_bit": (SOLUTIONS["checkpoint_pair"][0], _load_without_scheduler),
        "given_objects": (SOLUTIONS["checkpoint_pair"][0], _load_into_new),
        "rng": (_save_without_rng, _load_without_rng),
        "no_mode_change": (SOLUTIONS["checkpoint_pair"][0],
                           lambda path, model, *rest: (SOLUTIONS["checkpoint_pair"][1](path, model, *rest), model.eval())[0]),
    },
    "token_window_losses": {
        "int_masks": _tokens_bool_only,
        "generators": _tokens_walk_twice,
        "list": lambda t, m: torch.stack(S["token_window_losses"](t, m)),
        "scalar": lambda t, m: [x.reshape(1) for x in S["token_window_losses"](t, m)],
        "value": _tokens_per_micro_mean,
        "gradients": _tokens_detached,
        "empty_micro": _tokens_plain_zero,
        "empty_window": _tokens_no_raise,
        "untouched": _tokens_in_place,
    },
    "race_to_target": {
        "epochs": lambda *a: _race(*a, one_epoch=True),
        "eval_mode": lambda *a: _race(*a, measure_mode="train"),
        "no_graph": lambda *a: _race(*a, graph=True),
        "back_to_train": lambda *a: _race(*a, back_to_train=False),
        "accuracy_rule": lambda *a: _race(*a, accuracy="float32"),
        "int": lambda *a: _race(*a, returned=lambda f: None if f is None else float(f)),
        "from_one": lambda *a: _race(*a, from_one=False),
        "at_least": lambda *a: _race(*a, ge=False),
        "stop": lambda *a: _race(*a, stop=False),
        "budget": lambda *a: _race(*a, budget=False),
    },
}



def _f32(value: float) -> float:
    return float(torch.tensor(value, dtype=torch.float32))


COUNTER_MORE["rank_metrics"].update({
    "accuracy_tolerance": lambda *a: (S["rank_metrics"](*a)[0], S["rank_metrics"](*a)[1] * (1 + 1e-8)),
})
COUNTER_MORE["race_to_target"]["accuracy_tolerance"] = lambda *a: _race(*a, accuracy="low")
COUNTER_MORE["evaluate"] = {
    "accuracy_rule": lambda *a: (lambda r: (r[0], _f32(r[1])))(S["evaluate"](*a)),
    "accuracy_tolerance": lambda *a: (lambda r: (r[0], r[1] * (1 + 1e-8)))(S["evaluate"](*a)),
}



def _dropout_rounded_p(x, p, training):
    """p rounded to one decimal before the draw."""
    q = round(p, 1)
    if not training:
        return x
    return torch.zeros_like(x) if q >= 1 else x * (torch.rand_like(x) >= q) / (1 - q)


def _sgd_by_autograd(W, b, x, t, lr):
    W, b = W.clone().requires_grad_(), b.clone().requires_grad_()
    ((W @ x + b - t) ** 2).mean().backward()
    return (W - lr * W.grad).detach(), (b - lr * b.grad).detach()


COUNTER_MORE["dropout"] = {
    "no_torch_dropout": lambda x, p, training: nn.functional.dropout(x, p, training),
    "p_as_given": _dropout_rounded_p,
}
COUNTER_MORE["sgd_step_by_hand"] = {"no_autograd_engine": _sgd_by_autograd}


__all__ = ["COUNTER_MORE"]
