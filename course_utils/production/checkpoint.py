"""Checkpoints that survive a crash (chapter 7): durable atomic writes, a checksum written last, safe loading.

A checkpoint is one dict of tensors and plain Python values, serialised once in memory and written
with ``storage.atomic_write_bytes`` (temp file in the same folder, fsync, ``os.replace``) as
``NAME.pt``; then its SHA-256 goes, the same way, to ``NAME.pt.sha256``, and one fsync of the folder
makes both renames durable. The sidecar is written last, so a checkpoint without one, or whose bytes
do not match it, is incomplete or damaged (whichever of the two renames a power cut kept).
Loading checks the checksum *before* unpickling anything and then uses
``torch.load(weights_only=True)`` with no allowlist: a pickle that would run code is refused.

Names sort by position in the run: ``last-e0003-s000012.pt`` was taken in epoch 3 (0-based) after 12
micro-batches; ``last-e0004-s000000.pt`` at the end of epoch 3. ``best-...`` holds the best
validation so far: the same state as the 'last' file of that moment, so it is that file's second name
(a hard link, where the file system has them), not a second copy. Old files are pruned only after
the new pair is complete.

The training thread serialises the state into memory (a copy: training may then change the tensors);
``BackgroundWriter`` checksums and writes the bytes on a thread while training goes on. That thread
needs almost no GIL (hashing, writing and fsync release it), so it does not hold training back.
Writes go one at a time, in order; a kill during one leaves the previous checkpoints untouched,
exactly as a kill during a write in the training thread would.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import pickle
import re
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from course_utils.infra.storage import atomic_link, atomic_write_bytes, atomic_write_text, set_aside

NAME = re.compile(r"^(last|best)-e(\d{4,})-s(\d{6,})\.pt$")


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message is one line and names the file."""


class IncompleteCheckpointError(CheckpointError):
    """A checkpoint whose checksum file was never written: the run stopped while saving it."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint whose pickle would import or run code: refused, never loaded."""


def checkpoint_name(kind: str, epoch: int, position: int) -> str:
    """`last-e0003-s000012.pt`: kind, 0-based epoch, micro-batches done in that epoch."""
    return f"{kind}-e{epoch:04d}-s{position:06d}.pt"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _position(path: Path) -> tuple[int, int, int]:
    kind, epoch, position = NAME.match(path.name).groups()
    return int(epoch), int(position), int(kind == "last")   # at equal positions prefer a 'last' file


def checkpoint_files(folder: str | Path, kind: str | None = None) -> list[Path]:
    """The checkpoint files in `folder` (sidecars aside), newest position first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if NAME.match(p.name) and (kind is None or p.name.startswith(kind))]
    return sorted(found, key=_position, reverse=True)


def serialize(state: dict[str, Any]) -> memoryview:
    """The bytes torch.save writes for `state` (a view of the buffer torch wrote them to: no second copy)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getbuffer()


def write_checkpoint(folder: str | Path, name: str, payload: bytes | memoryview) -> Path:
    """Write `payload` as folder/name durably, then its checksum (last); returns the path (chapter 7)."""
    path = Path(folder) / name
    atomic_write_bytes(path, payload, sync_folder=False)        # its rename is made durable with the checksum's
    atomic_write_text(_sidecar(path), f"sha256 {hashlib.sha256(payload).hexdigest()} {len(payload)}\n")
    return path


class BackgroundWriter:
    """Writes checkpoints in order on one thread while training goes on (chapter 7).

    ``submit(job, size)`` queues a write of `size` bytes and returns at once, unless the writes already
    waiting hold `budget` bytes: then training waits for the disk (with durable writes, a disk slower
    than the checkpoint cadence has to hold training back somewhere; one write always may wait). Every
    job is written, in order; ``wait()`` returns once all are on disk and raises what a write raised (so
    does the next ``submit``). The thread lives while there is work and for `idle` seconds after.
    """

    def __init__(self, finish: Callable[[], None] = lambda: None, budget: int = 256 * 2**20, idle: float = 2.0):
        self.finish, self.budget, self.idle = finish, budget, idle   # finish: after each write (pruning)
        self.ready = threading.Condition()
        self.pending: list[tuple[Callable[[], None], int]] = []      # the one being written comes first
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def submit(self, job: Callable[[], None], size: int = 0) -> None:
        """Queue `job`; wait first while the queued writes hold `budget` bytes."""
        with self.ready:
            while (self.pending and sum(n for _, n in self.pending) + size > self.budget
                   and self.error is None):
                self.ready.wait()
            self._raise()
            self.pending.append((job, size))
            self.ready.notify_all()
            if self.thread is None:
                self.thread = threading.Thread(target=self._serve, name="checkpoint-writer", daemon=True)
                self.thread.start()

    def _serve(self) -> None:
        while True:
            with self.ready:
                if not self.pending and not self.ready.wait_for(lambda: self.pending, timeout=self.idle):
                    self.thread = None                   # idle: the next submit starts a new thread
                    return
                job = self.pending[0][0]
            try:
                if self.error is None:
                    job()
                    self.finish()
            except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()/submit()
                self.error = exc
            with self.ready:
                self.pending.pop(0)
                self.ready.notify_all()

    def wait(self) -> None:
        """Block until every queued write is on disk; raise what a write raised."""
        with self.ready:
            self.ready.wait_for(lambda: not self.pending)
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error


def copy_checkpoint(folder: str | Path, name: str, new_name: str, payload: bytes | memoryview) -> Path:
    """The checkpoint `name` under a second name: hard links (no bytes written twice), else a durable copy."""
    folder = Path(folder)
    source, path = folder / name, folder / new_name
    if atomic_link(source, path, sync_folder=False) and atomic_link(_sidecar(source), _sidecar(path)):
        return path
    return write_checkpoint(folder, new_name, payload)


def prune(folder: str | Path, kind: str, keep: int) -> list[Path]:
    """Delete all but the newest `keep` complete files of `kind`; call only after a new one is complete."""
    removed = []
    for path in checkpoint_files(folder, kind)[keep:]:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()          # the checkpoint first: a lone sidecar is ignored, a lone .pt looks damaged
        with contextlib.suppress(FileNotFoundError):
            _sidecar(path).unlink()
        removed.append(path)
    return removed


def remove_unfinished(folder: str | Path) -> int:
    """Delete temporary files a killed writer left behind (`NAME.pt.XXXX.tmp`); returns how many."""
    folder = Path(folder)
    count = 0
    for path in folder.glob("*.pt*.tmp") if folder.is_dir() else []:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            count += 1
    return count


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Verify the checksum, then `torch.load(weights_only=True)` to CPU (chapter 7). Raises CheckpointError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from None
    try:
        recorded = _sidecar(path).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        raise IncompleteCheckpointError(f"checkpoint {path} is incomplete: its checksum file {_sidecar(path).name} "
                                        "is missing (the run was probably stopped while saving)") from None
    actual = hashlib.sha256(data).hexdigest()
    if len(recorded) != 3 or recorded[0] != "sha256" or recorded[1] != actual or recorded[2] != str(len(data)):
        raise CheckpointError(f"checkpoint {path} is damaged: its bytes do not match the checksum in "
                              f"{_sidecar(path).name}")
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "weights_only" in str(exc) or "Unsupported global" in str(exc) or "GLOBAL" in str(exc):
            raise UnsafeCheckpointError(f"refusing checkpoint {path}: it asks to import or run code, which "
                                        f"weights_only loading forbids ({first[:120]})") from None
        raise CheckpointError(f"checkpoint {path} cannot be unpickled ({first[:120]})") from None
    except Exception as exc:  # noqa: BLE001 - any other failure of a matching file: report it, one line
        raise CheckpointError(f"checkpoint {path} cannot be loaded ({type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ''})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a checkpoint of this trainer (format "
                              f"{state.get('format') if isinstance(state, dict) else type(state).__name__})")
    return state


FORMAT = "course_utils.production/1"


def newest_valid(folder: str | Path, say=print) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint in `folder` that loads, damaged newer ones set aside with a warning (chapter 7).

    None when the folder holds no complete checkpoint: none at all, or only ones whose save never
    finished (no checksum file; set aside with a warning). A checkpoint that would run code stops the
    search at once (UnsafeCheckpointError); if complete checkpoints exist but none loads, CheckpointError.
    """
    removed = remove_unfinished(folder)
    if removed:
        say(f"removed {removed} unfinished temporary file(s) from {folder}")
    files = checkpoint_files(folder)
    if not files:
        return None
    damaged: list[tuple[Path, str, bool]] = []
    for path in files:
        try:
            state = load_checkpoint(path)
        except UnsafeCheckpointError:
            raise
        except CheckpointError as exc:
            damaged.append((path, str(exc), isinstance(exc, IncompleteCheckpointError)))
            continue
        _set_aside(damaged, f"resuming from {path.name}")   # only once a good one is found: never start over
        return path, state
    if all(incomplete for _, _, incomplete in damaged):      # killed while saving the first checkpoint
        _set_aside(damaged, "no complete checkpoint: starting fresh")
        return None
    raise CheckpointError(f"no usable checkpoint in {folder}: the newest, {files[0].name}, failed: {damaged[0][1]}")


def _set_aside(damaged: list[tuple[Path, str, bool]], then: str) -> None:
    """Move damaged or incomplete checkpoints aside (never deleted), each with a warning."""
    for bad, problem, _ in damaged:
        moved = set_aside(bad, "damaged")
        if moved is not None and _sidecar(bad).exists():
            set_aside(_sidecar(bad), "damaged")
        where = f"; set aside as {moved.name}" if moved else ""
        warnings.warn(f"skipping {problem}{where}; {then}", RuntimeWarning, stacklevel=3)
