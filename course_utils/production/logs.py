"""Run logging (chapter 7): metrics.jsonl (one line per epoch), TensorBoard event files, a tqdm bar.

Only rank 0 logs. On resume the history saved in the checkpoint is written back as metrics.jsonl
(so no epoch appears twice or goes missing), and TensorBoard's writer is opened with
``purge_step`` so readers drop the steps logged after that checkpoint by the killed run. Event
files are flushed (by the checkpoint writer's thread) before every checkpoint is written, so
everything up to a checkpoint is on disk. Since the
checkpoint's history is what a resume writes back, metrics.jsonl is flushed but not fsynced.

Per update, the three scalars go into one TensorBoard event (one summary with three values): a third
of what three ``add_scalar`` calls cost (29 against 79 us of CPU per update, measured here). The
events are kept in a list and handed to TensorBoard's writer thread at each epoch end and before each
checkpoint, not one by one: waking that thread at every update made the training thread wait for the
GIL (0.13 ms per update, up to 2-8 ms under heavy load on this shared 2-core machine). TensorBoard itself
writes to disk only every 120 s.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from course_utils.infra.storage import atomic_write_text

STEP_TAGS = {"loss": "train/loss_step", "lr": "train/lr", "grad_norm": "train/grad_norm"}
EPOCH_TAGS = {"train_loss": "train/loss", "val_loss": "val/loss", "val_acc": "val/acc"}   # and val_NAME: val/NAME


def epoch_tag(key: str) -> str | None:
    """The TensorBoard tag of an epoch record's field (None: not a curve)."""
    if key in EPOCH_TAGS:
        return EPOCH_TAGS[key]
    return "val/" + key[4:] if key.startswith("val_") else None


def _after_existing_event_files(folder: Path) -> None:
    """Wait (at most a second) until a new event file's name sorts after every existing one.

    Readers take a folder's event files in name order, and the name starts with the creation time in
    whole seconds; a run resumed within the second its killed predecessor started would otherwise be
    read first, and the purge of the steps logged after the checkpoint would go wrong.
    """
    stamps = [int(p.name.split(".")[3]) for p in folder.glob("events.out.tfevents.*")
              if p.name.split(".")[3].isdigit()]
    while stamps and int(time.time()) <= max(stamps):
        time.sleep(0.02)


class RunLog:
    """metrics.jsonl + TensorBoard + progress bar for one run; a silent stand-in on ranks other than 0."""

    def __init__(self, out: Path, enabled: bool, history: list[dict[str, Any]], resumed_at: int | None,
                 tensorboard: bool, progress: bool):
        self.enabled, self.progress, self.bar = enabled, progress, None
        self.metrics_path = out / "metrics.jsonl"
        self.writer = self.events = None
        self.pending: list[tuple[int, dict[str, float]]] = []
        if not enabled:
            return
        out.mkdir(parents=True, exist_ok=True)
        if history:                          # a resume: the checkpoint's history replaces what the killed run wrote
            atomic_write_text(self.metrics_path, "".join(json.dumps(r) + "\n" for r in history))
        else:
            self.metrics_path.write_text("", encoding="utf-8")
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter   # imported here: tensorboard is slow to import

            purge = None if resumed_at is None else resumed_at + 1
            if purge is not None:
                _after_existing_event_files(out / "tb")
            self.writer = SummaryWriter(str(out / "tb"), purge_step=purge, max_queue=1000)
            self.events = self.writer._get_file_writer()

    def start_epoch(self, epoch: int, epochs: int, total: int, done: int) -> None:
        """A tqdm bar over this epoch's micro-batches (shown on a terminal only)."""
        if self.enabled and self.progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=done, desc=f"epoch {epoch + 1}/{epochs}", unit="batch",
                            leave=False, disable=None, dynamic_ncols=True)

    def micro_step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def update(self, updates: int, values: dict[str, float]) -> None:
        """Per-update scalars: window loss, learning rate, pre-clip gradient norm (kept until the next flush)."""
        if self.events is not None:
            self.pending.append((updates, values))
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{values['loss']:.4g}", refresh=False)

    def epoch(self, record: dict[str, Any]) -> None:
        """One line in metrics.jsonl, flushed to disk, and the epoch's scalars."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if not self.enabled:
            return
        with open(self.metrics_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.writer is not None:
            self.hand_over()                             # the updates' steps come before the epoch's
            for key, value in record.items():
                tag = epoch_tag(key)
                if tag is not None:
                    self.writer.add_scalar(tag, value, record["updates"])

    def hand_over(self) -> None:
        """The kept per-update scalars to TensorBoard's writer, one event per update (before a checkpoint)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        for updates, values in self.pending:
            self.events.add_summary(Summary(value=[Summary.Value(tag=tag, simple_value=values[key])
                                                   for key, tag in STEP_TAGS.items()]), updates)
        self.pending.clear()

    def flush_events(self) -> None:
        """Everything handed over so far onto disk (the checkpoint writer's thread, before it writes)."""
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.hand_over()
            self.writer.close()
