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
