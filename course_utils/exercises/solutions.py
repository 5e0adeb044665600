"""The course's own solutions to every exercise (for instructors and the tests; learners: try first!).

``SOLUTIONS[name]`` is what ``EXERCISES[name].check(*SOLUTIONS[name])`` passes. Each is written the way
a learner would write it after reading the chapter, not the way the checker's oracle computes it.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch.utils.data import Dataset

from course_utils.exercises import ch05_snapshot as S5


# --- chapter 0 ---------------------------------------------------------------------------------------------

def updates_per_epoch(N, B, K, drop_last=False):
    batches = N // B if drop_last else math.ceil(N / B)
    return math.ceil(batches / K)


def loss_weights(sizes, K):
    weights = []
    for start in range(0, len(sizes), K):
        window = sizes[start:start + K]
        weights += [size / sum(window) for size in window]
    return weights


# --- chapter 1 ---------------------------------------------------------------------------------------------

class SlidingWindows(Dataset):
    def __init__(self, series, window):
        self.series, self.window = series, window

    def __len__(self):
        return len(self.series) - self.window

    def __getitem__(self, i):
        return self.series[i:i + self.window], self.series[i + self.window]


class FolderDataset(Dataset):
    def __init__(self, folder):
        self.folder = Path(folder)
        self.n = sum(1 for path in self.folder.glob("*.pt") if path.stem.isdigit())   # i.pt: not stats.pt

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        example = torch.load(self.folder / f"{i}.pt")
        return example["x"], example["y"]


# --- chapter 2 ---------------------------------------------------------------------------------------------

def pad_collate(batch):
    longest = max(len(tokens) for tokens, _ in batch)
    input_ids = torch.zeros(len(batch), longest, dtype=torch.long)
    mask = torch.zeros(len(batch), longest, dtype=torch.bool)
    for row, (tokens, _) in enumerate(batch):
        input_ids[row, :len(tokens)] = tokens
        mask[row, :len(tokens)] = True
    labels = torch.tensor([label for _, label in batch], dtype=torch.long)
    return input_ids, mask, labels


def class_balanced_weights(labels):
    counts = torch.bincount(labels)
    return 1.0 / counts[labels].double()


def shard_indices(n, world_size, rank):
    per_rank = math.ceil(n / world_size)
    indices = list(range(n))
    while len(indices) < per_rank * world_size:
        indices += indices[:per_rank * world_size - len(indices)]
    return indices[rank::world_size]


# --- chapter 3 ---------------------------------------------------------------------------------------------

def train_step(model, inputs, targets, loss_fn, optimizer):
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def adam_step(param, grad, m, v, t, lr, betas, eps):
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat = m / (1 - beta1 ** t)
    v_hat = v / (1 - beta2 ** t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v


def sgd_step_by_hand(W, b, x, t, lr):
    y = W @ x + b
    dL_dy = 2 * (y - t) / len(t)
    return W - lr * torch.outer(dL_dy, x), b - lr * dL_dy


# --- chapter 4 ---------------------------------------------------------------------------------------------

def evaluate(model, loader, loss_fn):
    modes = {layer: layer.training for layer in model.modules()}   # a frozen BatchNorm may be in eval already
    model.eval()
    total, hits, n = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            logits = model(inputs)
            total += loss_fn(logits, targets).item() * len(targets)
            hits += (logits.argmax(dim=1) == targets).sum().item()
            n += len(targets)
    for layer, training in modes.items():
        layer.train(training)
    return total / n, hits / n


def dropout(x, p, training):
    if not training or p == 0:
        return x
    if p == 1:
        return torch.zeros_like(x)
    keep = torch.rand_like(x) >= p
    return x * keep / (1 - p)


# --- chapter 5 ---------------------------------------------------------------------------------------------

def fixed_loop(model, optimizer, scheduler, train_loader, val_loader, epochs):
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(torch.nn.functional.cross_entropy(model(xb), yb).item() * len(yb) for xb, yb in val_loader)
    return losses


def accumulate_epoch(model, loader, loss_fn, optimizer, K):
    sizes = [len(targets) for _, targets in loader]
    updates = 0
    model.train()
    optimizer.zero_grad()
    for i, (inputs, targets) in enumerate(loader):
        start = i - i % K
        in_window = sum(sizes[start:start + K])
        loss = loss_fn(model(inputs), targets) * len(targets) / in_window
        loss.backward()
        if (i + 1) % K == 0 or i + 1 == len(sizes):
            optimizer.step()
            optimizer.zero_grad()
            updates += 1
    return updates


# --- chapter 6 ---------------------------------------------------------------------------------------------

# The solution is the loop the checker runs as its oracle: read it in exercises/ch06.py.
from course_utils.exercises.ch06 import reference_range_test as lr_range_test  # noqa: E402


# --- chapter 7 ---------------------------------------------------------------------------------------------

def save_checkpoint(path, model, optimizer, scheduler, epoch):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": epoch, "rng": torch.get_rng_state()}, path)


def load_checkpoint(path, model, optimizer, scheduler):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"])
    return state["epoch"] + 1


def stop_check(losses, patience, min_delta=0.0):
    best, waited = math.inf, 0
    for check, loss in enumerate(losses, start=1):
        if not math.isfinite(loss):
            return check
        if loss < best - min_delta:
            best, waited = loss, 0
        else:
            waited += 1
            if waited >= patience:
                return check
    return None


def warmup_cosine_lr(update, base_lr, warmup, total):
    if update < warmup:
        return base_lr * (update + 1) / warmup
    progress = (update - warmup) / (total - warmup)
    return base_lr * 0.5 * (1 + math.cos(math.pi * progress))


def clip_gradients(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads)).item()
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / total)
    return total


# --- chapter 8 ---------------------------------------------------------------------------------------------

def race_to_target(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    updates = 0
    while updates < max_updates:
        for inputs, targets in train_loader:
            model.train()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(inputs), targets).backward()
            optimizer.step()
            updates += 1
            model.eval()
            with torch.no_grad():
                accuracy = (model(val_inputs).argmax(dim=1) == val_targets).sum().item() / len(val_targets)
            model.train()
            if accuracy >= target:
                return updates
            if updates == max_updates:
                return None
    return None


def examples_processed(updates, N, B, drop_last=False):
    if drop_last:                  # every batch trained on is full (and with B > N there is none: updates is 0)
        return updates * B
    epochs, rest = divmod(updates, math.ceil(N / B))
    return epochs * N + rest * B   # the partial batch ends an epoch, so the `rest` batches are full


SOLUTIONS = {
    "updates_per_epoch": (updates_per_epoch,), "loss_weights": (loss_weights,),
    "SlidingWindows": (SlidingWindows,), "FolderDataset": (FolderDataset,),
    "pad_collate": (pad_collate,), "class_balanced_weights": (class_balanced_weights,),
    "shard_indices": (shard_indices,),
    "train_step": (train_step,), "adam_step": (adam_step,), "sgd_step_by_hand": (sgd_step_by_hand,),
    "evaluate": (evaluate,), "dropout": (dropout,),
    "fixed_loop": (fixed_loop,), "accumulate_epoch": (accumulate_epoch,),
    "lr_range_test": (lr_range_test,),
    "checkpoint_pair": (save_checkpoint, load_checkpoint), "stop_check": (stop_check,),
    "warmup_cosine_lr": (warmup_cosine_lr,), "clip_gradients": (clip_gradients,),
    "race_to_target": (race_to_target,), "examples_processed": (examples_processed,),
}


# --- exercises 2.4 and 4.3 (work on several ranks) ---------------------------------------------------------

def weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0):
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    drawn = torch.multinomial(weights, total, replacement=True, generator=g)
    return drawn[rank::world_size].tolist()


def rank_metrics(losses, correct, n):
    world_size = len(losses)
    loss_sum, hits, count = 0.0, 0, 0
    for rank in range(world_size):
        for j in range(len(losses[rank])):
            if rank + j * world_size < n:          # slot rank + j*W; from n on, padding copies
                loss_sum += losses[rank][j].item()
                hits += int(correct[rank][j])
                count += 1
    return loss_sum / count, hits / count


SOLUTIONS.update({"weighted_shard": (weighted_shard,), "rank_metrics": (rank_metrics,)})
from course_utils.exercises.ch07_token_accum import reference_token_window_losses  # noqa: E402 (exercise 7.5)
SOLUTIONS["token_window_losses"] = (reference_token_window_losses,)
SOLUTIONS["snapshot"] = (S5.reference_snapshot,)     # chapter 5, exercise 5.3 (its own module)
