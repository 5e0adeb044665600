"""Chapter 7: one seed on every rank, measured where it matters: the random augmentations of DataLoader workers.

Each rank of a plain DDP loop is its own process that calls ``torch.manual_seed(seed)`` at start. A DataLoader
draws its workers' base seed from that global generator when its iterator starts, so with one seed on every rank
the workers of every rank are seeded alike, and each rank's k-th example gets the same random draw as every other
rank's k-th example, although the examples differ. The ranks are run here one after another in this process, each
from the state its own process would start from (``torch.manual_seed`` of its seed); a random draw in
``__getitem__`` stands for an augmentation (a flip, a crop, noise).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Augmented(Dataset):
    """`n` examples; each item is (its index, a uniform draw from the loading process's torch generator)."""

    def __init__(self, n: int = 32):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[int, float]:
        return index, torch.rand(()).item()


@dataclass(frozen=True)
class RankDraws:
    """What each rank's loader produced in one epoch: the examples it loaded and the draws they got, in order."""

    indices: tuple[tuple[int, ...], ...]          # one tuple per rank
    draws: tuple[tuple[float, ...], ...]

    def shared_examples(self) -> int:
        """Examples loaded by more than one rank (a DistributedSampler shard is disjoint up to its padding)."""
        seen = [set(r) for r in self.indices]
        return len(set.intersection(*seen))

    def same_draws(self) -> int:
        """Positions k at which every rank's k-th example got the same random draw."""
        return sum(len(set(column)) == 1 for column in zip(*self.draws))

    @property
    def positions(self) -> int:
        return min(len(d) for d in self.draws)


def rank_draws(seed_of_rank: Callable[[int, int], int], world_size: int = 2, seed: int = 0, n: int = 32,
               batch_size: int = 4, num_workers: int = 2) -> RankDraws:
    """One epoch on every rank, each rank's process seeded with seed_of_rank(seed, rank) (chapter 7)."""
    data = Augmented(n)
    indices, draws = [], []
    with torch.random.fork_rng():
        for rank in range(world_size):
            torch.manual_seed(seed_of_rank(seed, rank))       # what the rank's own process does at start
            sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
            loader = DataLoader(data, batch_size=batch_size, sampler=sampler, num_workers=num_workers)
            got = [(int(i), float(v)) for idx, val in loader for i, v in zip(idx, val)]
            indices.append(tuple(i for i, _ in got))
            draws.append(tuple(v for _, v in got))
    return RankDraws(tuple(indices), tuple(draws))


SEEDINGS: dict[str, Callable[[int, int], int]] = {
    "the same seed on every rank": lambda seed, rank: seed,
    "seed + rank": lambda seed, rank: seed + rank,
}


def rank_seed_lines(seeds=range(3), **kwargs) -> list[str]:
    """Chapter 7's measurement, one line per seeding, counted over `seeds`."""
    lines = []
    for name, seeding in SEEDINGS.items():
        runs = [rank_draws(seeding, seed=s, **kwargs) for s in seeds]
        lines.append(f"{name:<28} examples shared by the ranks: {sum(r.shared_examples() for r in runs)}; "
                     f"positions with the same augmentation on every rank: "
                     f"{sum(r.same_draws() for r in runs)} of {sum(r.positions for r in runs)}")
    return lines
