"""Chapter 1: DataLoader workers in real use. A script's ``if __name__ == "__main__":`` guard, a worker that hangs,
dies or raises, and a random generator the dataset holds, copied into every worker.

The datasets live here, in an importable module, so that workers started by spawn can import them too.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from course_utils.chapters.ch01_pipeline import without_colour

# --- the main guard -----------------------------------------------------------------------------------------

_SCRIPT = '''\
import multiprocessing as mp


def square(x):
    print("child computed", x * x)

{body}'''

_BODY = '''\
process = mp.get_context("spawn").Process(target=square, args=(3,))
process.start()
process.join()
print("exit code", process.exitcode)'''


@dataclass(frozen=True)
class ScriptRun:
    """What a script that starts a spawned process printed, and the type of the error its child raised."""

    guarded: bool
    printed: list[str]
    child_error: str        # the exception type named on the child's traceback's last line ('' when none)


def run_spawn_script(guarded: bool) -> ScriptRun:
    """Run a small script that starts one spawned process, with or without the main guard (chapter 1).

    DataLoader workers are processes of this same kind: with spawn (and forkserver) each one first re-runs the
    script's top level as ``__mp_main__``, so an unguarded start of workers runs again inside every worker.
    """
    body = "if __name__ == \"__main__\":\n" + textwrap.indent(_BODY, "    ") if guarded else _BODY
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(_SCRIPT.format(body=body))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp)
    return ScriptRun(guarded, done.stdout.split("\n")[:-1], child_error_type(done.stderr))


def child_error_type(stderr: str) -> str:
    """The exception type on a traceback's last unindented line ('' when none), whatever colours Python added."""
    last = [line for line in without_colour(stderr).splitlines() if line and not line.startswith(" ")]
    return last[-1].split(":")[0] if last else ""


# --- workers that hang, die or raise -----------------------------------------------------------------------

class SlowDataset(Dataset):
    """Four numbers; loading example `slow_index` takes `seconds` (a stuck file system, a network read)."""

    def __init__(self, slow_index: int = 0, seconds: float = 1.0):
        self.slow_index, self.seconds = slow_index, seconds

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.slow_index:
            time.sleep(self.seconds)
        return torch.tensor(float(i))


class DyingDataset(Dataset):
    """Four numbers; loading example 1 kills the worker process (as the out-of-memory killer would)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 1 and get_worker_info() is not None:
            os._exit(1)
        return torch.tensor(float(i))


class MissingKeyDataset(Dataset):
    """Four examples looked up in a dict that lacks key 2: a bug in the dataset's own code."""

    def __init__(self):
        self.table = {0: 0.0, 1: 1.0, 3: 3.0}

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(self.table[i])


@dataclass(frozen=True)
class WorkerOutcome:
    """What the training loop saw when a worker misbehaved."""

    case: str
    error: str              # the exception type the loop got ('' when it got its batches)
    seconds: float          # how long the loop waited
    detail: str             # one fact about it, in the course's words


def worker_outcomes(slow_seconds: float = 0.5, timeout: float = 0.1) -> list[WorkerOutcome]:
    """One worker hangs (no timeout, then timeout=), one dies, one raises: what the loop sees (chapter 1)."""
    out = []

    def attempt(case: str, loader: DataLoader, detail) -> None:
        start = time.perf_counter()
        batches = iter(loader)
        try:
            error, text = "", str([b.tolist() for b in batches])
        except Exception as exc:  # noqa: BLE001 - the point is which exception arrives
            error, text = type(exc).__name__, str(exc)
        finally:   # stop the worker now: left to the garbage collector, a failed iterator's shutdown waits 5 s
            shutdown = getattr(batches, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
        out.append(WorkerOutcome(case, error, time.perf_counter() - start, detail(error, text)))

    attempt("slow worker, timeout=0 (the default)",
            DataLoader(SlowDataset(0, slow_seconds), batch_size=2, num_workers=1),
            lambda e, t: f"got every batch: {not e}")
    attempt(f"slow worker, timeout={timeout}",
            DataLoader(SlowDataset(0, slow_seconds), batch_size=2, num_workers=1, timeout=timeout),
            lambda e, t: f"the message names the timeout: {'timed out' in t}")
    attempt("a worker killed", DataLoader(DyingDataset(), batch_size=2, num_workers=1),
            lambda e, t: f"the message says a worker exited unexpectedly: {'exited unexpectedly' in t}")
    attempt("a bug in __getitem__", DataLoader(MissingKeyDataset(), batch_size=2, num_workers=1),
            lambda e, t: f"the message names the worker it came from: {'worker process 0' in t}")
    return out


# --- a generator the dataset holds -------------------------------------------------------------------------

class NoisyDataset(Dataset):
    """n examples, each a random number from the dataset's own NumPy generator (random augmentation) or np.random."""

    def __init__(self, n: int = 8, own_generator: bool = True, seed: int = 0):
        self.n, self.own = n, own_generator
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> float:
        return float(self.rng.random() if self.own else np.random.random())


class AugmentedRange(Dataset):
    """n examples (i, a random number from torch's global generator): random augmentation in __getitem__ (chapter 1)."""

    def __init__(self, n: int = 8):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[int, float]:
        return i, torch.rand(()).item()


def reseed_dataset_generator(worker_id: int) -> None:
    """A worker_init_fn: give this worker's copy of the dataset its own generator, from the worker's seed (chapter 1)."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


@dataclass(frozen=True)
class WorkerDraws:
    """Two epochs of a NoisyDataset through 2 workers: what each worker drew."""

    epochs: list[dict[int, list[float]]]      # per epoch: worker id -> its batches, flattened

    @property
    def workers_agree(self) -> bool:
        return self.epochs[0][0] == self.epochs[0][1]

    @property
    def epochs_agree(self) -> bool:
        return len(self.epochs) > 1 and self.epochs[0] == self.epochs[1]


def worker_draws(own_generator: bool, init_fn: bool, seed: int | None = 0, epochs: int = 2) -> WorkerDraws:
    """`epochs` epochs, 2 workers, batches of 2 from a NoisyDataset of 8 (chapter 1); the loader's generator
    seeded with `seed`, or (None) no generator at all: torch then draws the workers' base seed from its global RNG."""
    loader = DataLoader(NoisyDataset(8, own_generator), batch_size=2, num_workers=2,
                        worker_init_fn=reseed_dataset_generator if init_fn else None,
                        generator=None if seed is None else torch.Generator().manual_seed(seed))
    record = []
    for _ in range(epochs):
        drawn: dict[int, list[float]] = {0: [], 1: []}
        for k, batch in enumerate(loader):        # with in_order=True, batch k comes from worker k % 2
            drawn[k % 2] += [round(float(v), 6) for v in batch]
        record.append(drawn)
    return WorkerDraws(record)


# --- workers started every epoch, or once -------------------------------------------------------------------

def _note_start(folder: str, worker_id: int) -> None:
    """worker_init_fn: leave one file per worker process started (its pid), for the parent to count."""
    Path(folder, f"{os.getpid()}-{time.monotonic_ns()}").touch()     # a pid reused later still counts apart


def worker_starts(persistent: bool, epochs: int = 3, num_workers: int = 2) -> int:
    """How many worker processes a DataLoader starts over `epochs` epochs, with or without persistent_workers
    (chapter 1). Each start pays the process's start-up and, under spawn, unpickles the whole dataset."""
    import functools
    data = torch.arange(64.0).reshape(32, 2)
    with tempfile.TemporaryDirectory() as folder:
        loader = DataLoader(data, batch_size=8, num_workers=num_workers, persistent_workers=persistent,
                            worker_init_fn=functools.partial(_note_start, folder))
        for _ in range(epochs):
            for _batch in loader:
                pass
        del loader                                     # persistent workers end with their loader
        return len(os.listdir(folder))


# --- torch's threads in a worker ----------------------------------------------------------------------------

class _Threads(Dataset):
    """Each example is the number of threads torch's own operations may use where __getitem__ runs."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        return torch.get_num_threads()


def threads_where_loaded(num_workers: int = 2) -> dict[str, object]:
    """torch.get_num_threads() inside __getitem__ with and without workers, and in the main process after
    (chapter 1): the DataLoader sets one thread in each worker, so k workers do not start k x cores threads."""
    main = torch.get_num_threads()
    seen = {k: sorted({int(n) for batch in DataLoader(_Threads(), batch_size=2, num_workers=k) for n in batch})
            for k in (0, num_workers)}
    return {"num_workers=0: __getitem__ runs with the main process's threads": seen[0] == [main],
            f"num_workers={num_workers}: torch threads inside each worker": seen[num_workers],
            "the main process's thread count afterwards: unchanged": torch.get_num_threads() == main}


# --- memory a forked worker copies by reading ---------------------------------------------------------------

class _Items(Dataset):
    """A dataset over any indexable: a list of Python objects or a NumPy array."""

    def __init__(self, items):
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


def _private_mib(batch) -> float:
    """collate_fn run in the worker: the memory this process has written to since the fork, MiB: Linux's
    Private_Dirty (a page the parent rewrites also turns private in the worker, but clean: the parent's activity,
    not the worker's reads). Elsewhere, psutil's USS (pages no other process shares)."""
    import re
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as status:
            return int(re.search(r"Private_Dirty:\s+(\d+) kB", status.read()).group(1)) / 1024
    except (OSError, AttributeError):
        import psutil
        return psutil.Process().memory_full_info().uss / 2**20


def copy_on_read(n: int = 500_000) -> dict[str, float]:
    """Private memory one forked worker gains by reading every item once, MiB: a list of n Python floats and
    the same numbers in one NumPy array (chapter 1). Reading a Python object writes its reference count, so the
    page holding it is copied into the worker; an array's numbers are read without a write."""
    import gc
    grown = {}
    for kind, items in (("list", [float(i) for i in range(n)]), ("array", np.arange(n, dtype=np.float64))):
        loader = DataLoader(_Items(items), batch_size=n // 10, num_workers=1, collate_fn=_private_mib,
                            multiprocessing_context="fork")
        gc.collect()
        gc.freeze()        # the parent's objects out of the collector's reach: a collection in the worker would
        try:               # write to them too (another copy, measured apart from what reading does)
            seen = list(loader)                        # the worker's private memory after each tenth it read
        finally:
            gc.unfreeze()
        grown[kind] = seen[-1] - seen[0]
    return grown
