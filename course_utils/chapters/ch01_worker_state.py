"""Chapter 1: a worker holds its own copy of the dataset. What the main process changes on the dataset after a
worker started (``dataset.set_epoch(epoch)``, a curriculum stage, a new augmentation strength) never reaches that
worker. Workers started afresh every epoch copy the dataset again and so see the change; persistent workers keep
the copy from their start, so every epoch repeats the first. A value in shared memory reaches them all.

The datasets live here, in an importable module, so that spawned workers can import them too.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset


class EpochDataset(Dataset):
    """Each example reports the epoch its copy of the dataset believes it is (what a seeded per-epoch
    augmentation or sampling mapping would be drawn from)."""

    def __init__(self, size: int = 8, shared: bool = False):
        self.size = size
        self.shared = shared
        self.epoch = torch.zeros((), dtype=torch.long).share_memory_() if shared else 0

    def set_epoch(self, epoch: int) -> None:
        if self.shared:
            self.epoch.fill_(epoch)           # writes into the one block of shared memory every worker maps
        else:
            self.epoch = epoch                # rebinds an attribute of this process's copy only

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return int(self.epoch)


def epochs_seen(num_workers: int, persistent: bool, shared: bool = False, epochs: int = 3,
                context: str | None = None) -> list[list[int]]:
    """Call set_epoch(e) before each of `epochs` epochs; per epoch, the epochs the examples were drawn for."""
    data = EpochDataset(shared=shared)
    loader = DataLoader(data, batch_size=4, num_workers=num_workers, persistent_workers=persistent and num_workers > 0,
                        multiprocessing_context=context if num_workers else None)
    seen = []
    for epoch in range(epochs):
        data.set_epoch(epoch)
        seen.append(sorted({int(v) for batch in loader for v in batch}))
    return seen


def worker_state_lines(epochs: int = 3) -> list[str]:
    """Chapter 1's cell: the epoch each loader's examples saw, for each way of holding it."""
    rows = [("num_workers=0", 0, False, False), ("num_workers=2, workers started every epoch", 2, False, False),
            ("num_workers=2, persistent_workers=True", 2, True, False),
            ("num_workers=2, persistent, epoch in shared memory", 2, True, True)]
    return [f"{name:50} set_epoch(0..{epochs - 1}) -> epochs the examples saw: "
            f"{[s[0] if len(s) == 1 else s for s in epochs_seen(n, p, shared, epochs)]}"
            for name, n, p, shared in rows]
