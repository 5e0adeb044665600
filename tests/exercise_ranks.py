"""Exercises 2.4 (weighted_shard) and 4.3 (rank_metrics): right solutions written differently, and typical wrong
ones with the words their verdict must contain (merged into tests/exercise_rights.py and exercise_wrongs.py)."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.utils.data import WeightedRandomSampler


# --- weighted_shard: right ---------------------------------------------------------------------------------

def ws_sampler(weights, num_samples, world_size, rank, epoch, seed=0):
    per_rank = math.ceil(num_samples / world_size)
    sampler = WeightedRandomSampler(weights, per_rank * world_size, generator=torch.Generator().manual_seed(seed + epoch))
    return [i for k, i in enumerate(sampler) if k % world_size == rank]


def ws_loop(weights, num_samples, world_size, rank, epoch, seed=0):
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    total = -(-num_samples // world_size) * world_size
    drawn = torch.multinomial(weights.double(), total, True, generator=g)
    return [int(drawn[k]) for k in range(rank, total, world_size)]


# --- weighted_shard: wrong ---------------------------------------------------------------------------------

def ws_global_rng(weights, num_samples, world_size, rank, epoch, seed=0):
    total = world_size * math.ceil(num_samples / world_size)
    return torch.multinomial(weights, total, replacement=True)[rank::world_size].tolist()


def ws_seed_rank(weights, num_samples, world_size, rank, epoch, seed=0):
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch + rank)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].tolist()


def ws_no_epoch(weights, num_samples, world_size, rank, epoch, seed=0):
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].tolist()


def ws_whole_draw(weights, num_samples, world_size, rank, epoch, seed=0):
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, num_samples, replacement=True, generator=g).tolist()


def ws_contiguous(weights, num_samples, world_size, rank, epoch, seed=0):
    per_rank = math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    drawn = torch.multinomial(weights, per_rank * world_size, replacement=True, generator=g)
    return drawn[rank * per_rank:(rank + 1) * per_rank].tolist()


def ws_no_rounding(weights, num_samples, world_size, rank, epoch, seed=0):
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, num_samples, replacement=True, generator=g)[rank::world_size].tolist()


def ws_normalises_in_place(weights, num_samples, world_size, rank, epoch, seed=0):
    weights /= weights.sum()
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].tolist()


def ws_tensor(weights, num_samples, world_size, rank, epoch, seed=0):
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].float()


# --- rank_metrics: right -----------------------------------------------------------------------------------

def rm_vectorised(losses, correct, n):
    W = len(losses)
    per_rank = len(losses[0])
    keep = [torch.arange(per_rank) * W + r < n for r in range(W)]
    loss = torch.cat([l.double()[k] for l, k in zip(losses, keep)])
    hits = torch.cat([c[k] for c, k in zip(correct, keep)])
    return loss.mean().item(), hits.double().mean().item()


def rm_layout(losses, correct, n):
    """Rebuild the sampler's layout slot by slot, then keep the first n slots."""
    W = len(losses)
    slots = [None] * (W * len(losses[0]))
    for r in range(W):
        for j in range(len(losses[r])):
            slots[r + j * W] = (float(losses[r][j]), bool(correct[r][j]))
    real = slots[:n]
    return float(np.mean([s[0] for s in real])), sum(s[1] for s in real) / n


# --- rank_metrics: wrong -----------------------------------------------------------------------------------

def rm_with_padding(losses, correct, n):
    loss = torch.cat(losses).double()
    return loss.mean().item(), torch.cat(correct).double().mean().item()


def rm_mean_of_means(losses, correct, n):
    W = len(losses)
    means = []
    for r in range(W):
        keep = torch.tensor([r + j * W < n for j in range(len(losses[r]))])
        if keep.any():
            means.append((losses[r][keep].double().mean().item(), correct[r][keep].double().mean().item()))
    return sum(m[0] for m in means) / len(means), sum(m[1] for m in means) / len(means)


def rm_drop_from_first_ranks(losses, correct, n):
    W = len(losses)
    pad = W * len(losses[0]) - n
    loss_sum, hits, count = 0.0, 0, 0
    for r in range(W):
        end = len(losses[r]) - (1 if r < pad else 0)
        loss_sum += losses[r][:end].double().sum().item()
        hits += int(correct[r][:end].sum())
        count += end
    return loss_sum / count, hits / count


def rm_dedupe_by_value(losses, correct, n):
    seen, loss_sum, hits = set(), 0.0, 0
    for l, c in zip(losses, correct):
        for value, hit in zip(l.tolist(), c.tolist()):
            if value not in seen:
                seen.add(value)
                loss_sum += value
                hits += hit
    return loss_sum / len(seen), hits / len(seen)


def rm_tensors(losses, correct, n):
    W = len(losses)
    keep = [torch.arange(len(losses[0])) * W + r < n for r in range(W)]
    loss = torch.cat([l[k] for l, k in zip(losses, keep)])
    return loss.mean(), torch.cat([c[k] for c, k in zip(correct, keep)]).float().mean()


def rm_sorts_in_place(losses, correct, n):
    for l in losses:
        l.copy_(l.sort().values)
    return rm_vectorised(losses, correct, n)


RIGHT_RANKS = {"weighted_shard": [(ws_sampler,), (ws_loop,)], "rank_metrics": [(rm_vectorised,), (rm_layout,)]}
WRONG_RANKS = {
    "weighted_shard": [("global random state", (ws_global_rng,), "global random state"),
                       ("seed + epoch + rank", (ws_seed_rank,), "the same number on every rank"),
                       ("epoch ignored", (ws_no_epoch,), "change from epoch to epoch"),
                       ("the whole draw on every rank", (ws_whole_draw,), "only its share"),
                       ("contiguous blocks", (ws_contiguous,), "not one contiguous block"),
                       ("total not rounded up", (ws_no_rounding,), "world_size * ceil(num_samples / world_size)"),
                       ("weights normalised in place", (ws_normalises_in_place,), "changed the `weights` tensor"),
                       ("a float tensor", (ws_tensor,), "not a list of indices")],
    "rank_metrics": [("padding counted", (rm_with_padding,), "padding copies too"),
                     ("mean of rank means", (rm_mean_of_means,), "average of the ranks' averages"),
                     ("padding dropped from the first ranks", (rm_drop_from_first_ranks,), "over the 10 examples it is"),
                     ("deduplicated by loss value", (rm_dedupe_by_value,), "several examples with the same loss"),
                     ("tensors returned", (rm_tensors,), "not a number"),
                     ("sorts the losses in place", (rm_sorts_in_place,), "changed the tensors")],
}
