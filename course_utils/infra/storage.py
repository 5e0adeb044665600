"""Durable files (chapters 0-9): one atomic write, one lock, one corruption-safe JSON store.

Everything the learner keeps (quiz progress, the arena's scoreboard) and everything a run keeps
(chapter 7's checkpoints) is written through ``atomic_write_bytes``: a temporary file in the same
folder, flushed and fsynced, ``os.replace``d over the target, then the folder fsynced, so a crash
at any moment leaves either the old file or the new one, never half of one.

``JsonStore`` reads and updates one JSON object under an exclusive lock (two kernels never lose
each other's writes). A file that is not valid JSON, or not of the expected shape, is set aside
as ``NAME.corrupt-<time>`` (never deleted) and a fresh one is started; given a ``repair``
function, a store keeps what is still valid of a damaged file, record by record, even of a file
cut off in the middle (a copy of the damaged bytes, byte for byte, is set aside first), so one bad
record never costs the learner the others. Each problem is said once, in one line in the
learner's words (no folder path, no parser message): as a RuntimeWarning, or, for a ``quiet``
store whose view shows it, only in ``warnings_seen``.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
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
    except BaseException:
        _discard(tmp)
        raise
    _put_in_place(tmp, path, sync_folder)


def _discard(tmp: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


def _put_in_place(tmp: Path, path: Path, sync_folder: bool) -> None:
    """``os.replace`` the finished temporary file over `path` (removing it if that fails), then fsync the folder."""
    try:
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
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
    _put_in_place(tmp, path, sync_folder)
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


MAX_DEPTH = 64
_CUT = re.compile(r'[\\"{}\[\],]')


def parse_cut_json(text: str, tries: int = 400) -> Any:
    """The longest prefix of a damaged JSON text (cut off, or broken part-way) that parses once its open brackets
    are closed; None if there is none. What a crash or a bad edit left is read up to the damage.
    """
    stack, in_string, escaped_at, cuts = [], False, -1, []
    for match in _CUT.finditer(text):
        ch, at = match.group(), match.start()
        if in_string:
            if at == escaped_at:               # the character right after a backslash
                continue
            if ch == "\\":
                escaped_at = at + 1
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            if len(stack) >= MAX_DEPTH:        # no file of the course nests this deep: not worth reading
                return None
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                break
            stack.pop()
            cuts.append((at + 1, "".join(reversed(stack))))
        elif ch == "," and stack:
            cuts.append((at, "".join(reversed(stack))))
    for end, closers in reversed(cuts[-tries:]):
        try:
            return json.loads(text[:end] + closers)
        except (ValueError, RecursionError):
            continue
    return None


class JsonStore:
    """One JSON object in one file, read and updated safely by many kernels (chapters 0-9).

    `valid(data)` says whether a parsed object has the shape the caller expects; anything else
    (bytes that are not UTF-8, invalid JSON, a list, a dict of the wrong shape) is repaired record
    by record when the store has a `repair`, else set aside and treated as empty. `count(data)`
    counts a file's records (for "17 of 18 saved runs were kept"), `unit` names them. Reads and
    writes never raise for file problems: they say so and keep going, so a learner's work is never
    interrupted.
    """

    def __init__(self, path: str | os.PathLike, valid: Callable[[Any], bool] = lambda data: isinstance(data, dict),
                 what: str = "file", repair: Callable[[Any], dict] | None = None,
                 count: Callable[[Any], int] | None = None, unit: str = "entries", quiet: bool = False):
        self.path = Path(path)
        self.valid = valid
        self.what = what
        self.repair = repair      # parsed JSON of any shape -> the valid part of it (a dict that passes `valid`)
        self.count = count
        self.unit = unit
        self.quiet = quiet        # a view shows warnings_seen itself: no RuntimeWarning in the learner's cell
        self.warnings_seen: list[str] = []
        self._holding_lock = False

    def _warn(self, message: str) -> None:
        self.warnings_seen.append(message)
        if not self.quiet:
            warnings.warn(message, RuntimeWarning, stacklevel=4)

    def _counted(self, data: Any) -> int | None:
        if self.count is None:
            return None
        try:
            return int(self.count(data))
        except Exception:  # noqa: BLE001 - a strange shape has no count
            return None

    def read(self) -> dict:
        """The stored object, or {} when there is none or it was unreadable (then set aside)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self._warn(f"your {self.what} could not be read ({exc.strerror or 'no access'}); changes are kept in "
                       "memory only")
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):   # UnicodeDecodeError and JSONDecodeError are ValueErrors
            parsed, total = False, None
        else:
            parsed, total = True, self._counted(data)
            try:
                if isinstance(data, dict) and self.valid(data):
                    return data
            except Exception:  # noqa: BLE001 - a validator tripping over a strange shape means "not valid"
                pass
        if self.repair is not None:
            if not parsed:                     # cut off or broken part-way: keep what precedes the damage
                try:
                    data = parse_cut_json(raw.decode("utf-8", errors="replace"))
                except RecursionError:
                    data = None
            if data is not None:
                saved = self._salvage(raw, data, total)
                if saved is not None:
                    return saved
        backup = set_aside(self.path, "unreadable")
        where = f"the damaged file was kept as {backup.name} beside it" if backup else "it could not be moved aside"
        self._warn(f"your {self.what} could not be read, so a fresh one was started; {where}")
        return {}

    def _salvage(self, raw: bytes, data: Any, total: int | None) -> dict | None:
        """Keep the valid part of a damaged file: back up its bytes, write the repaired object (None: nothing kept)."""
        try:
            repaired = self.repair(data)
            if not isinstance(repaired, dict) or not self.valid(repaired):
                return None
            text = json.dumps(repaired, indent=1, sort_keys=True)
        except (ValueError, TypeError, RecursionError):
            return None
        kept = self._counted(repaired)
        context = contextlib.nullcontext() if self._holding_lock else locked(self.path)
        was_holding = self._holding_lock
        try:
            with context:
                self._holding_lock = True
                if self.path.read_bytes() != raw:   # another kernel rewrote it meanwhile: read that instead
                    return self.read()
                backup = set_aside(self.path, "damaged entries", copy_of=raw)
                if backup is None:
                    self._warn(f"your {self.what} has damaged entries and no copy of it could be kept; the valid "
                               "ones are used in memory only")
                    return repaired
                atomic_write_text(self.path, text)
        except OSError as exc:
            self._warn(f"your {self.what} has damaged entries ({exc.strerror or 'no access'}); the valid ones are "
                       "used in memory only")
            return repaired
        finally:
            self._holding_lock = was_holding
        if kept == 0:
            self._warn(f"your {self.what} could not be read, so a fresh one was started; the damaged file was kept "
                       f"as {backup.name} beside it")
            return repaired
        if kept is None:
            said = f"the valid {self.unit} were kept"
        elif total is None or total < kept:
            said = f"the {kept} {self.unit} that could still be read were kept"
        else:
            said = f"{kept} of {total} {self.unit} were kept"
        self._warn(f"your {self.what} was damaged: {said}; a copy of the damaged file was kept as {backup.name} "
                   "beside it")
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
                    self._warn(f"your {self.what} could not be saved ({exc.strerror or 'no access'}); this change "
                               "is kept in memory only")
                return result
        except OSError as exc:  # the folder cannot be created or locked: work in memory
            self._warn(f"your {self.what} could not be saved ({exc.strerror or 'no access'}); this change is kept "
                       "in memory only")
            data = self.read()
            return change(data)
