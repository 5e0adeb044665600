"""Chapter 1: what a loader that cannot keep up looks like from the loop. Each of k workers builds a whole batch;
when building one takes longer than a training step, the k workers finish their batches at about the same time,
the loop takes them one after another at once, and then waits for the next round: batches arrive in bursts of
k with a pause of about one batch's loading time between bursts. Measured with a dataset that sleeps per
example (standing in for reading and decoding an image) and a loop that does nothing with the batch (a fast GPU).
The workers begin loading together, at a moment set when the loader is made (their worker_init_fn waits for it): a
machine busy with other work forks them tens of milliseconds apart, which would stagger their batches and blur the
rhythm this measures. The dataset lives here so that workers, forked or spawned, can import it.
"""
from __future__ import annotations

import functools
import time
import warnings

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    """`size` examples, each taking `seconds` to load."""

    def __init__(self, size: int, seconds: float):
        self.size, self.seconds = size, seconds

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(self.seconds)
        return torch.tensor([float(index)])


START_S = 1.0       # how long after the loader is made its workers begin loading (every fork done by then)


def _start_together(at: float, worker_id: int) -> None:
    """A worker_init_fn: wait until `at` (time.time()), however late this worker was forked."""
    time.sleep(max(0.0, at - time.time()))


def arrival_gaps(num_workers: int = 4, batches: int = 12, batch_size: int = 4, seconds: float = 0.1) -> list[float]:
    """Seconds the loop waited before each batch after the first (the first wait includes starting the workers)."""
    gaps, last = [], None
    together = functools.partial(_start_together, time.time() + START_S) if num_workers else None
    with warnings.catch_warnings():     # torch warns when workers outnumber cores; these sleep, they do not compute
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        loader = DataLoader(SlowDataset(batches * batch_size, seconds), batch_size=batch_size, num_workers=num_workers,
                            worker_init_fn=together)
        for _batch in loader:
            now = time.perf_counter()
            if last is not None:
                gaps.append(now - last)
            last = now
    return gaps


def rhythm_lines(num_workers: int = 4, batches: int = 12, batch_size: int = 4, seconds: float = 0.1) -> list[str]:
    """Chapter 1's cell: which waits were long (more than half a batch's loading time), read as a pattern."""
    load = batch_size * seconds
    gaps = arrival_gaps(num_workers, batches, batch_size, seconds)
    long = [i + 2 for i, gap in enumerate(gaps) if gap > load / 2]          # batch numbers, counted from 1
    return [f"{num_workers} workers, a batch of {batch_size} takes {load:g} s to load, the loop takes no time: "
            f"{batches} batches",
            f"long waits (over {load / 2:g} s) before batches {long}, numbered from 1 (the first batch's wait, which "
            f"includes starting the workers, is not counted); all the others came at once",
            f"so the loop waited {len(long)} times for a round of {num_workers} batches: the loader is the "
            f"bottleneck, and the GPU idles during each wait"]
