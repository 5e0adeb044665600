"""Durable files (chapters 0-9): one atomic write, one lock, one corruption-safe JSON store.

Everything the learner keeps (quiz progress, the arena's scoreboard) and everything a run keeps
(chapter 7's checkpoints) is written through ``atomic_write_bytes``: a temporary file in the same
folder, flushed and fsynced, ``os.replace``d over the target, then the folder fsynced, so a crash
at any moment leaves either the old file or the new one, never half of one.

``JsonStore`` reads and updates one JSON object under an exclusive lock (two kernels never lose
each other's writes). A file that is not valid JSON, or not of the expected shape, is set aside
as ``NAME.corrupt-<time>`` (never deleted) with a warning, and a fresh one is started; given a
``repair`` function, a store keeps what is still valid of a damaged file (a copy of the damaged
bytes is set aside first), so one bad record never costs the learner the others.
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


def atomic_write_bytes(path: str | os.PathLike, data: bytes | Callable[[Any], None], *,
                       sync_folder: bool = True) -> None:
    """Write `data` (bytes, or a function that writes to a binary file) to `path` durably and atomically.

    Temporary file in the same folder -> write -> flush -> fsync -> os.replace -> fsync the folder.
    On any failure the temporary file is removed and the old `path` is untouched (chapters 0, 7, 8).
    With ``sync_folder=False`` the rename is made durable by the caller's next folder fsync (one fsync
    for several files written together: chapter 7's checkpoint and its checksum).
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
    if sync_folder:
        _fsync_folder(path.parent)


def atomic_link(existing: str | os.PathLike, path: str | os.PathLike, *, sync_folder: bool = True) -> bool:
    """Make `path` a hard link to `existing`, atomically and durably; False where hard links are not supported.

    A link to a temporary name in the same folder, ``os.replace``d over `path`, then the folder fsynced: the
    bytes are not written again (chapter 7: the best checkpoint is the latest one under a second name).
    """
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.link.tmp")
    try:
        os.link(existing, tmp)
    except (OSError, NotImplementedError, AttributeError):
        return False
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync_folder:
        _fsync_folder(path.parent)
    return True


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


def _backup_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(100_000):
        backup = path.with_name(f"{path.name}.corrupt-{stamp}" + (f"-{n}" if n else ""))
        if not backup.exists():
            return backup
    raise OSError(f"too many backups of {path.name}")


def set_aside(path: Path, reason: str = "", copy_of: bytes | None = None) -> Path | None:
    """Keep a damaged file as `NAME.corrupt-<time>[-n]`, never deleting anything; returns the backup's path.

    Without `copy_of` the file is moved aside; with it, those bytes are written to the backup and
    the file itself stays (the caller then replaces it with what it could save).
    """
    path = Path(path)
    try:
        backup = _backup_name(path)
        if copy_of is None:
            os.replace(path, backup)
        else:
            atomic_write_bytes(backup, copy_of)
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
                 what: str = "file", repair: Callable[[Any], dict] | None = None):
        self.path = Path(path)
        self.valid = valid
        self.what = what
        self.repair = repair      # parsed JSON of any shape -> the valid part of it (a dict that passes `valid`)
        self.warnings_seen: list[str] = []
        self._holding_lock = False

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
        except (ValueError, RecursionError) as exc:   # UnicodeDecodeError and JSONDecodeError are ValueErrors
            ok, problem = False, str(exc)[:80]
        else:
            problem = "unexpected layout"
            try:
                ok = isinstance(data, dict) and bool(self.valid(data))
            except Exception:  # noqa: BLE001 - a validator tripping over a strange shape means "not valid"
                ok = False
        if ok:
            return data
        if problem == "unexpected layout" and self.repair is not None:
            saved = self._salvage(raw, data)
            if saved is not None:
                return saved
        backup = set_aside(self.path, problem)
        where = f"it was moved to {backup.name}" if backup else "it could not be moved aside"
        self._warn(f"the {self.what} {self.path} was unreadable ({problem}); {where} and a fresh one was started")
        return {}

    def _salvage(self, raw: bytes, data: Any) -> dict | None:
        """Keep the valid part of a parsed but damaged file: back up its bytes, write the repaired object."""
        try:
            repaired = self.repair(data)
            if not isinstance(repaired, dict) or not self.valid(repaired):
                return None
            text = json.dumps(repaired, indent=1, sort_keys=True)
        except (ValueError, TypeError, RecursionError):
            return None
        context = contextlib.nullcontext() if self._holding_lock else locked(self.path)
        was_holding = self._holding_lock
        try:
            with context:
                self._holding_lock = True
                if self.path.read_bytes() != raw:   # another kernel rewrote it meanwhile: read that instead
                    return self.read()
                backup = set_aside(self.path, "damaged entries", copy_of=raw)
                if backup is None:
                    self._warn(f"the {self.what} {self.path} has damaged entries and no copy could be kept; "
                               "using the valid entries in memory only")
                    return repaired
                atomic_write_text(self.path, text)
        except OSError as exc:
            self._warn(f"the {self.what} {self.path} has damaged entries ({exc}); using the valid ones in memory")
            return repaired
        finally:
            self._holding_lock = was_holding
        self._warn(f"the {self.what} {self.path} had damaged entries; the valid ones were kept and the damaged "
                   f"file was copied to {backup.name}")
        return repaired

    def update(self, change: Callable[[dict], Any]) -> Any:
        """Re-read under the lock, apply `change(data)` in place, write atomically; returns change's result."""
        try:
            with locked(self.path):
                self._holding_lock = True
                try:
                    data = self.read()
                finally:
                    self._holding_lock = False
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
