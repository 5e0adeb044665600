"""Counting host reads (chapters 5 and 7): every way a tensor's value reaches Python, each a sync on a GPU."""
from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import torch

# .item(), .tolist(), .numpy(), and Python's bool(), float(), int() and indexing by a tensor
READS = ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__")


class HostReads(Counter):
    """Reads by kind; `paused()` leaves a stretch out of the count (validation, say)."""

    def __init__(self):
        super().__init__()
        self.depth = 0

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


@contextmanager
def counting_host_reads() -> Iterator[HostReads]:
    """Count, by kind, the reads of a tensor's value made on this thread while the block runs (other threads' reads,
    such as a checkpoint writer's, are not counted). A read from inside another read counts once."""
    counts = HostReads()
    caller = threading.get_ident()
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def counted(name, original):
        def read(self, *args, **kwargs):
            if threading.get_ident() != caller:
                return original(self, *args, **kwargs)
            if counts.depth == 0:
                counts[name] += 1
            with counts.paused():
                return original(self, *args, **kwargs)
        return read

    for name, original in originals.items():
        setattr(torch.Tensor, name, counted(name, original))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
