"""Typical wrong solutions to every exercise, each with the words its verdict must contain (tests/test_exercises.py).

Each entry: (what the mistake is, the function(s), a phrase naming that specific problem in the verdict).
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from torch.utils.data import Dataset

from course_utils.exercises import solutions as S
from tests import exercise_rights as _rights


# --- chapter 0 ---------------------------------------------------------------------------------------------

def upe_no_flush(N, B, K, drop_last=False):
    return (N // B if drop_last else math.ceil(N / B)) // K


def upe_ignores_drop_last(N, B, K, drop_last=False):
    return math.ceil(math.ceil(N / B) / K)


def upe_ignores_k(N, B, K, drop_last=False):
    return N // B if drop_last else math.ceil(N / B)


def upe_float(N, B, K, drop_last=False):
    return N / B / K


def lw_over_k(sizes, K):
    return [1 / K] * len(sizes)


def lw_over_count(sizes, K):
    return [1 / len(sizes[i - i % K:i - i % K + K]) for i in range(len(sizes))]


def lw_first_size(sizes, K):
    return [s / (sizes[0] * len(sizes[i - i % K:i - i % K + K])) for i, s in enumerate(sizes)]


def lw_none(sizes, K):
    return None


# --- chapter 1 ---------------------------------------------------------------------------------------------

class SWLongByOne(S.SlidingWindows):
    def __len__(self):
        return len(self.series) - self.window + 1


class SWTargetInside(S.SlidingWindows):
    def __getitem__(self, i):
        return self.series[i:i + self.window], self.series[i + self.window - 1]


class SWList(S.SlidingWindows):
    def __getitem__(self, i):
        return self.series[i:i + self.window].tolist(), self.series[i + self.window].item()


class SWDict(S.SlidingWindows):
    def __getitem__(self, i):
        return {"x": self.series[i:i + self.window], "y": self.series[i + self.window]}


class FDTextOrder(Dataset):
    def __init__(self, folder):
        self.files = sorted(p for p in Path(folder).glob("*.pt") if p.stem.isdigit())

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        example = torch.load(self.files[i])
        return example["x"], example["y"]


class FDEager(Dataset):
    def __init__(self, folder):
        n = len([p for p in Path(folder).glob("*.pt") if p.stem.isdigit()])
        self.examples = [torch.load(Path(folder) / f"{i}.pt") for i in range(n)]

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]["x"], self.examples[i]["y"]


class FDCountsEverything(S.FolderDataset):
    def __init__(self, folder):
        super().__init__(folder)
        self.n = len(os.listdir(folder))


# --- chapter 2 ---------------------------------------------------------------------------------------------

def pc_left(batch):
    ids, mask, labels = S.pad_collate(batch)
    lengths = mask.sum(dim=1)
    return torch.stack([row.roll(int(ids.shape[1] - n)) for row, n in zip(ids, lengths)]), mask, labels


def pc_long_mask(batch):
    ids, mask, labels = S.pad_collate(batch)
    return ids, mask.long(), labels


def pc_inverted(batch):
    ids, mask, labels = S.pad_collate(batch)
    return ids, ~mask, labels


def pc_time_first(batch):
    ids = torch.nn.utils.rnn.pad_sequence([t for t, _ in batch])
    return ids, ids != 0, torch.tensor([y for _, y in batch])


def pc_labels_list(batch):
    ids, mask, _ = S.pad_collate(batch)
    return ids, mask, [y for _, y in batch]


def cw_per_class(labels):
    return 1.0 / torch.bincount(labels).double()


def cw_counts(labels):
    return torch.bincount(labels)[labels].double()


def cw_uniform(labels):
    return torch.full((len(labels),), 1 / len(labels))


def si_contiguous(n, world_size, rank):
    per = math.ceil(n / world_size)
    return list(range(rank * per, min(n, (rank + 1) * per)))


def si_no_padding(n, world_size, rank):
    return list(range(n))[rank::world_size]


def si_pad_last(n, world_size, rank):
    per = math.ceil(n / world_size)
    indices = list(range(n)) + [n - 1] * (per * world_size - n)
    return indices[rank::world_size]


# --- chapter 3 ---------------------------------------------------------------------------------------------

def ts_zero_after(model, inputs, targets, loss_fn, optimizer):      # fine in a loop that starts clean, not as a
    loss = loss_fn(model(inputs), targets)                              # step its caller may hand stale .grad
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def ts_no_zero_grad(model, inputs, targets, loss_fn, optimizer):
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def ts_no_step(model, inputs, targets, loss_fn, optimizer):
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    return loss.item()


def ts_tensor(model, inputs, targets, loss_fn, optimizer):
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


def ts_zero_grad_between(model, inputs, targets, loss_fn, optimizer):
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    return loss.item()


def ts_second_forward(model, inputs, targets, loss_fn, optimizer):
    optimizer.zero_grad()
    loss_fn(model(inputs), targets).backward()
    optimizer.step()
    return loss_fn(model(inputs), targets).item()


def adam_no_correction(param, grad, m, v, t, lr, betas, eps):
    b1, b2 = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad ** 2
    return param - lr * m / (v.sqrt() + eps), m, v


def adam_eps_inside(param, grad, m, v, t, lr, betas, eps):
    b1, b2 = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad ** 2
    return param - lr * (m / (1 - b1 ** t)) / (v / (1 - b2 ** t) + eps).sqrt(), m, v


def adam_unsquared(param, grad, m, v, t, lr, betas, eps):
    b1, b2 = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad
    return param - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).abs().sqrt() + eps), m, v


def adam_swapped(param, grad, m, v, t, lr, betas, eps):
    b1, b2 = betas
    m, v = b1 * grad + (1 - b1) * m, b2 * v + (1 - b2) * grad ** 2
    return param - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps), m, v


def adam_plus(param, grad, m, v, t, lr, betas, eps):
    new, m, v = S.adam_step(param, grad, m, v, t, lr, betas, eps)
    return 2 * param - new, m, v


def sgd_plus(W, b, x, t, lr):
    new_W, new_b = S.sgd_step_by_hand(W, b, x, t, lr)
    return 2 * W - new_W, 2 * b - new_b


def sgd_sum(W, b, x, t, lr):
    dy = 2 * (W @ x + b - t)
    return W - lr * torch.outer(dy, x), b - lr * dy


def sgd_no_two(W, b, x, t, lr):
    dy = (W @ x + b - t) / len(t)
    return W - lr * torch.outer(dy, x), b - lr * dy


def sgd_transposed(W, b, x, t, lr):
    dy = 2 * (W @ x + b - t) / len(t)
    return W - lr * torch.outer(x, dy), b - lr * dy


def sgd_no_bias(W, b, x, t, lr):
    new_W, _ = S.sgd_step_by_hand(W, b, x, t, lr)
    return new_W, b


# --- chapter 4 ---------------------------------------------------------------------------------------------

def ev_batch_means(model, loader, loss_fn):
    was = model.training
    model.eval()
    with torch.no_grad():
        means = [loss_fn(model(x), y).item() for x, y in loader]
        hits = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    model.train(was)
    return sum(means) / len(means), hits / len(loader.dataset)


def ev_no_eval(model, loader, loss_fn):
    total, hits, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            total += loss_fn(out, y).item() * len(y)
            hits += (out.argmax(1) == y).sum().item()
            n += len(y)
    return total / n, hits / n


def ev_no_grad_missing(model, loader, loss_fn):
    was = model.training
    model.eval()
    total, hits, n = 0.0, 0, 0
    for x, y in loader:
        out = model(x)
        total += loss_fn(out, y).item() * len(y)
        hits += (out.argmax(1) == y).sum().item()
        n += len(y)
    model.train(was)
    return total / n, hits / n


def ev_always_train(model, loader, loss_fn):
    result = S.evaluate(model, loader, loss_fn)
    model.train()
    return result


def ev_leaves_eval(model, loader, loss_fn):
    result = S.evaluate(model, loader, loss_fn)
    model.eval()
    return result


def ev_tensors(model, loader, loss_fn):
    loss, acc = S.evaluate(model, loader, loss_fn)
    return torch.tensor(loss), torch.tensor(acc)


def ev_percent(model, loader, loss_fn):
    loss, acc = S.evaluate(model, loader, loss_fn)
    return loss, 100 * acc


def ev_global_switch(model, loader, loss_fn):
    torch.set_grad_enabled(False)
    was = model.training
    model.eval()
    total, hits, n = 0.0, 0, 0
    for x, y in loader:
        out = model(x)
        total += loss_fn(out, y).item() * len(y)
        hits += (out.argmax(1) == y).sum().item()
        n += len(y)
    model.train(was)
    return total / n, hits / n


def do_no_scale(x, p, training):
    return x * (torch.rand_like(x) >= p) if training else x


def do_scale_down(x, p, training):
    return x * (torch.rand_like(x) >= p) * (1 - p) if training else x


def do_keep_p(x, p, training):
    return x * (torch.rand_like(x) < p) / (1 - p) if training and p > 0 else x


def do_always(x, p, training):
    return x * (torch.rand_like(x) >= p) / (1 - p)


def do_in_place(x, p, training):
    if training and p > 0:
        x.mul_(torch.rand_like(x) >= p).div_(1 - p)
    return x


def do_fixed_mask(x, p, training):
    if not training or p == 0:
        return x
    g = torch.Generator().manual_seed(0)
    return x * (torch.rand(x.shape, generator=g) >= p) / (1 - p)


def do_rows(x, p, training):
    if not training or p == 0:
        return x
    return x * (torch.rand(x.shape[0], 1) >= p) / (1 - p)


# --- chapter 5 ---------------------------------------------------------------------------------------------

def fl_monday(model, optimizer, scheduler, train_loader, val_loader, epochs):
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss)
        val_loss = sum(torch.nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
    return losses


def fl_nothing(model, optimizer, scheduler, train_loader, val_loader, epochs):
    return None


def fl_only_scheduler(model, optimizer, scheduler, train_loader, val_loader, epochs):
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        scheduler.step()
        val_loss = sum(torch.nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)


def fl_no_train_switch(model, optimizer, scheduler, train_loader, val_loader, epochs):
    for epoch in range(epochs):
        for xb, yb in train_loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        with torch.no_grad():
            sum(torch.nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)


def ae_over_k(model, loader, loss_fn, optimizer, K):
    updates = 0
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / K).backward()
        if (i + 1) % K == 0 or i + 1 == len(loader):
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return updates


def ae_no_flush(model, loader, loss_fn, optimizer, K):
    updates = 0
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / K).backward()
        if (i + 1) % K == 0:
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return updates


def ae_over_count(model, loader, loss_fn, optimizer, K):
    n, updates = len(loader), 0
    for i, (x, y) in enumerate(loader):
        in_window = min(K, n - (i - i % K))
        (loss_fn(model(x), y) / in_window).backward()
        if (i + 1) % K == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return updates


def ae_no_zero_grad(model, loader, loss_fn, optimizer, K):
    sizes, updates = [len(y) for _, y in loader], 0
    for i, (x, y) in enumerate(loader):
        start = i - i % K
        (loss_fn(model(x), y) * len(y) / sum(sizes[start:start + K])).backward()
        if (i + 1) % K == 0 or i + 1 == len(sizes):
            optimizer.step()
            updates += 1
    return updates


def ae_every_batch(model, loader, loss_fn, optimizer, K):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    return len(loader)


# --- chapter 6 ---------------------------------------------------------------------------------------------

def _sweep(model, loader, loss_fn, optimizer, lr_of, after=False, zero=True, as_tensor=False):
    n, lrs, losses = len(loader), [], []
    for i, (x, y) in enumerate(loader):
        lr = lr_of(i, n)
        if not after:
            optimizer.param_groups[0]["lr"] = lr
        if zero:
            optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if after:
            optimizer.param_groups[0]["lr"] = lr
        lrs.append(lr)
        losses.append(loss.detach() if as_tensor else loss.item())
    return lrs, losses


def lr_linear(model, loader, loss_fn, optimizer, start_lr, end_lr):
    return _sweep(model, loader, loss_fn, optimizer, lambda i, n: start_lr + (end_lr - start_lr) * i / (n - 1))


def lr_short(model, loader, loss_fn, optimizer, start_lr, end_lr):
    return _sweep(model, loader, loss_fn, optimizer, lambda i, n: start_lr * (end_lr / start_lr) ** (i / n))


def lr_after_step(model, loader, loss_fn, optimizer, start_lr, end_lr):
    return _sweep(model, loader, loss_fn, optimizer, lambda i, n: start_lr * (end_lr / start_lr) ** (i / (n - 1)),
                  after=True)


def lr_tensors(model, loader, loss_fn, optimizer, start_lr, end_lr):
    return _sweep(model, loader, loss_fn, optimizer, lambda i, n: start_lr * (end_lr / start_lr) ** (i / (n - 1)),
                  as_tensor=True)


def lr_no_zero_grad(model, loader, loss_fn, optimizer, start_lr, end_lr):
    return _sweep(model, loader, loss_fn, optimizer, lambda i, n: start_lr * (end_lr / start_lr) ** (i / (n - 1)),
                  zero=False)


# --- chapter 7 ---------------------------------------------------------------------------------------------

def save_weights_only(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "epoch": epoch}, path)


def load_weights_only(path, model, optimizer, scheduler):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    return state["epoch"] + 1


def save_no_rng(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": epoch}, path)


def load_no_rng(path, model, optimizer, scheduler):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state["epoch"] + 1


def load_no_scheduler(path, model, optimizer, scheduler):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    return state["epoch"] + 1


def load_same_epoch(path, model, optimizer, scheduler):
    return S.load_checkpoint(path, model, optimizer, scheduler) - 1


def save_nothing(path, model, optimizer, scheduler, epoch):
    return {"model": model.state_dict()}


def sc_ties_improve(losses, patience, min_delta=0.0):
    best, waited = math.inf, 0
    for check, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return check
        if loss <= best - min_delta:
            best, waited = loss, 0
        else:
            waited += 1
            if waited >= patience:
                return check
    return None


def sc_no_nan(losses, patience, min_delta=0.0):
    best, waited = math.inf, 0
    for check, loss in enumerate(losses, 1):
        if loss < best - min_delta:
            best, waited = loss, 0
        else:
            waited += 1
            if waited >= patience:
                return check
    return None


def sc_previous(losses, patience, min_delta=0.0):
    previous, waited = math.inf, 0
    for check, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return check
        waited = 0 if loss < previous - min_delta else waited + 1
        previous = loss
        if waited >= patience:
            return check
    return None


def sc_late(losses, patience, min_delta=0.0):
    best, waited = math.inf, 0
    for check, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            return check
        if loss < best - min_delta:
            best, waited = loss, 0
        else:
            waited += 1
            if waited > patience:
                return check
    return None


def sc_no_delta(losses, patience, min_delta=0.0):
    return S.stop_check(losses, patience, 0.0)


def sc_zero_based(losses, patience, min_delta=0.0):
    stop = S.stop_check(losses, patience, min_delta)
    return None if stop is None else stop - 1


def wc_from_zero(update, base_lr, warmup, total):
    if update < warmup:
        return base_lr * update / warmup
    return S.warmup_cosine_lr(update, base_lr, warmup, total)


def wc_whole_run(update, base_lr, warmup, total):
    if update < warmup:
        return base_lr * (update + 1) / warmup
    return base_lr * 0.5 * (1 + math.cos(math.pi * update / total))


def wc_rising(update, base_lr, warmup, total):
    if update < warmup:
        return base_lr * (update + 1) / warmup
    return base_lr * 0.5 * (1 - math.cos(math.pi * (update - warmup) / (total - warmup)))


def wc_tensor(update, base_lr, warmup, total):
    return torch.tensor(S.warmup_cosine_lr(update, base_lr, warmup, total))


def cg_per_tensor(parameters, max_norm):
    total = S.clip_gradients([p for p in parameters], float("inf"))
    for p in parameters:
        if p.grad is not None:
            norm = p.grad.norm().item()
            if norm > max_norm:
                p.grad.mul_(max_norm / norm)
    return total


def cg_after(parameters, max_norm):
    S.clip_gradients(parameters, max_norm)
    return S.clip_gradients(parameters, float("inf"))


def cg_always(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads)).item()
    for g in grads:
        g.mul_(max_norm / total)
    return total


def cg_tensor(parameters, max_norm):
    return torch.tensor(S.clip_gradients(parameters, max_norm))


# --- chapter 8 ---------------------------------------------------------------------------------------------

def _race(model, optimizer, loader, vx, vy, target, max_updates, strict=False, offset=0, train_mode=False,
          run_on=False):
    updates, hit = 0, None
    while updates < max_updates:
        for x, y in loader:
            model.train()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            updates += 1
            if not train_mode:
                model.eval()
            with torch.no_grad():
                acc = (model(vx).argmax(1) == vy).sum().item() / len(vy)
            model.train()
            reached = acc > target if strict else acc >= target
            if reached and hit is None:
                hit = updates - offset
                if not run_on:
                    return hit
            if updates == max_updates:
                return hit
    return hit


def rt_strict(*args):
    return _race(*args, strict=True)


def rt_from_zero(*args):
    return _race(*args, offset=1)


def rt_train_mode(*args):
    return _race(*args, train_mode=True)


def rt_runs_on(*args):
    return _race(*args, run_on=True)


def ep_times_b(updates, N, B, drop_last=False):
    return updates * B


def ep_ignores_drop_last(updates, N, B, drop_last=False):
    return S.examples_processed(updates, N, B, False)


def ep_float(updates, N, B, drop_last=False):
    return float(S.examples_processed(updates, N, B, drop_last))



def _ev_float32(model, loader, loss_fn):
    """The accuracy as a float32 mean over all examples: off the fraction by up to 6e-8 (the accuracy rule)."""
    loss, acc = S.evaluate(model, loader, loss_fn)
    return loss, float(torch.tensor(acc, dtype=torch.float32))

WRONG = {
    "updates_per_epoch": [("no flush", (upe_no_flush,), "flushes it"),
                          ("drop_last ignored", (upe_ignores_drop_last,), "drop_last=True throws away"),
                          ("K ignored", (upe_ignores_k,), "once per window of K"),
                          ("a float", (upe_float,), "not a whole number")],
    "loss_weights": [("1/K", (lw_over_k,), "1/K weights every micro-batch the same"),
                     ("1/micro-batches", (lw_over_count,), "number of micro-batches"),
                     ("first batch's size", (lw_first_size,), "should be"),
                     ("None", (lw_none,), "should return a list")],
    "SlidingWindows": [("len + 1", (SWLongByOne,), "len(dataset) is"),
                       ("target inside", (SWTargetInside,), "the window's own last value"),
                       ("lists", (SWList,), "not a tensor"),
                       ("a dict", (SWDict,), "not a pair")],
    "FolderDataset": [("text order", (FDTextOrder,), "sorted as text"),
                      ("eager", (FDEager,), "read every file up front"),
                      ("counts the README", (FDCountsEverything,), "the README.txt, the stats.pt and the 0.txt are not examples")],
    "pad_collate": [("left padding", (pc_left,), "Right padding"),
                    ("long mask", (pc_long_mask,), "it should be bool"),
                    ("inverted mask", (pc_inverted,), "True on the padding"),
                    ("time first", (pc_time_first,), "has shape"),
                    ("labels list", (pc_labels_list,), "a list ([1, 1, 1]), not a tensor")],
    "class_balanced_weights": [("per class", (cw_per_class,), "one per class"),
                               ("counts", (cw_counts,), "The more examples a class has"),
                               ("uniform", (cw_uniform,), "balanced is")],
    "shard_indices": [("contiguous", (si_contiguous,), "like cards"),
                      ("no padding", (si_no_padding,), "every rank should get"),
                      ("pads with the last", (si_pad_last,), "repeats the dataset's first indices")],
    "train_step": [("no zero_grad", (ts_no_zero_grad,), "leaked"),
                   ("zero_grad after the step", (ts_zero_after,), "your step added this batch's gradient to them"),
                   ("no step", (ts_no_step,), "did not change"),
                   ("a tensor", (ts_tensor,), "not a number"),
                   ("zero_grad between", (ts_zero_grad_between,), "did not change"),
                   ("loss after the update", (ts_second_forward,), "forward 2 times")],
    "adam_step": [("no bias correction", (adam_no_correction,), "no bias correction"),
                  ("eps inside", (adam_eps_inside,), "eps inside the square root"),
                  ("v of g", (adam_unsquared,), "not its square"),
                  ("m swapped", (adam_swapped,), "beta1 of the gradient"),
                  ("plus", (adam_plus,), "added instead of subtracted")],
    "sgd_step_by_hand": [("autograd", (_rights.sgd_autograd,), "ran autograd"),
                         ("plus", (sgd_plus,), "added instead of subtracted"),
                         ("sum", (sgd_sum,), "sum of squares"),
                         ("no 2", (sgd_no_two,), "factor 2"),
                         ("transposed", (sgd_transposed,), "W_new is"),
                         ("bias kept", (sgd_no_bias,), "b left unchanged")],
    "evaluate": [("mean of batch means", (ev_batch_means,), "the last batch holds 2 examples, not 4"),
                 ("float32 accuracy", (_ev_float32,), "rounded to float32"),
                 ("no eval()", (ev_no_eval,), "BatchNorm's running statistics changed"),
                 ("no no_grad", (ev_no_grad_missing,), "built an autograd graph"),
                 ("always train()", (ev_always_train,), "came in eval mode and your function left it in train mode"),
                 ("leaves eval", (ev_leaves_eval,), "came in train mode and your function left it in eval mode"),
                 ("tensors", (ev_tensors,), "not a number"),
                 ("percent", (ev_percent,), "a percentage"),
                 ("global switch", (ev_global_switch,), "still switched off")],
    "dropout": [("F.dropout", (_rights.do_torch,), "torch's own dropout"),
                ("no rescale", (do_no_scale,), "multiplied by 1;"),
                ("scaled by 1-p", (do_scale_down,), "multiplies them by 1/(1-p)"),
                ("keeps p", (do_keep_p,), "keeps a share p instead"),
                ("drops in eval", (do_always,), "must return x unchanged"),
                ("in place", (do_in_place,), "in place"),
                ("fixed mask", (do_fixed_mask,), "exactly the same values"),
                ("whole rows", (do_rows,), "dropped together")],
    "fixed_loop": [("the bugged loop", (fl_monday,), "Epoch schedule stepped every batch"),
                   ("nothing", (fl_nothing,), "made 0 updates"),
                   ("only the scheduler", (fl_only_scheduler,), "Evaluation without no_grad"),
                   ("no train() again", (fl_no_train_switch,), "train")],
    "accumulate_epoch": [("loss / K", (ae_over_k,), "divided by K"),
                         ("no flush", (ae_no_flush,), "must be flushed"),
                         ("loss / micro-batches", (ae_over_count,), "number of micro-batches"),
                         ("no zero_grad", (ae_no_zero_grad,), "still in .grad"),
                         ("every batch", (ae_every_batch,), "not after every batch")],
    "lr_range_test": [("linear", (lr_linear,), "equal ratios"),
                      ("never reaches end_lr", (lr_short,), "must use end_lr"),
                      ("lr after step", (lr_after_step,), "previous batch's lr"),
                      ("tensor losses", (lr_tensors,), "Python float"),
                      ("no zero_grad", (lr_no_zero_grad,), "never cleared the gradients")],
    "checkpoint_pair": [("weights only", (save_weights_only, load_weights_only), "the optimizer's state"),
                        ("no RNG", (save_no_rng, load_no_rng), "random number generator"),
                        ("no scheduler", (S.save_checkpoint, load_no_scheduler), "the scheduler's state"),
                        ("same epoch", (S.save_checkpoint, load_same_epoch), "must go on with epoch 2"),
                        ("no file", (save_nothing, S.load_checkpoint), "wrote no file")],
    "stop_check": [("ties improve", (sc_ties_improve,), "strictly better"),
                   ("NaN not handled", (sc_no_nan,), "NaN compares false"),
                   ("compares with the previous", (sc_previous,), "best so far"),
                   ("one late", (sc_late,), "as soon as"),
                   ("min_delta ignored", (sc_no_delta,), "by more than min_delta"),
                   ("0-based", (sc_zero_based,), "Checks are counted from 1")],
    "warmup_cosine_lr": [("warm-up from 0", (wc_from_zero,), "The first update already learns"),
                         ("cosine over the whole run", (wc_whole_run,), "The cosine starts when the warm-up ends"),
                         ("rising cosine", (wc_rising,), "half a cosine from base_lr down to 0"),
                         ("a tensor", (wc_tensor,), "not a number")],
    "clip_gradients": [("per tensor", (cg_per_tensor,), "*global* norm"),
                       ("norm after", (cg_after,), "norm after clipping"),
                       ("always scales", (cg_always,), "stay as they are"),
                       ("a tensor", (cg_tensor,), "not a number")],
    "race_to_target": [("strict >", (rt_strict,), "at least the target"),
                       ("float32 mean", (_rights.rt_inference_float32,), "in float32, below the target"),
                       ("counts from 0", (rt_from_zero,), "Count updates from 1"),
                       ("measures in train mode", (rt_train_mode,), "eval mode"),
                       ("runs on", (rt_runs_on,), "stops at the target")],
    "examples_processed": [("updates x B", (ep_times_b,), "Not every batch holds B"),
                           ("drop_last ignored", (ep_ignores_drop_last,), "never trained on"),
                           ("a float", (ep_float,), "not a whole number")],
}

from tests.exercise_ranks import WRONG_RANKS  # noqa: E402 - exercises 2.4 and 4.3

WRONG.update(WRONG_RANKS)
from tests.exercise_token_accum_cases import WRONGS as _TOKEN_WRONGS  # noqa: E402 (exercise 7.5, chapter 7)
WRONG["token_window_losses"] = _TOKEN_WRONGS
from tests import exercise_snapshot_cases as _snapshot  # noqa: E402 - exercise 5.3 lives in its own module

WRONG["snapshot"] = _snapshot.WRONG
