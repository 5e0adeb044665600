"""Chapter 2: samplers you write yourself. A curriculum (easy to hard within each epoch, the same pace on every rank)
and per-image weights for a segmentation set, whose masks hold several classes each. Driven through real DataLoaders
and torch's own samplers with seeded generators."""
from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch.utils.data import DataLoader, RandomSampler, Sampler, WeightedRandomSampler

from course_utils.chapters.ch02_sampling import _positive_int


class CurriculumSampler(Sampler[int]):
    """Easy to hard within each epoch (chapter 2): indices sorted by `difficulty`, ties in a new random order each
    epoch (`set_epoch`, as DistributedSampler asks). With `world_size` > 1, rank r takes every world_size-th index
    of that order from position r, so the ranks climb the curriculum together; the tail that does not divide is
    dropped, so every rank yields the same number of indices."""

    def __init__(self, difficulty: Sequence[float], seed: int = 0, rank: int = 0, world_size: int = 1):
        _positive_int("world_size", world_size)
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank!r}")
        self.difficulty, self.seed, self.rank, self.world_size = list(difficulty), int(seed), rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.difficulty) // self.world_size

    def __iter__(self) -> Iterator[int]:
        ties = torch.randperm(len(self.difficulty), generator=torch.Generator().manual_seed(self.seed + self.epoch))
        order = sorted(ties.tolist(), key=lambda i: self.difficulty[i])       # stable: ties keep the random order
        yield from order[self.rank:len(self) * self.world_size:self.world_size]


def curriculum_lines(n: int = 64, levels: int = 4, batch_size: int = 8, seed: int = 0) -> list[str]:
    """A curriculum sampler on `n` examples of `levels` difficulty levels, through a real DataLoader, on one process
    and on two ranks (chapter 2)."""
    difficulty = [i % levels for i in range(n)]
    lines = []
    loader = DataLoader(range(n), batch_size=batch_size, sampler=CurriculumSampler(difficulty, seed=seed))
    levels_per_batch = [sorted({difficulty[i] for i in batch.tolist()}) for batch in loader]
    lines.append(f"one process, {n} examples at levels 0-{levels - 1}, batches of {batch_size}: levels of each "
                 f"batch {levels_per_batch}")
    firsts = []
    for epoch in range(2):
        sampler = CurriculumSampler(difficulty, seed=seed)
        sampler.set_epoch(epoch)
        firsts.append(next(iter(DataLoader(range(n), batch_size=batch_size, sampler=sampler))).tolist())
    lines.append(f"first batch, epochs 0 and 1: {firsts[0]} / {firsts[1]}: all level 0 both times, in another order: "
                 f"{all(difficulty[i] == 0 for f in firsts for i in f) and firsts[0] != firsts[1]}")
    ranks = [[sorted({difficulty[i] for i in b.tolist()}) for b in
              DataLoader(range(n), batch_size=batch_size // 2, sampler=CurriculumSampler(difficulty, seed, r, 2))]
             for r in range(2)]
    seen = sorted(i for r in range(2) for i in CurriculumSampler(difficulty, seed, r, 2))
    lines.append(f"two ranks, batches of {batch_size // 2} each: rank 0 levels {ranks[0]}")
    lines.append(f"  rank 1 levels {ranks[1]}; the ranks at the same level at every step: {ranks[0] == ranks[1]}; "
                 f"every example once over both: {seen == list(range(n))}")
    return lines


def segmentation_weights(masks: torch.Tensor) -> torch.Tensor:
    """One weight per image of a segmentation set (chapter 2): for each class, 1 / (the number of images showing
    it); an image takes the largest weight among the classes it shows, so the images that hold a rare class are
    drawn about as often as those without it."""
    classes = int(masks.max()) + 1
    shows = torch.stack([(masks == c).flatten(1).any(1) for c in range(classes)], dim=1)    # (images, classes)
    per_class = 1.0 / shows.sum(0).clamp(min=1)
    return (shows * per_class).max(1).values.double()


def segmentation_sampler_lines(n: int = 400, rare_share: float = 0.1, size: int = 16, batch_size: int = 16,
                               batches: int = 300, seed: int = 0) -> list[str]:
    """A segmentation set whose class 2 appears in `rare_share` of the images (a small blob), drawn uniformly (with
    replacement, as many draws) and through a WeightedRandomSampler with per-image weights (chapter 2): images showing class 2 per batch, and class 2's
    share of the batches' pixels."""
    g = torch.Generator().manual_seed(seed)
    masks = (torch.rand(n, size, size, generator=g) > 0.5).long()               # classes 0 and 1 everywhere
    rare = torch.randperm(n, generator=g)[:int(n * rare_share)]
    masks[rare, :4, :4] = 2                                                      # class 2: a 4x4 blob, rare images
    weights = segmentation_weights(masks)
    lines = [f"{n} masks of {size}x{size}: class 2 in {len(rare)} images ({rare_share:.0%}), "
             f"{(masks == 2).float().mean().item():.2%} of all pixels"]
    for name, sampler in (("uniform draws", RandomSampler(range(n), replacement=True, num_samples=batch_size * batches,
                                                    generator=torch.Generator().manual_seed(seed))),
                          ("per-image weights", WeightedRandomSampler(weights, batch_size * batches, replacement=True,
                                                                      generator=torch.Generator().manual_seed(seed)))):
        drawn = torch.tensor(list(sampler))
        showing = (masks[drawn] == 2).flatten(1).any(1).float()
        lines.append(f"{name:<18}: images showing class 2 per batch of {batch_size}: "
                     f"{showing.mean().item() * batch_size:.1f}; class 2's share of the pixels drawn: "
                     f"{(masks[drawn] == 2).float().mean().item():.2%}")
    return lines
