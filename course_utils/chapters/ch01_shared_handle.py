"""Chapter 1: a file a Dataset opens in ``__init__`` is shared by every forked worker, position included.

fork copies the process, and an open file is a file descriptor whose offset lives in the kernel, in one "open
file description" the parent and every forked child share. A Dataset that opens its file in ``__init__`` and
reads a record with ``seek`` then ``read`` works with ``num_workers=0``; with forked workers, one worker's
``seek`` moves the position another worker is about to ``read`` from, and records come back from the wrong place,
without an error. The fix is the one for spawn: keep the path in ``__init__`` and open the file on the first read,
so each worker opens its own. A library handle (LMDB's environment, an HDF5 file, a database connection) inherited
the same way shares more than an offset; the libraries' documentation says not to use it after fork (not run here).
Records: 64 little-endian int32 values, record i holding i; batches of 4, two workers, a 5 ms pause between each
``seek`` and its ``read`` (where a decoder would work), so that the workers' reads interleave.
"""
from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

RECORDS, PAUSE = 64, 0.005


class Records(Dataset):
    """Record i of a file of int32 values, read with seek + read. `open_in_init` opens the file in __init__ (one
    handle, inherited by forked workers); otherwise __getitem__ opens it on the first read (one per process)."""

    def __init__(self, path: Path, open_in_init: bool, pause: float = PAUSE):
        self.path, self.pause = Path(path), pause
        self.file = open(self.path, "rb", buffering=0) if open_in_init else None

    def __len__(self) -> int:
        return self.path.stat().st_size // 4

    def __getitem__(self, i: int) -> int:
        if self.file is None:
            self.file = open(self.path, "rb", buffering=0)
        self.file.seek(4 * i)
        time.sleep(self.pause)
        return int.from_bytes(self.file.read(4), "little")


def wrong_records(open_in_init: bool, num_workers: int = 2) -> int:
    """How many of the RECORDS records came back as another record, loaded in order by forked workers."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.bin"
        path.write_bytes(b"".join(i.to_bytes(4, "little") for i in range(RECORDS)))
        dataset = Records(path, open_in_init)
        loader = DataLoader(dataset, batch_size=4, num_workers=num_workers,
                            multiprocessing_context="fork" if num_workers else None)
        got = [v for batch in loader for v in torch.as_tensor(batch).tolist()]
        if dataset.file is not None:
            dataset.file.close()
    return sum(value != i for i, value in enumerate(got))


def shared_handle_lines() -> list[str]:
    if "fork" not in multiprocessing.get_all_start_methods():
        return ["this system cannot fork (Windows): its workers start by spawn, which cannot even send an open "
                "file to a worker (chapter 9's atlas shows the error)"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)       # Python 3.12+: fork in a process with threads
        shared = _shared_offset_after_fork()
        in_process = wrong_records(True, num_workers=0)
        inherited = wrong_records(True)
        own = wrong_records(False)
    return [f"a file opened before fork: the child's seek moved the parent's position too: {shared}",
            f"{RECORDS} records read with seek + read, file opened in __init__, num_workers=0: {in_process} wrong",
            f"the same, 2 forked workers sharing the handle: some records came back as others: {inherited > 0}",
            f"file opened on the first read in each worker: {own} of {RECORDS} wrong"]


def _shared_offset_after_fork() -> bool:
    """The kernel-level fact behind it: a child's seek moves the parent's position in a file opened before fork."""
    with tempfile.TemporaryFile(buffering=0) as f:
        f.write(bytes(100))
        f.seek(0)
        pid = os.fork()
        if pid == 0:
            f.seek(42)
            os._exit(0)
        os.waitpid(pid, 0)
        return f.tell() == 42


def _mapped_mib() -> dict[str, float] | None:
    """This process's Rss, Pss and Private_Dirty in MiB, from /proc/self/smaps_rollup (None off Linux)."""
    import re
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as rollup:
            text = rollup.read()
    except OSError:
        return None
    return {key: int(re.search(rf"^{key}:\s+(\d+) kB", text, re.M).group(1)) / 1024
            for key in ("Rss", "Pss", "Private_Dirty")}


class MappedArray(Dataset):
    """One item per worker: open a .npy file with np.load(mmap_mode="r") on the first read, read every value (a
    sum), wait until every worker has read it, and return how much this process's Rss, Pss and Private_Dirty
    grew meanwhile."""

    def __init__(self, path: str, workers: int):
        self.path, self.array = path, None
        self.barrier = multiprocessing.get_context("fork").Barrier(workers)

    def __len__(self) -> int:
        return self.barrier.parties

    def __getitem__(self, index: int):
        import numpy as np
        before = _mapped_mib()
        if self.array is None:
            self.array = np.load(self.path, mmap_mode="r")
        float(self.array.sum())
        self.barrier.wait(timeout=60)        # every worker has mapped the pages before anyone measures
        after = _mapped_mib()
        return None if before is None else {key: after[key] - before[key] for key in before}


def mapped_file_memory(mib: int = 64, workers: int = 2) -> list[dict[str, float]] | None:
    """Each of `workers` forked workers reads the whole of a `mib` MiB memory-mapped .npy file: what its Rss, Pss
    and Private_Dirty grew by (None off Linux, where /proc/self/smaps_rollup does not exist)."""
    import numpy as np
    if _mapped_mib() is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "features.npy")
        np.save(path, np.ones((mib, 2**17), dtype=np.float64))       # 2**17 float64 values = 1 MiB a row
        with open(path, "rb+") as written:      # written back to disk first: a dirty page mapped by one process
            os.fsync(written.fileno())          # alone counts as its Private_Dirty, as if the worker had written it
        loader = DataLoader(MappedArray(path, workers), batch_size=None, num_workers=workers,
                            multiprocessing_context="fork")
        return list(loader)


def mapped_file_lines(mib: int = 64, workers: int = 2) -> list[str]:
    grown = mapped_file_memory(mib, workers)
    if grown is None:
        return ["not measured here: this system has no /proc/self/smaps_rollup (Linux only)"]
    lines = [f"a {mib} MiB array opened with np.load(mmap_mode='r'), read whole by each of {workers} forked workers "
             f"(within 2 MiB):"]
    for worker, g in enumerate(grown):
        lines.append(f"  worker {worker}: Rss grew by the whole file: {abs(g['Rss'] - mib) <= 2} | Pss by 1/{workers} "
                     f"of it: {abs(g['Pss'] - mib / workers) <= 2} | Private_Dirty under 2 MiB: "
                     f"{g['Private_Dirty'] < 2}")
    lines.append(f"  Rss summed over the workers: about {workers * mib} MiB: "
                 f"{abs(sum(g['Rss'] for g in grown) - workers * mib) <= 2 * workers}; Pss summed: about {mib} MiB "
                 f"(the file, in memory once): {abs(sum(g['Pss'] for g in grown) - mib) <= 2 * workers}")
    return lines
