"""Chapter 1: the Dataset -> Sampler -> BatchSampler -> collate trace, and a small on-disk dataset.

The trace is *recorded from a real DataLoader*: a sampler wrapper writes down every index the
sampler hands to the batch sampler, and the batches are what the loader itself yields.
"""
from __future__ import annotations

import inspect
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, Sampler, SequentialSampler, get_worker_info

from course_utils.atlas.runner import normalise_run
from course_utils.engine.data import make_spiral
from course_utils.infra.notebook import valid_seed


class IndexDataset(Dataset):
    """A dataset whose example i is just the number i, so a batch shows which indices it holds (chapter 1)."""

    def __init__(self, n: int):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return int(index)


class NumberStream(IterableDataset):
    """A stream of the numbers 0..n-1, in the order the stream chooses (chapter 1).

    With ``sharded=False`` every DataLoader worker runs its own copy of ``__iter__`` and streams all
    n numbers; with ``sharded=True`` worker w of W keeps only the numbers w, w + W, w + 2W, ...
    (``get_worker_info()`` says which worker is running, and is None in the main process).
    """

    def __init__(self, n: int, sharded: bool = False):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        self.n, self.sharded = n, sharded

    def __iter__(self) -> Iterator[int]:
        worker = get_worker_info()
        if not self.sharded or worker is None:
            return iter(range(self.n))
        return iter(range(worker.id, self.n, worker.num_workers))


class SizedNumberStream(NumberStream):
    """NumberStream that also reports its length, n examples, as many streaming datasets do (chapter 1)."""

    def __len__(self) -> int:
        return self.n


class RecordingSampler(Sampler[int]):
    """Wraps a sampler and records the indices it yields during the current pass (chapter 1)."""

    def __init__(self, inner: Sampler[int]):
        self.inner = inner
        self.record: list[int] = []

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[int]:
        self.record = []
        for index in self.inner:
            self.record.append(int(index))
            yield index


@dataclass(frozen=True)
class EpochTrace:
    """One epoch through the pipeline: the sampler's order, the batch sampler's groups, what collate made."""

    epoch: int
    sampler_order: list[int]          # every index the sampler produced, in order
    batches: list[list[int]]          # the batch sampler's groups (= the collated tensors, as lists)
    collated_shapes: list[tuple[int, ...]]
    skipped: list[int]                # indices the sampler produced that no batch holds (drop_last)


@dataclass(frozen=True)
class PipelineTrace:
    """What a DataLoader(IndexDataset(n), batch_size, shuffle, drop_last, generator=seed) yields, epoch by epoch."""

    n: int
    batch_size: int
    shuffle: bool
    drop_last: bool
    seed: int
    epochs: list[EpochTrace]

    @property
    def num_batches(self) -> int:
        return len(self.epochs[0].batches)

    @property
    def skipped_per_epoch(self) -> int:
        return len(self.epochs[0].skipped)

    @property
    def batch_sizes(self) -> list[int]:
        return [len(b) for b in self.epochs[0].batches]


def make_loader(n: int, batch_size: int, shuffle: bool, drop_last: bool, seed: int) -> tuple[DataLoader, RecordingSampler]:
    """The loader the trace records: exactly what DataLoader(shuffle=...) builds, with the sampler wrapped."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    dataset = IndexDataset(n)
    generator = torch.Generator().manual_seed(valid_seed(seed))
    inner = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    sampler = RecordingSampler(inner)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                        generator=generator, num_workers=0)
    return loader, sampler


class PipelineRecorder:
    """One DataLoader, kept: each next_epoch() records one more pass (work per click does not grow with epochs)."""

    def __init__(self, n: int = 100, batch_size: int = 16, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0):
        self.loader, self.sampler = make_loader(n, batch_size, shuffle, drop_last, seed)
        self.n, self.batch_size, self.shuffle, self.drop_last, self.seed = n, batch_size, shuffle, drop_last, seed
        self.epochs: list[EpochTrace] = []

    def next_epoch(self) -> EpochTrace:
        """Iterate the same loader once more (its generator moves on, so a new order with shuffle)."""
        collated = list(self.loader)
        batches = [t.tolist() for t in collated]
        order = list(self.sampler.record)
        kept = {i for b in batches for i in b}
        trace = EpochTrace(len(self.epochs) + 1, order, batches, [tuple(t.shape) for t in collated],
                           [i for i in order if i not in kept])
        self.epochs.append(trace)
        return trace

    @property
    def trace(self) -> PipelineTrace:
        return PipelineTrace(self.n, self.batch_size, self.shuffle, self.drop_last, self.seed, list(self.epochs))


def trace_pipeline(n: int = 100, batch_size: int = 16, shuffle: bool = True, drop_last: bool = False,
                   seed: int = 0, epochs: int = 1) -> PipelineTrace:
    """Run a real DataLoader for `epochs` epochs and record each stage (chapter 1)."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    recorder = PipelineRecorder(n, batch_size, shuffle, drop_last, seed)
    for _ in range(epochs):
        recorder.next_epoch()
    return recorder.trace


def dataloader_defaults() -> dict[str, object]:
    """DataLoader's keyword defaults, read from its real signature (chapter 1)."""
    params = inspect.signature(DataLoader.__init__).parameters
    return {name: p.default for name, p in params.items()
            if name not in ("self", "dataset") and p.default is not inspect.Parameter.empty}


# --- an on-disk dataset ---------------------------------------------------------------------------

class OnDiskDataset(Dataset):
    """One .pt file per example, read in __getitem__ (chapter 1); `decode_ms` mimics costly decoding."""

    def __init__(self, folder: str | Path, decode_ms: float = 0.0):
        self.folder = Path(folder)
        self.files = sorted(self.folder.glob("example_*.pt"))
        if not self.files:
            raise ValueError(f"no example_*.pt files in {self.folder}")
        self.decode_ms = float(decode_ms)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        record = torch.load(self.files[index], weights_only=True)
        if self.decode_ms > 0:  # stands in for JPEG decoding, augmentation, tokenising...
            time.sleep(self.decode_ms / 1000)
        return record["x"], record["y"]


def write_on_disk_dataset(folder: str | Path, n: int = 200, seed: int = 0) -> Path:
    """Write n spiral examples as example_00000.pt ... into `folder` (chapter 1); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    x, y = make_spiral(n, seed=seed).tensors
    for i in range(n):
        torch.save({"x": x[i].clone(), "y": y[i].clone()}, folder / f"example_{i:05d}.pt")
    return folder


def time_one_epoch(dataset: Dataset, num_workers: int, batch_size: int = 16, repeats: int = 1) -> float:
    """Seconds to iterate one epoch, worker start-up included; best of `repeats` (chapter 1)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
        for _batch in loader:
            pass
        best = min(best, time.perf_counter() - start)
    return best


def try_spawned_workers(dataset: Dataset, batch_size: int = 2) -> tuple[str, str]:
    """Load one batch with a *spawned* worker (chapter 1): (what the notebook cell sees, what the worker's error says).

    A spawned worker is a fresh interpreter that must import the dataset's class; a class defined in a
    notebook lives in __main__ and cannot be imported. The worker's traceback goes to file descriptor 2,
    which is captured here. Both are reported as conclusions (the exception's type, whether the worker's
    error names the class and __main__); the worker's error text itself is Python's, worded its own way by each
    release. What the cell sees is torch's message, the pid replaced.
    """
    import os
    import tempfile
    import threading

    threads_before = set(threading.enumerate())
    with tempfile.TemporaryFile() as err_file:
        saved = os.dup(2)
        os.dup2(err_file.fileno(), 2)
        try:
            next(iter(DataLoader(dataset, batch_size=batch_size, num_workers=1, multiprocessing_context="spawn")))
            seen = "the batch loaded"
        except RuntimeError as err:        # torch's own words, the worker's pid replaced (it changes every run)
            seen = f"RuntimeError: {normalise_run(str(err))}"
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err_file.seek(0)
        text = err_file.read().decode("utf-8", "replace")
    _stop_resource_tracker(set(threading.enumerate()) - threads_before)
    return seen, worker_error_conclusion(text, type(dataset).__name__)


def _stop_resource_tracker(new_threads: set) -> None:
    """Stop the resource tracker that starting a spawned worker launched in this process (it would run to the end).

    The tracker ignores SIGINT and SIGTERM, so a Jupyter kernel shutting down waits for it before killing it:
    chapter 1's kernel took 2.6 s to shut down instead of 0.3 (measured). The loader's queues must let go of their
    semaphores first, or the last one freed starts a new tracker that does not know it (and prints a KeyError):
    their feeder threads (`new_threads`) hold two each until they end. `_stop` is CPython's own (3.11 to 3.13),
    used by its tests; without it nothing is done. multiprocessing starts a tracker again whenever one is needed.
    """
    import gc
    from multiprocessing import resource_tracker

    for thread in new_threads:
        thread.join(timeout=2.0)
    gc.collect()
    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None and not any(thread.is_alive() for thread in new_threads):
        stop()


def without_colour(text: str) -> str:
    """Text a Python process wrote to stderr, without the ANSI colour codes Python 3.13 may add to tracebacks."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def worker_error_conclusion(stderr: str, class_name: str) -> str:
    """What a worker's traceback says (chapter 1): its last exception's type and whether it cannot find the class.

    Python words (and since 3.13 may colour) the message its own way per release, so only this conclusion is shown.
    """
    text = without_colour(stderr)
    errors = re.findall(r"^\s*(\w+(?:Error|Exception)):(.*)$", text, flags=re.M)
    if not errors:
        return "(the worker printed no error)"
    kind, message = errors[-1]
    if class_name in message and "__main__" in message:
        return f"{kind}: it cannot find {class_name} in __main__"
    return f"{kind}, not about {class_name} in __main__"
