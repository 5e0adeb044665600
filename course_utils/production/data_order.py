"""The data order (chapter 7): a shuffled order that depends only on (seed, epoch), so a run can resume mid-epoch.

Every epoch's order comes from torch's own DistributedSampler (one rank when alone): a permutation
drawn from a generator seeded with seed + epoch, padded and dealt out to the ranks. Resuming after
`position` micro-batches skips that many batches' indices; nothing depends on how many epochs the
process itself has run. The loader's own generator (it draws the workers' base seed) is re-seeded
each epoch for the same reason, and each worker seeds NumPy and `random` from its torch seed.
"""
from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class ResumableSampler(DistributedSampler):
    """DistributedSampler whose epoch can start after `skip` indices (a mid-epoch resume)."""

    def __init__(self, dataset: Dataset, world_size: int, rank: int, seed: int):
        super().__init__(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=False)
        self.skip = 0

    def start_epoch(self, epoch: int, skip: int = 0) -> None:
        """The order of `epoch`, starting after its first `skip` indices."""
        self.set_epoch(epoch)
        self.skip = skip

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(super().__iter__(), self.skip, None)

    def __len__(self) -> int:
        return self.num_samples - self.skip


def seed_worker(worker_id: int) -> None:
    """worker_init_fn: seed NumPy and `random` in a worker from the seed torch gave it."""
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def train_loader(dataset: Dataset, sampler: ResumableSampler, batch_size: int, workers: int,
                 pin_memory: bool, seed: int) -> DataLoader:
    """The training DataLoader: resumable sampler, seeded generator and workers."""
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      worker_init_fn=seed_worker, generator=torch.Generator().manual_seed(seed),
                      pin_memory=pin_memory, persistent_workers=False)


def start_epoch(loader: DataLoader, epoch: int, skip_batches: int, seed: int) -> None:
    """Position the loader at `skip_batches` micro-batches into `epoch` (0 at an epoch start)."""
    loader.sampler.start_epoch(epoch, skip_batches * loader.batch_size)
    loader.generator.manual_seed(seed + 7919 * (epoch + 1))   # workers' base seed: a function of the epoch


def eval_loader(dataset: Dataset, batch_size: int, pin_memory: bool) -> DataLoader:
    """The validation DataLoader: fixed order, its own generator (it never draws from the global RNG)."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, pin_memory=pin_memory,
                      generator=torch.Generator().manual_seed(0))
