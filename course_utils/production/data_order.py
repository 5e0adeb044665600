"""The data order (chapter 7): a shuffled order that depends only on (seed, epoch), so a run can resume mid-epoch.

Every epoch's order comes from torch's own DistributedSampler (one rank when alone): a permutation
drawn from a generator seeded with seed + epoch, padded and dealt out to the ranks. Resuming after
`position` micro-batches skips that many batches' indices; nothing depends on how many epochs the
process itself has run.

Random augmentation inside ``__getitem__`` (or a collate function) draws from the global generators
of whichever process loads the batch: a DataLoader worker, whose streams depend on which batches it
loaded before, so skipping batches on resume would change every draw after. ``SeededBatches`` makes
each batch's draws a function of (seed, epoch, the batch's indices) instead: torch's, NumPy's and
`random`'s global generators are seeded from that key before the batch is loaded and collated (and
put back afterwards in the main process). Resume is then exact without replaying anything, and the
numbers do not depend on the number of workers.
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import random
import signal
import struct
import sys
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, TensorDataset, default_collate, get_worker_info

VALIDATION = -1   # the "epoch" of validation batches: the same draws at every validation


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


def batch_key(seed: int, epoch: int, indices: list[int]) -> int:
    """A 64-bit seed for one batch: a hash of (seed, epoch, the batch's dataset indices)."""
    digest = hashlib.blake2b(struct.pack("<qq", seed, epoch), digest_size=8)
    digest.update(array("q", indices).tobytes())
    return int.from_bytes(digest.digest(), "little")


def _identity(batch: Any) -> Any:
    return batch


class SeededBatches(Dataset):
    """A dataset whose batches draw their random numbers from (seed, epoch, indices) (chapter 7).

    The DataLoader hands ``__getitems__`` a batch's indices; the global generators are seeded from
    ``batch_key``, the items are loaded and collated, and in the main process the generators are put
    back as they were (so training's own draws, e.g. dropout, are untouched).
    """

    def __init__(self, dataset: Dataset, seed: int, collate_fn: Callable[[list], Any] | None):
        self.dataset, self.seed, self.epoch = dataset, seed, VALIDATION
        self.collate_fn = collate_fn or default_collate

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]) -> Any:
        key = batch_key(self.seed, self.epoch, indices)
        main = get_worker_info() is None
        if main:
            saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
        torch.default_generator.manual_seed(key)
        np.random.seed(key >> 32)
        random.seed(key)
        try:
            fetch = getattr(self.dataset, "__getitems__", None)
            items = fetch(indices) if fetch else [self.dataset[i] for i in indices]
            return self.collate_fn(items)
        finally:
            if main:
                torch.set_rng_state(saved[0])
                np.random.set_state(saved[1])
                random.setstate(saved[2])


def draws_nothing(dataset: Dataset) -> bool:
    """True for datasets whose items are read, never drawn (a TensorDataset): no seeding needed."""
    return type(dataset) is TensorDataset


def seed_worker(worker_id: int) -> None:
    """Seed NumPy and `random` in a worker from the seed torch gave it."""
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


class WorkerStart:
    """worker_init_fn of the training loader: a worker that outlives its trainer exits, then seed_worker.

    A worker notices its trainer's death by its parent pid changing, measured from when the worker's loop starts
    (torch's ManagerWatchdog). A trainer SIGKILLed while its workers are starting (a checkpoint written as the
    next epoch's workers fork, then `kill -9`) leaves workers that measured the orphaned parent pid already: they
    wait for batches forever (600 MB each here). So a worker starts by asking the kernel for SIGKILL when the
    thread that forked it dies (Linux), then checks that its parent is still the process that built the loader.
    """

    def __init__(self) -> None:
        self.trainer = os.getpid()           # the loader is built in the process that iterates it (fit)

    def __call__(self, worker_id: int) -> None:
        die_with_parent()
        if os.getppid() != self.trainer:     # died before the request above: nothing will ever read this worker
            os._exit(0)
        seed_worker(worker_id)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the thread that forked it exits (prctl PR_SET_PDEATHSIG); elsewhere
    nothing."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)    # 1: PR_SET_PDEATHSIG


def _source(dataset: Dataset, seed: int, collate_fn, seeded: bool) -> tuple[Dataset, Callable]:
    """The dataset the loader reads and its collate function: seeded batches, or the dataset as it is."""
    if seeded:
        return SeededBatches(dataset, seed, collate_fn), _identity
    return dataset, collate_fn or default_collate


def train_loader(dataset: Dataset, sampler: ResumableSampler, batch_size: int, workers: int,
                 pin_memory: bool, seed: int, collate_fn=None, seeded: bool = False) -> DataLoader:
    """The training DataLoader: resumable sampler, seeded generator and workers, optionally seeded batches."""
    source, collate = _source(dataset, seed, collate_fn, seeded)
    return DataLoader(source, batch_size=batch_size, sampler=sampler, num_workers=workers, collate_fn=collate,
                      worker_init_fn=WorkerStart(), generator=torch.Generator().manual_seed(seed),
                      pin_memory=pin_memory, persistent_workers=False)


def start_epoch(loader: DataLoader, epoch: int, skip_batches: int, seed: int) -> None:
    """Position the loader at `skip_batches` micro-batches into `epoch` (0 at an epoch start)."""
    loader.sampler.start_epoch(epoch, skip_batches * loader.batch_size)
    loader.generator.manual_seed(seed + 7919 * (epoch + 1))   # workers' base seed: a function of the epoch
    if isinstance(loader.dataset, SeededBatches):
        loader.dataset.epoch = epoch                          # workers get a copy made when the epoch starts


def eval_loader(dataset: Dataset, batch_size: int, pin_memory: bool, seed: int = 0, collate_fn=None,
                seeded: bool = False) -> DataLoader:
    """The validation DataLoader: fixed order, its own generator (it never draws from the global RNG)."""
    source, collate = _source(dataset, seed, collate_fn, seeded)
    return DataLoader(source, batch_size=batch_size, shuffle=False, pin_memory=pin_memory, collate_fn=collate,
                      generator=torch.Generator().manual_seed(0))
