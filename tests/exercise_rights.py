"""Right solutions written differently from solutions.py: the checkers must not insist on one way of writing it."""
from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def upe_counted(N, B, K, drop_last=False):
    batches = len(DataLoader(range(N), batch_size=B, drop_last=drop_last))
    updates, pending = 0, 0
    for _ in range(batches):
        pending += 1
        if pending == K:
            updates, pending = updates + 1, 0
    return updates + (pending > 0)


def lw_numpy(sizes, K):
    sizes = np.asarray(sizes, dtype=float)
    out = np.empty_like(sizes)
    for start in range(0, len(sizes), K):
        out[start:start + K] = sizes[start:start + K] / sizes[start:start + K].sum()
    return torch.from_numpy(out)


class SWBounds(Dataset):
    def __init__(self, series, window):
        self.x = series.unfold(0, window, 1)[:-1]
        self.y = series[window:]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(f"index {i} out of range")
        return self.x[i], float(self.y[i])


class FDSortedNumerically(Dataset):
    def __init__(self, folder):
        self.files = sorted((p for p in Path(folder).glob("*.pt") if p.stem.isdigit()), key=lambda p: int(p.stem))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        d = torch.load(self.files[i], weights_only=True)
        return d["x"], int(d["y"])


def pc_pad_sequence(batch):
    seqs = [t for t, _ in batch]
    ids = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0)
    return ids, ids != 0, torch.LongTensor([y for _, y in batch])


def cw_counter_list(labels):
    counts = Counter(labels.tolist())
    weights = [1 / counts[y] for y in labels.tolist()]
    total = sum(weights)
    return [w / total for w in weights]


def si_torch(n, world_size, rank):
    return list(DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False))


def ts_clear_by_hand(model, inputs, targets, loss_fn, optimizer):
    model.train()
    for group in optimizer.param_groups:            # what zero_grad() does, by hand, before the backward
        for p in group["params"]:
            p.grad = None
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def adam_in_place(param, grad, m, v, t, lr, betas, eps):
    b1, b2 = betas
    m.mul_(b1).add_(grad, alpha=1 - b1)
    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    step = lr / (1 - b1 ** t)
    denom = (v.sqrt() / math.sqrt(1 - b2 ** t)).add_(eps)
    return param.addcdiv(m, denom, value=-step), m, v


def adam_torch(param, grad, m, v, t, lr, betas, eps):
    p = param.clone().requires_grad_()
    opt = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps)
    opt.state[p] = {"step": torch.tensor(float(t - 1)), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    p.grad = grad
    opt.step()
    return p.detach(), opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]


def sgd_autograd(W, b, x, t, lr):
    W, b = W.clone().requires_grad_(), b.clone().requires_grad_()
    loss = ((W @ x + b - t) ** 2).mean()
    gW, gb = torch.autograd.grad(loss, [W, b])
    return (W - lr * gW).detach(), (b - lr * gb).detach()


def ev_inference_sum(model, loader, loss_fn):
    was = {name: layer.training for name, layer in model.named_modules()}
    model.eval()
    total, hits = torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64)   # the accuracy rule
    n = 0
    with torch.inference_mode():
        for x, y in loader:
            out = model(x)
            total += torch.nn.functional.cross_entropy(out, y, reduction="sum")
            hits += (out.argmax(dim=1) == y).sum()
            n += len(y)             # what the loader yields (a sampler's part, or less with drop_last)
    for name, layer in model.named_modules():
        layer.training = was[name]
    return (total / n).item(), hits.item() / n


def do_bernoulli(x, p, training):
    if not training:
        return x.clone()
    if p == 1:                      # the statement's edge value: everything dropped, all zeros (issue 32)
        return torch.zeros_like(x)
    return x * torch.bernoulli(torch.full_like(x, 1 - p)) / (1 - p)


def do_torch(x, p, training):
    return torch.nn.functional.dropout(x, p, training)


def fl_inference(model, optimizer, scheduler, train_loader, val_loader, epochs):
    history = []
    for _ in range(epochs):
        model.train()
        for xb, yb in train_loader:
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()
        model.eval()
        with torch.inference_mode():
            hits = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val_loader)
        history.append(hits / len(val_loader.dataset))
    model.train()
    return history


def ae_buffered(model, loader, loss_fn, optimizer, K):
    model.train()
    window, updates = [], 0
    batches = list(loader)
    for i, batch in enumerate(batches):
        window.append(batch)
        if len(window) == K or i + 1 == len(batches):
            x = torch.cat([b[0] for b in window])
            y = torch.cat([b[1] for b in window])
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            updates, window = updates + 1, []
    return updates


def ae_sum_then_divide(model, loader, loss_fn, optimizer, K):
    model.train()
    updates, seen = 0, 0
    for i, (x, y) in enumerate(loader):
        torch.nn.functional.cross_entropy(model(x), y, reduction="sum").backward()
        seen += len(y)
        if (i + 1) % K == 0 or i + 1 == len(loader):
            for p in model.parameters():
                p.grad /= seen
            optimizer.step()
            optimizer.zero_grad()
            updates, seen = updates + 1, 0
    return updates


def lr_scheduler_based(model, loader, loss_fn, optimizer, start_lr, end_lr):
    n = len(loader)
    for group in optimizer.param_groups:
        group["lr"] = start_lr
    gamma = (end_lr / start_lr) ** (1 / (n - 1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: gamma ** i)
    lrs, losses = [], []
    for x, y in loader:
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return lrs, losses


def save_everything(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "opt": optimizer.state_dict(), "sched": scheduler.state_dict(),
                "next_epoch": epoch + 1, "torch_rng": torch.random.get_rng_state(),
                "numpy_rng": np.random.get_state(), "python_rng": random.getstate()}, path)


def load_everything(path, model, optimizer, scheduler):
    state = torch.load(path, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["opt"])
    scheduler.load_state_dict(state["sched"])
    torch.random.set_rng_state(state["torch_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    return state["next_epoch"]


def sc_counting(losses, patience, min_delta=0.0):
    best, since = float("inf"), 0
    for i, value in enumerate(losses):
        if math.isnan(value) or math.isinf(value):
            return i + 1
        if best - value > min_delta:
            best, since = value, 0
            continue
        since += 1
        if since >= patience:       # >=: patience 0 stops at the first check without an improvement
            return i + 1
    return None


def wc_torch(update, base_lr, warmup, total):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base_lr)

    def factor(u):
        if u < warmup:
            return (u + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (u - warmup) / (total - warmup)))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    for _ in range(update):
        opt.step()
        sched.step()
    return sched.get_last_lr()[0]


def cg_torch(parameters, max_norm):
    return torch.nn.utils.clip_grad_norm_(parameters, max_norm).item()


def rt_inference_float32(model, optimizer, loader, vx, vy, target, max_updates):   # wrong by the accuracy rule
    count = 0
    while True:
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            count += 1
            model.eval()
            with torch.inference_mode():
                acc = (model(vx).argmax(dim=1) == vy).float().mean().item()
            model.train()
            if acc >= target:
                return count
            if count >= max_updates:
                return None


def rt_inference_count(model, optimizer, loader, vx, vy, target, max_updates):
    count = 0
    while True:
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            count += 1
            model.eval()
            with torch.inference_mode():
                hits = int((model(vx).argmax(dim=1) == vy).sum())
            model.train()
            if hits >= target * len(vy):          # counts compared, as the accuracy rule reads "equal counts"
                return count
            if count >= max_updates:
                return None


def ep_loop(updates, N, B, drop_last=False):
    sizes = [len(b) for b in DataLoader(range(N), batch_size=B, drop_last=drop_last)]
    return sum(sizes[i % len(sizes)] for i in range(updates))


RIGHT = {
    "updates_per_epoch": [(upe_counted,)], "loss_weights": [(lw_numpy,)], "SlidingWindows": [(SWBounds,)],
    "FolderDataset": [(FDSortedNumerically,)], "pad_collate": [(pc_pad_sequence,)],
    "class_balanced_weights": [(cw_counter_list,)], "shard_indices": [(si_torch,)],
    "train_step": [(ts_clear_by_hand,)], "adam_step": [(adam_in_place,)],   # adam_torch: refused (TOOLS_RULED_OUT)
    "evaluate": [(ev_inference_sum,)],   # sgd_autograd and do_torch: wrong by their statements (exercise_wrongs)
    "dropout": [(do_bernoulli,)], "fixed_loop": [(fl_inference,)],
    "accumulate_epoch": [(ae_buffered,), (ae_sum_then_divide,)], "lr_range_test": [(lr_scheduler_based,)],
    "checkpoint_pair": [(save_everything, load_everything)], "stop_check": [(sc_counting,)],
    "warmup_cosine_lr": [(wc_torch,)],   # clip_gradients' cg_torch: refused (TOOLS_RULED_OUT)
    "race_to_target": [(rt_inference_count,)], "examples_processed": [(ep_loop,)],
}

# Right in value, but calling the tool the statement says to do without ("without torch.optim", "without
# clip_grad_norm_"): the check refuses them, naming the tool.
TOOLS_RULED_OUT = {"adam_step": adam_torch, "clip_gradients": cg_torch}

from tests.exercise_ranks import RIGHT_RANKS  # noqa: E402 - exercises 2.4 and 4.3

RIGHT.update(RIGHT_RANKS)
from tests.exercise_token_accum_cases import RIGHTS as _TOKEN_RIGHTS  # noqa: E402 (exercise 7.5, chapter 7)
RIGHT["token_window_losses"] = _TOKEN_RIGHTS
from tests import exercise_snapshot_cases as _snapshot  # noqa: E402 - exercise 5.3 lives in its own module

RIGHT["snapshot"] = _snapshot.RIGHT
