"""Checkpoints that survive a crash (chapter 7): durable atomic writes, a checksum written first, safe loading.

A checkpoint is one dict of tensors and plain Python values, serialised once in memory. Its SHA-256
and size go first, with ``storage.atomic_write_text`` (temp file in the same folder, fsync,
``os.replace``, folder fsync), to ``NAME.pt.sha256``; then the bytes go the same way to ``NAME.pt``.
So a ``NAME.pt`` is never on disk without the checksum of exactly its bytes: a kill at any moment
leaves the new checkpoint either complete or absent (a lone checksum file, or a temporary file, both
removed at the next resume), never one that looks damaged or one that passes and is wrong. A
checkpoint refused at resume is therefore really missing its checksum, unreadable, cut short,
replaced or changed; the warning says which.
Loading checks the checksum *before* unpickling anything and then uses
``torch.load(weights_only=True)`` with no allowlist: a pickle that would run code is refused.

Names sort by position in the run: ``last-e0003-s000012.pt`` was taken in epoch 3 (0-based) after 12
micro-batches; ``last-e0004-s000000.pt`` at the end of epoch 3. ``best-...`` holds the best
validation so far: the same state as the 'last' file of that moment, so it is that file's second name
(a hard link, where the file system has them), not a second copy. Old files are pruned only after
the new pair is complete. ``writer.py`` writes them behind training's back.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from course_utils.infra.storage import atomic_link, atomic_write_bytes, atomic_write_text, set_aside

NAME = re.compile(r"^(last|best)-e(\d{4,})-s(\d{6,})\.pt$")
FORMAT = "course_utils.production/1"


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message is one line and names the file."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message    # what is wrong, without the file's path


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint whose pickle would import or run code: refused, never loaded."""


class NoUsableCheckpointError(CheckpointError):
    """Resume was asked for, checkpoints are there, and none can be used: nothing trained (CLI exit code 2)."""


def _refuse(path: Path, reason: str, kind: type[CheckpointError] = CheckpointError) -> CheckpointError:
    return kind(f"checkpoint {path} {reason}", reason)


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


def set_aside_files(folder: str | Path) -> list[Path]:
    """Checkpoints set aside earlier as unusable (`NAME.pt.corrupt-<time>`), which a resume never reads."""
    folder = Path(folder)
    found = folder.glob("*.pt.corrupt-*") if folder.is_dir() else []
    return sorted(p for p in found if NAME.match(p.name.split(".corrupt-")[0]))


def serialize(state: dict[str, Any]) -> memoryview:
    """The bytes torch.save writes for `state` (a view of the buffer torch wrote them to: no second copy)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getbuffer()


def write_checkpoint(folder: str | Path, name: str, payload: bytes | memoryview) -> Path:
    """Write `payload`'s checksum, then `payload` as folder/name, each durably; returns the path (chapter 7)."""
    path = Path(folder) / name
    atomic_write_text(_sidecar(path), f"sha256 {hashlib.sha256(payload).hexdigest()} {len(payload)}\n")
    atomic_write_bytes(path, payload)                 # only now can the checkpoint be found
    return path


def copy_checkpoint(folder: str | Path, name: str, new_name: str, payload: bytes | memoryview) -> Path:
    """The checkpoint `name` under a second name: hard links (no bytes written twice), else a durable copy."""
    folder = Path(folder)
    source, path = folder / name, folder / new_name
    if atomic_link(_sidecar(source), _sidecar(path)) and atomic_link(source, path):   # the checksum first
        return path
    return write_checkpoint(folder, new_name, payload)


def prune(folder: str | Path, kind: str, keep: int) -> list[Path]:
    """Delete all but the newest `keep` complete files of `kind`; call only after a new one is complete."""
    removed = []
    for path in checkpoint_files(folder, kind)[keep:]:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()          # the checkpoint first: a lone checksum file is an unfinished save's
        with contextlib.suppress(FileNotFoundError):
            _sidecar(path).unlink()
        removed.append(path)
    return removed


def remove_unfinished(folder: str | Path) -> int:
    """Delete what a killed save left: temporary files (`NAME.pt.XXXX.tmp`), a checksum whose checkpoint never
    arrived. Returns how many."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    unfinished = list(folder.glob("*.pt*.tmp"))
    unfinished += [p for p in folder.glob("*.pt.sha256") if NAME.match(p.name[:-7]) and not p.with_suffix("").exists()]
    count = 0
    for path in unfinished:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            count += 1
    return count


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _recorded(path: Path) -> tuple[str, int]:
    """The (sha256, size) the checksum file records; CheckpointError saying what is wrong with that file."""
    try:
        raw = _sidecar(path).read_bytes()
    except FileNotFoundError:
        raise _refuse(path, "cannot be verified: its .sha256 checksum file is missing") from None
    except OSError as exc:
        raise _refuse(path, f"cannot be verified: its .sha256 checksum file is unreadable ({_why(exc)})") from None
    fields = raw.split()
    if (len(fields) != 3 or fields[0] != b"sha256" or not re.fullmatch(rb"[0-9a-f]{64}", fields[1])
            or not fields[2].isdigit()):
        raise _refuse(path, "cannot be verified: its .sha256 checksum file is unreadable (it holds no "
                            "'sha256 DIGEST SIZE' line)")
    return fields[1].decode(), int(fields[2])


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Verify the checksum, then `torch.load(weights_only=True)` to CPU (chapter 7). Raises CheckpointError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({_why(exc)})") from None
    digest, size = _recorded(path)
    if len(data) < size and not zipfile.is_zipfile(io.BytesIO(data)):     # a torch file ends with the zip's index
        raise _refuse(path, f"is damaged: cut short to {len(data)} of the {size} bytes its checksum file records")
    if len(data) != size:
        raise _refuse(path, f"is damaged: it holds {len(data)} bytes where its checksum file records {size} "
                            f"(replaced{' or added to' if len(data) > size else ' by another file'})")
    if hashlib.sha256(data).hexdigest() != digest:
        raise _refuse(path, "is damaged: its bytes do not match its checksum file (the right size, other content: "
                            "changed or replaced)")
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "weights_only" in str(exc) or "Unsupported global" in str(exc) or "GLOBAL" in str(exc):
            raise UnsafeCheckpointError(f"refusing checkpoint {path}: it asks to import or run code, which "
                                        f"weights_only loading forbids ({first[:120]})") from None
        raise _refuse(path, f"cannot be unpickled ({first[:120]})") from None
    except Exception as exc:  # noqa: BLE001 - any other failure of a matching file: report it, one line
        first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
        raise _refuse(path, f"cannot be loaded ({type(exc).__name__}: {first})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise _refuse(path, f"is not a checkpoint of this trainer (format {found})")
    return state


def newest_valid(folder: str | Path, say=print) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint in `folder` that loads, damaged newer ones set aside with a warning (chapter 7).

    None when the folder holds no checkpoint and never did. A checkpoint that would run code stops the
    search at once (UnsafeCheckpointError). If checkpoints are there and none can be used, or only ones set
    aside earlier are, NoUsableCheckpointError: each set aside (never deleted), nothing started.
    """
    removed = remove_unfinished(folder)
    if removed:
        say(f"removed {removed} file(s) of an unfinished save from {folder}")
    files = checkpoint_files(folder)
    if not files:
        earlier = set_aside_files(folder)
        if earlier:
            raise NoUsableCheckpointError(
                f"--resume: {folder} holds no usable checkpoint, only {len(earlier)} set aside earlier as "
                f"unusable ({', '.join(p.name for p in earlier[:3])}{', ...' if len(earlier) > 3 else ''}); "
                "nothing was trained; run without --resume to start over")
        return None
    refused: list[tuple[Path, str]] = []
    for path in files:
        try:
            state = load_checkpoint(path)
        except UnsafeCheckpointError:
            raise
        except CheckpointError as exc:
            refused.append((path, exc.reason))
            continue
        for bad, reason in refused:               # only once a good one is found: never start over
            where = _put_aside(bad)
            warnings.warn(f"checkpoint {bad.name} {reason}; {where}; resuming from {path.name}", RuntimeWarning,
                          stacklevel=2)
        return path, state
    why = "; ".join(f"{bad.name} {reason}" for bad, reason in refused)
    moved = [(bad.name, _move_aside(bad)) for bad, _ in refused]
    suffixes = {new.name[len(old):] for old, new in moved if new is not None}
    if len(suffixes) == 1 and all(new is not None for _, new in moved):
        where = f"each was set aside in that folder as <its name>{suffixes.pop()}"
    else:
        where = "set aside: " + ", ".join(f"{old} as {new.name}" if new else f"{old} could not be moved"
                                          for old, new in moved)
    several = f"none of the {len(files)} checkpoints" if len(files) > 1 else "the one checkpoint"
    raise NoUsableCheckpointError(
        f"--resume: {several} in {folder} can be used, so nothing was trained: {why}; {where} (nothing was "
        "deleted); run without --resume to start over")


def _move_aside(path: Path) -> Path | None:
    """Move an unusable checkpoint (and its checksum file) aside, never deleting it; where it went (None: stuck)."""
    moved = set_aside(path, "unusable")
    if _sidecar(path).exists():
        set_aside(_sidecar(path), "unusable")
    return moved


def _put_aside(path: Path) -> str:
    moved = _move_aside(path)
    return f"set aside as {moved.name}" if moved else "it could not be moved aside"
