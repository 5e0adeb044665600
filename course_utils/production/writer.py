"""Checkpoints written behind training's back (chapter 7), as torch.distributed.checkpoint's async_save does.

The training thread only copies the state: every tensor to the CPU (from a GPU into pinned memory,
all copies queued, then one sync), every list and dict rebuilt, so that training may change the
originals at once. A writer thread then serialises the copy, hashes it and writes it durably
(``checkpoint.write_checkpoint``: checksum first, fsyncs) and prunes old files. One write at a time:
the next save and the end of the run wait for the previous write, so memory holds at most one copy
and a run never returns before its last checkpoint is on disk. A kill during a write leaves the
older checkpoints untouched and the new one complete or absent; the copy makes the file the state at
its position, whatever training did while it was written.
"""
from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from course_utils.production import checkpoint as ckpt

IMMUTABLE = (int, float, bool, str, bytes, type(None))


def snapshot(state: Any) -> Any:
    """A copy of `state` on the CPU that training cannot change; tensors sharing memory still share it."""
    copies: dict[tuple[str, int], torch.Tensor] = {}     # (device, address) of a storage -> its host copy
    queued = []

    def host(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = (str(tensor.device), storage.data_ptr())
        whole = copies.get(key) if storage.nbytes() else None
        if whole is None and tensor.device.type == "cpu" and tensor.storage_offset() == 0 \
                and tensor.is_contiguous() and tensor.numel() * tensor.element_size() == storage.nbytes():
            copies[key] = tensor.clone()                 # the common case: a tensor that is its whole storage
            return copies[key]
        if whole is None:                                # else the whole storage, once: views and ties survive
            source = torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(storage)
            pinned = tensor.device.type == "cuda"
            whole = torch.empty(source.shape, dtype=torch.uint8, pin_memory=pinned)
            whole.copy_(source, non_blocking=pinned)
            if pinned:
                queued.append(tensor.device)
            copies[key] = whole
        return torch.empty(0, dtype=tensor.dtype).set_(whole.untyped_storage(), tensor.storage_offset(),
                                                      tensor.size(), tensor.stride())

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return host(value.detach())
        if isinstance(value, dict):
            out = (OrderedDict if isinstance(value, OrderedDict) else dict)((k, walk(v)) for k, v in value.items())
            if hasattr(value, "_metadata"):              # a state_dict's module versions
                out._metadata = copy.deepcopy(value._metadata)
            return out
        if type(value) in (list, tuple):
            if all(type(v) in IMMUTABLE for v in value):    # e.g. an RNG state's 624 integers: no walk needed
                return list(value) if type(value) is list else value
            return type(value)(walk(v) for v in value)
        return value if type(value) in IMMUTABLE else copy.deepcopy(value)

    copied = walk(state)
    for device in set(queued):                            # the copies from a GPU: wait for them once
        torch.cuda.synchronize(device)
    return copied


class BackgroundWriter:
    """Writes one checkpoint at a time on a thread while training goes on (chapter 7).

    ``save(state, folder, names)`` waits for the previous write, copies `state` (``snapshot``) and returns;
    the thread runs `before` (flush the logs), writes the copy as ``names[0]``, gives it the other names,
    then runs `after` (pruning). ``wait()`` returns once the write is on disk and raises what it raised.
    """

    def __init__(self, before: Callable[[], None] = lambda: None, after: Callable[[], None] = lambda: None,
                 behind: Callable[[float, float, float, float], None] = lambda waited, share, copy, write: None):
        self.before, self.after, self.behind = before, after, behind
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.write_s = 0.0                     # how long the last write took on the thread
        self.waited_s = 0.0                    # how long training has waited for earlier writes, in all
        self.started = time.perf_counter()
        self.told = False

    def save(self, state: dict[str, Any], folder: Path, names: list[str]) -> None:
        """Copy `state` now; write it as `names` (the first written, the others its second names) on the thread.

        Training's part is the copy. If the previous write is still going, training waits for it (memory holds
        one copy at a time, so a run never falls behind by more than one checkpoint), and `behind(waited, share,
        copy, write)` is called once, when those waits add up to more than half a second and a fifth of the
        run's time so far: checkpoints come faster than they are written. (Tens of milliseconds now and then, a
        slow fsync on a busy machine, are not worth a word.)
        """
        start = time.perf_counter()
        self.wait()
        waited = time.perf_counter() - start
        copied = snapshot(state)
        copy_s = time.perf_counter() - start - waited
        self.waited_s += waited
        share = self.waited_s / max(time.perf_counter() - self.started, 1e-9)
        if self.waited_s > 0.5 and share > 0.2 and not self.told:
            self.told = True
            self.behind(self.waited_s, share, copy_s, self.write_s)
        self.thread = threading.Thread(target=self._write, args=(copied, Path(folder), names),
                                       name="checkpoint-writer")   # not a daemon: the interpreter waits for it
        self.thread.start()

    def _write(self, state: dict[str, Any], folder: Path, names: list[str]) -> None:
        start = time.perf_counter()
        try:
            self.before()
            payload = ckpt.serialize(state)
            ckpt.write_checkpoint(folder, names[0], payload)
            for name in names[1:]:
                ckpt.copy_checkpoint(folder, names[0], name, payload)
            self.after()
        except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()
            self.error = exc
        self.write_s = time.perf_counter() - start

    def wait(self) -> None:
        """Block until the write in progress is on disk; raise what it raised."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.error is not None:
            error, self.error = self.error, None
            raise error
