"""Round 6 of the blind check (stop 67): 273 wrong and 49 right attempts written from the statements alone by a helper
who saw neither the checkers, the solutions nor earlier rounds; 25 wrong ones passed, 0 right ones were refused. The
checks were then tightened where the statement is clear (two parameter groups and a loader that drops its last batch
in 5.2, a folder with two .pt files that are not examples in 1.2, a target met before training in 8.1, frozen
parameters left frozen in 4.1, the tuple asked for and the examples left as they came in 2.1, and the tool a statement
says to do without refused by name in 3.2 and 7.4). The 12 that passed and now fail are kept verbatim here (renamed <exercise>__wrong__<mistake>), so that a later change to a check that lets
one through fails (tests/test_exercise_blind_rounds.py). Not closed, and why: 5 attempts that call chapter 2's tools
(pad_sequence, DistributedSampler, WeightedRandomSampler), which chapter 2's checks compare with and its statements do
not rule out one by one (the chapter says calling one passes but teaches nothing); a second pass over the loader to read the batch sizes (the course's own solution to 5.2 does
it); a dropout returning x * 0 at p = 1 (torch's own gives NaN for an infinite value too); numpy integers returned for
ints; float16 gradients' overflow in a norm; an empty sizes list; two accumulations that hold every micro-batch's
graph (right in value; the check does not measure memory)."""
from __future__ import annotations

import glob
import os
import re

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset


class _FolderRight(Dataset):
    """The helper's correct FolderDataset, the wrong ones' base (only their __init__ differs)."""

    def __init__(self, folder):
        self.folder = str(folder)
        self.n = sum(1 for f in os.listdir(self.folder) if re.fullmatch(r"\d+\.pt", f))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        d = torch.load(os.path.join(self.folder, f"{i}.pt"))
        return d["x"], d["y"]


def _pad_right(batch):
    T = max(len(t) for t, _ in batch)
    ids = torch.zeros(len(batch), T, dtype=torch.long)
    mask = torch.zeros(len(batch), T, dtype=torch.bool)
    for i, (t, _) in enumerate(batch):
        ids[i, :len(t)] = t
        mask[i, :len(t)] = True
    labels = torch.tensor([int(l) for _, l in batch], dtype=torch.long)
    return ids, mask, labels


def _acc(model, vx, vy):
    model.eval()
    with torch.no_grad():
        right = (model(vx).argmax(1) == vy).sum().item()
    model.train()
    return right / len(vy)

def accumulate_epoch__wrong__rescale_group0_only(model, loader, loss_fn, optimizer, K):  # rescales only the first group's grads
    model.train()
    params = optimizer.param_groups[0]["params"]
    updates, seen, n = 0, 0, 0
    nb = len(loader)
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) * len(y)).backward()
        n += len(y); seen += 1
        if seen == K or i == nb - 1:
            for p in params:
                if p.grad is not None:
                    p.grad /= n
            optimizer.step(); optimizer.zero_grad(); updates += 1; seen = 0; n = 0
    return updates


def accumulate_epoch__wrong__len_dataset_sizes(model, loader, loss_fn, optimizer, K):      # window sizes from len(loader.dataset)
    model.train()
    nb = len(loader); B = loader.batch_size; N = len(loader.dataset)
    sizes = [B] * (nb - 1) + [N - (nb - 1) * B]
    updates, seen = 0, 0
    for i, (x, y) in enumerate(loader):
        start = (i // K) * K
        tot = sum(sizes[start:start + K])
        (loss_fn(model(x), y) * sizes[i] / tot).backward()
        seen += 1
        if seen == K or i == nb - 1:
            optimizer.step(); optimizer.zero_grad(); updates += 1; seen = 0
    return updates


class FolderDataset__wrong__minus_stats(_FolderRight):       # *.pt minus one, assuming stats.pt is always there
    def __init__(self, folder):
        self.folder = str(folder)
        self.n = len(glob.glob(os.path.join(self.folder, "*.pt"))) - 1


class FolderDataset__wrong__exclude_stats_by_name(_FolderRight):   # hard-codes stats.pt as the only other .pt
    def __init__(self, folder):
        self.folder = str(folder)
        self.n = len([f for f in glob.glob(os.path.join(self.folder, "*.pt")) if os.path.basename(f) != "stats.pt"])


def race_to_target__wrong__measures_before_update(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):   # measures before each update
    updates = 0
    while True:
        for x, y in train_loader:
            if _acc(model, val_inputs, val_targets) >= target:
                return updates if updates else None
            if updates >= max_updates:
                return None
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            updates += 1


def race_to_target__wrong__measures_before_update_returns0(model, optimizer, train_loader, val_inputs, val_targets, target, max_updates):
    # measures at the top of each step, before the update: the untrained model can "reach" the target at 0 updates
    updates = 0
    while True:
        for x, y in train_loader:
            if _acc(model, val_inputs, val_targets) >= target:
                return updates
            if updates >= max_updates:
                return None
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            updates += 1


def evaluate__wrong__unfreezes_params(model, loader, loss_fn):   # "no graph" by freezing every parameter, then unfreezing all
    modes = {m: m.training for m in model.modules()}
    model.eval(); model.requires_grad_(False)
    total, right, n = 0.0, 0, 0
    for x, y in loader:
        out = model(x)
        total += loss_fn(out, y).item() * len(y)
        right += (out.argmax(1) == y).sum().item()
        n += len(y)
    model.requires_grad_(True)
    for m, t in modes.items():
        m.training = t
    return total / n, right / n


def pad_collate__wrong__list_not_tuple(batch):
    return list(_pad_right(batch))


def pad_collate__wrong__resizes_inputs_inplace(batch):   # pads by torch.cat into... modifies? no: resizes the inputs in place
    T = max(len(t) for t, _ in batch)
    rows = []
    for t, _ in batch:
        n = len(t)
        t.resize_(T)            # in place on the caller's tensor
        t[n:] = 0
        rows.append(t)
    ids = torch.stack(rows)
    return ids, ids != 0, torch.tensor([int(l) for _, l in batch])


def adam_step__wrong__uses_torch_optim_Adam(param, grad, m, v, t, lr, betas, eps):
    p = param.clone().requires_grad_(False)
    p = nn.Parameter(p)
    opt = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps)
    p.grad = grad.clone()
    opt.state[p] = {"step": torch.tensor(float(t - 1)), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    opt.step()
    st = opt.state[p]
    return p.detach(), st["exp_avg"], st["exp_avg_sq"]


def clip_gradients__wrong__uses_get_total_norm(parameters, max_norm):   # torch.nn.utils.get_total_norm + clip_grads_with_norm_
    ps = [p for p in parameters if p.grad is not None]
    grads = [p.grad for p in ps]
    total = torch.nn.utils.get_total_norm(grads)
    torch.nn.utils.clip_grads_with_norm_(ps, max_norm, total)
    return float(total)


def clip_gradients__wrong__uses_clip_grad_norm_(parameters, max_norm):
    return float(torch.nn.utils.clip_grad_norm_(parameters, max_norm))
