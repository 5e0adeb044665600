"""Chapter 2: a weighted sampler on W ranks, and targets of different sizes in one batch.

A WeightedRandomSampler built the same way on every rank (the same seed, as a reproducible script does) draws the
same indices on every rank: W processes compute the same batches. ``DistributedWeightedSampler`` (engine) draws
one weighted sample and deals it out like DistributedSampler does.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import Dataset, WeightedRandomSampler, default_collate

from course_utils.engine.rank_shards import DistributedWeightedSampler


@dataclass(frozen=True)
class RankDraws:
    """One epoch of weighted draws on W ranks (chapter 2)."""

    shards: list[list[int]]        # rank -> the indices it drew

    @property
    def identical(self) -> bool:
        return all(s == self.shards[0] for s in self.shards)

    @property
    def together(self) -> list[int]:
        return [i for s in self.shards for i in s]


def same_seed_weighted(weights: torch.Tensor, num_samples: int, world_size: int, seed: int) -> RankDraws:
    """Every rank builds WeightedRandomSampler(num_samples / W) with the script's seed: what each draws (chapter 2)."""
    per_rank = num_samples // world_size
    return RankDraws([list(WeightedRandomSampler(weights, per_rank, generator=torch.Generator().manual_seed(seed)))
                      for _ in range(world_size)])


def sharded_weighted(weights: torch.Tensor, num_samples: int, world_size: int, seed: int,
                     epoch: int = 0) -> RankDraws:
    """Every rank's DistributedWeightedSampler, built with the same seed, after set_epoch(epoch) (chapter 2)."""
    shards = []
    for rank in range(world_size):
        sampler = DistributedWeightedSampler(weights, num_samples, world_size, rank, seed=seed)
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
    return RankDraws(shards)


def one_process_draw(weights: torch.Tensor, num_samples: int, seed: int, epoch: int = 0) -> list[int]:
    """What one process draws with WeightedRandomSampler and a generator seeded seed + epoch (chapter 2)."""
    return list(WeightedRandomSampler(weights, num_samples, generator=torch.Generator().manual_seed(seed + epoch)))


# --- targets of different sizes ------------------------------------------------------------------------------

class BoxesDataset(Dataset):
    """Tiny 'images' (3 x 8 x 8) with i % 4 boxes each: a [k, 4] tensor of corners and k class labels (chapter 2)."""

    def __init__(self, n: int = 8, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.rand(n, 3, 8, 8, generator=g)
        self.boxes = [torch.rand(i % 4, 4, generator=g) * 8 for i in range(n)]
        self.labels = [torch.randint(0, 3, (i % 4,), generator=g) for i in range(n)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.images[i], {"boxes": self.boxes[i], "labels": self.labels[i]}


def detection_collate(batch: list[tuple[torch.Tensor, dict[str, torch.Tensor]]]):
    """Stack the images (all one shape); keep the targets a list, one dict per image (chapter 2)."""
    images = default_collate([image for image, _ in batch])
    return images, [target for _, target in batch]
