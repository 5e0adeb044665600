"""Data split across W ranks (chapters 2 and 4): where DistributedSampler's padding sits, a metric that leaves it
out, and a weighted sampler whose draws are shared out between the ranks.

Rules, used by the chapters' demonstrations and as the exercises' oracles:

- ``DistributedSampler(n, W, drop_last=False)`` lays out ``W * ceil(n / W)`` slots in one order (shuffled or
  not), the last ``W * ceil(n / W) - n`` of them copies of the first indices, and rank r takes slots
  r, r + W, r + 2W, ... So rank r's j-th example is padding exactly when ``r + j * W >= n``.
- A weighted sample for W ranks is drawn once, from a generator every rank seeds with ``seed + epoch``, and rank
  r keeps every W-th draw starting at r: the ranks together follow the weights, and no two ranks repeat each
  other's draws.
"""
from __future__ import annotations

import math
from typing import Iterator, Sequence

import torch
from torch.utils.data import Sampler


def real_slots(n: int, world_size: int, rank: int) -> list[bool]:
    """For each of rank `rank`'s DistributedSampler slots (drop_last=False): True for a real example, False for padding (chapter 4)."""
    if n < 1 or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need n >= 1, world_size >= 1 and 0 <= rank < world_size; got {n}, {world_size}, {rank}")
    per_rank = math.ceil(n / world_size)
    return [rank + j * world_size < n for j in range(per_rank)]


def metric_without_padding(losses: Sequence[torch.Tensor], correct: Sequence[torch.Tensor],
                           n: int) -> tuple[float, float]:
    """Mean loss and accuracy over n examples from every rank's per-example results, padding left out (chapter 4)."""
    world_size = len(losses)
    loss_sum, right, count = 0.0, 0, 0
    for rank, (rank_losses, rank_correct) in enumerate(zip(losses, correct)):
        keep = torch.tensor(real_slots(n, world_size, rank), dtype=torch.bool)
        loss_sum += float(rank_losses.double()[keep].sum())
        right += int(rank_correct[keep].sum())
        count += int(keep.sum())
    return loss_sum / count, right / count


def rank_sums(losses: torch.Tensor, correct: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """One rank's [loss sum, correct count, example count] as a float64 tensor: what an all_reduce adds (chapter 4)."""
    keep = torch.ones(len(losses), dtype=torch.bool) if keep is None else keep
    return torch.stack([losses.double()[keep].sum(), correct[keep].double().sum(), keep.double().sum()])


def weighted_shard(weights: torch.Tensor, num_samples: int, world_size: int, rank: int, epoch: int,
                   seed: int = 0) -> list[int]:
    """Rank `rank`'s share of one weighted draw that every rank makes alike from seed + epoch (chapter 2)."""
    total = world_size * math.ceil(num_samples / world_size)
    generator = torch.Generator().manual_seed(seed + epoch)
    drawn = torch.multinomial(torch.as_tensor(weights, dtype=torch.double), total, replacement=True,
                              generator=generator)
    return drawn[rank::world_size].tolist()


class DistributedWeightedSampler(Sampler[int]):
    """A WeightedRandomSampler for one of W ranks: its share of a draw all ranks make alike (chapter 2).

    Call ``set_epoch(epoch)`` before each epoch, as with DistributedSampler.
    """

    def __init__(self, weights: Sequence[float] | torch.Tensor, num_samples: int, num_replicas: int, rank: int,
                 seed: int = 0):
        if num_samples < 1 or num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"need num_samples >= 1, num_replicas >= 1 and 0 <= rank < num_replicas; got "
                             f"{num_samples}, {num_replicas}, {rank}")
        self.weights = torch.as_tensor(weights, dtype=torch.double)
        self.num_samples, self.num_replicas, self.rank, self.seed = num_samples, num_replicas, rank, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.num_replicas)

    def __iter__(self) -> Iterator[int]:
        return iter(weighted_shard(self.weights, self.num_samples, self.num_replicas, self.rank, self.epoch,
                                   self.seed))
