"""Round 4 of the blind check (stop 58): wrong attempts written from the statements alone by three helpers who saw
neither the checkers nor the solutions, nor round 3's attempts (only its tags, to find other mistakes): 6 per
exercise. Half (by a hash of the name) was run first: 8 of 71 passed, 5 fixed in the checks and 3 judged allowed by
the statements; the unseen half, run once after: 12 of 79 passed, 8 fixed, 3 judged allowed, 1 left then (early stopping
added to fixed_loop, which the 3-epoch check never triggered; fixed at stop 59 by a second case whose validation
loss rises every epoch). Kept here verbatim: the fixed ones as regression cases, and the ones the statements allow (ALLOWED in
tests/test_exercise_blind_rounds.py) as proof that the checks accept them."""
from __future__ import annotations

import copy
import math
import os
import re

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset


def _grads_of(parameters):
    return [q.grad for q in parameters if q.grad is not None]


class SlidingWindows__wrong__target_float_item(Dataset):
    """Returns the target as series[i+window].float().item(): a Python float rounded to float32, wrong for a float64 series."""

    def __init__(self, series, window):
        self.series = series
        self.window = window

    def __len__(self):
        return len(self.series) - self.window

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError(i)
        return self.series[i:i + self.window], self.series[i + self.window].float().item()


def train_step__wrong__zero_grad_after_step(model, inputs, targets, loss_fn, optimizer):
    """Zeroes the gradients after the step instead of before: stale gradients present when called are added in (model arriving with non-zero .grad)."""
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def lr_range_test__wrong__extra_pass_to_count(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Counts batches with an extra pass over loader before training: it draws from the global RNG, so a shuffled loader yields a different batch order (not one pass)."""
    n = sum(1 for _ in loader)
    lrs, losses = [], []
    for i, (xb, yb) in enumerate(loader):
        lr = start_lr * (end_lr / start_lr) ** (i / (n - 1))
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        lrs.append(lr)
        losses.append(loss.item())
    return lrs, losses


def lr_range_test__wrong__stops_on_divergence(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Stops early (fastai style) once the loss exceeds 4x the best loss, so not every batch is trained when the loss blows up at high rates."""
    n = len(loader)
    lrs, losses = [], []
    best = float("inf")
    for i, (xb, yb) in enumerate(loader):
        lr = start_lr * (end_lr / start_lr) ** (i / (n - 1))
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        lrs.append(lr)
        losses.append(loss.item())
        best = min(best, loss.item())
        if loss.item() > 4 * best or not math.isfinite(loss.item()):
            break
    return lrs, losses


def evaluate__wrong__sampler_len_denominator(model, loader, loss_fn):
    """Divides by len(loader.sampler) instead of counting the examples yielded: wrong with drop_last=True (or a batch sampler yielding fewer)."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad():
        for xb, yb in loader:
            out = model(xb)
            total += loss_fn(out, yb).item() * len(yb)
            correct += int((out.argmax(dim=1) == yb).sum())
    for m, t in modes:
        m.training = t
    n = len(loader.sampler)
    return total / n, correct / n


def lr_range_test__wrong__logspace_float32(model, loader, loss_fn, optimizer, start_lr, end_lr):
    """Precomputes the rates with torch.logspace (float32 by default): each rate is off by ~1e-7 relative (any start/end not exact in float32)."""
    n = len(loader)
    sched = torch.logspace(math.log10(start_lr), math.log10(end_lr), n).tolist()
    lrs, losses = [], []
    for i, (xb, yb) in enumerate(loader):
        lr = sched[i]
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        lrs.append(lr)
        losses.append(loss.item())
    return lrs, losses


class FolderDataset__wrong__label_int32(Dataset):
    """Casts the label to int32 ('an int label'): CrossEntropyLoss refuses int32 targets; shows on any file."""

    def __init__(self, folder):
        self.folder = folder
        self.n = sum(1 for f in os.listdir(folder) if re.fullmatch(r"\d+\.pt", f))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        return d["x"], torch.as_tensor(d["y"]).to(torch.int32)


class FolderDataset__wrong__split_stem_isdigit(Dataset):
    """Counts every file whose name before the first dot is digits, whatever the extension: a folder with 0.pt, 1.pt and 2.json has len 3."""

    def __init__(self, folder):
        self.folder = folder
        self.n = sum(1 for f in os.listdir(folder) if f.split(".")[0].isdigit())

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        return d["x"], d["y"]


def dropout__wrong__detached_output(x, p, training):
    """Builds the output on x.detach().clone() to leave x untouched: no gradient flows back to x in training."""
    if not training or p == 0:
        return x
    out = x.detach().clone()
    if p == 1:
        return out.zero_()
    keep = torch.rand_like(x) >= p
    out[~keep] = 0
    out /= 1 - p
    return out


class FolderDataset__wrong__caches_examples(Dataset):
    """Keeps every example read in a dict cache: memory grows to the whole data set and a file rewritten after a first read is served stale."""

    def __init__(self, folder):
        self.folder = folder
        self.n = sum(1 for f in os.listdir(folder) if re.fullmatch(r"\d+\.pt", f))
        self.cache = {}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i not in self.cache:
            d = torch.load(os.path.join(self.folder, f"{i}.pt"))
            self.cache[i] = (d["x"], d["y"])
        return self.cache[i]


def dropout__wrong__p_one_zeros_float32(x, p, training):
    """For p=1 returns torch.zeros(x.shape), float32 whatever x is: wrong dtype for float64 x."""
    if not training or p == 0:
        return x
    if p == 1:
        return torch.zeros(x.shape)
    keep = torch.rand_like(x) >= p
    return x * keep / (1 - p)


def checkpoint_pair__wrong__load_eval_mode():
    """load_checkpoint leaves the model in eval() mode: a loop that does not call model.train() resumes without dropout."""
    def save_checkpoint(path, model, optimizer, scheduler, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state(),
                    "epoch": epoch}, path)

    def load_checkpoint(path, model, optimizer, scheduler):
        ck = torch.load(path)
        model.load_state_dict(ck["model"])
        model.eval()
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        torch.set_rng_state(ck["rng"])
        return ck["epoch"] + 1
    return save_checkpoint, load_checkpoint


def clip_gradients__wrong__compares_squared_norm(parameters, max_norm):
    """Tests the squared norm against max_norm (not max_norm**2): norm 1.5 with max_norm 2 is clipped up to 2; norm 0.8, max 0.7 is not clipped."""
    grads = _grads_of(parameters)
    sq = sum(float(g.detach().pow(2).sum()) for g in grads)
    total = math.sqrt(sq)
    if sq > max_norm:
        coef = max_norm / total
        for g in grads:
            g.mul_(coef)
    return total


def clip_gradients__wrong__eps_like_torch(parameters, max_norm):
    """Copies clip_grad_norm_'s max_norm / (norm + 1e-6): the clipped norm is below max_norm, visibly so for small norms (norm 2e-3, max 1e-3)."""
    grads = _grads_of(parameters)
    total = math.sqrt(sum(float(g.detach().pow(2).sum()) for g in grads))
    if total > max_norm:
        coef = max_norm / (total + 1e-6)
        for g in grads:
            g.mul_(coef)
    return total


def stop_check__wrong__nonfinite_checked_in_else(losses, patience, min_delta=0.0):
    """Tests finiteness only on non-improving checks, so -inf counts as an improvement and does not stop training at once."""
    best = math.inf
    wait = 0
    for i, v in enumerate(losses, 1):
        v = float(v)
        if v < best - min_delta:
            best = v
            wait = 0
        else:
            if not math.isfinite(v):
                return i
            wait += 1
            if wait >= patience:
                return i
    return None


def token_window_losses__wrong__casts_losses_float32(token_losses, masks):
    """Casts the token losses with .float() before masking, so float64 (and bfloat16) inputs give float32 losses of another dtype and precision."""
    tls = list(token_losses)
    ms = list(masks)
    N = sum(int(m.bool().sum()) for m in ms)
    if N == 0:
        raise ValueError("window has no real token")
    return [(tl.float() * m.float()).sum() / N for tl, m in zip(tls, ms)]


def checkpoint_pair__wrong__epoch_from_scheduler():
    """Does not store the epoch and returns scheduler.last_epoch: wrong when the scheduler steps per batch (or not once per epoch)."""
    def save_checkpoint(path, model, optimizer, scheduler, epoch):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}, path)

    def load_checkpoint(path, model, optimizer, scheduler):
        ck = torch.load(path)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        torch.set_rng_state(ck["rng"])
        return int(scheduler.last_epoch)
    return save_checkpoint, load_checkpoint


def fixed_loop__wrong__early_stop_added(model, optimizer, scheduler, train_loader, val_loader, epochs):
    """Adds early stopping (break when the val loss rises), so not all epochs are trained when validation loss goes up."""
    losses = []
    best = float("inf")
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.cross_entropy(model(xb), yb).item() for xb, yb in val_loader)
        scheduler.step()
        if val_loss > best:
            break
        best = val_loss
    return losses
