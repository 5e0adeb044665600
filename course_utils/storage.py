"""Durable files (chapters 0-9): one atomic write, one lock, one corruption-safe JSON store.

Everything the learner keeps (quiz progress, the arena's scoreboard) and everything a run keeps
(chapter 7's checkpoints) is written through ``atomic_write_bytes``: a temporary file in the same
folder, flushed and fsynced, ``os.replace``d over the target, then the folder fsynced, so a crash
at any moment leaves either the old file or the new one, never half of one.

``JsonStore`` reads and updates one JSON object under an exclusive lock (two kernels never lose
each other's writes). A file that is not valid JSON, or not of the expected shape, is set aside
as ``NAME.corrupt-<time>`` (never deleted) with a warning, and a fresh one is started.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (POSIX; a no-op where folders cannot be opened)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes | Callable[[Any], None]) -> None:
    """Write `data` (bytes, or a function that writes to a binary file) to `path` durably and atomically.

    Temporary file in the same folder -> write -> flush -> fsync -> os.replace -> fsync the folder.
    On any failure the temporary file is removed and the old `path` is untouched (chapters 0, 7, 8).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_folder(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive advisory lock on `path`'s sibling `NAME.lock` (POSIX; single writer elsewhere)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: single-writer assumption
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def set_aside(path: Path, reason: str) -> Path | None:
    """Move a damaged file to `NAME.corrupt-<time>[-n]` (never deleting anything); returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        backup = path.with_name(f"{path.name}.corrupt-{stamp}" + (f"-{n}" if n else ""))
        if not backup.exists():
            break
    try:
        os.replace(path, backup)
    except OSError:
        return None
    return backup


class JsonStore:
    """One JSON object in one file, read and updated safely by many kernels (chapters 0-9).

    `valid(data)` says whether a parsed object has the shape the caller expects; anything else
    (bytes that are not UTF-8, invalid JSON, a list, a dict of the wrong shape) is set aside with
    a warning and treated as empty. Reads and writes never raise for file problems: they warn and
    keep going, so a learner's work is never interrupted.
    """

    def __init__(self, path: str | os.PathLike, valid: Callable[[Any], bool] = lambda data: isinstance(data, dict),
                 what: str = "file"):
        self.path = Path(path)
        self.valid = valid
        self.what = what
        self.warnings_seen: list[str] = []

    def _warn(self, message: str) -> None:
        self.warnings_seen.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)

    def read(self) -> dict:
        """The stored object, or {} when there is none or it was unreadable (then set aside)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self._warn(f"could not read the {self.what} at {self.path} ({exc}); changes are kept in memory only")
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
            ok = isinstance(data, dict) and self.valid(data)
        except (ValueError, RecursionError) as exc:   # UnicodeDecodeError and JSONDecodeError are ValueErrors
            ok, problem = False, str(exc)[:80]
        else:
            problem = "unexpected layout"
        if ok:
            return data
        backup = set_aside(self.path, problem)
        where = f"it was moved to {backup.name}" if backup else "it could not be moved aside"
        self._warn(f"the {self.what} {self.path} was unreadable ({problem}); {where} and a fresh one was started")
        return {}

    def update(self, change: Callable[[dict], Any]) -> Any:
        """Re-read under the lock, apply `change(data)` in place, write atomically; returns change's result."""
        try:
            with locked(self.path):
                data = self.read()
                result = change(data)
                try:
                    atomic_write_text(self.path, json.dumps(data, indent=1, sort_keys=True))
                except OSError as exc:
                    self._warn(f"could not save the {self.what} to {self.path} ({exc})")
                return result
        except OSError as exc:  # the folder cannot be created or locked: work in memory
            self._warn(f"could not lock the {self.what} at {self.path} ({exc}); this change is not saved")
            data = self.read()
            return change(data)
