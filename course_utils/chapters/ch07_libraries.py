"""Lightning run beside the course's counts: steps per epoch, the progress bar, validation's schedule, and what each
library writes in a checkpoint (chapter 7; Accelerate's run is ``ch07_accelerate_run``).

Both libraries are pinned in the lock (the ``lab`` extra), so every learner and every nbval pass runs the same
versions. Each run is tiny (a ``Linear(2, 1)`` on random inputs, one process, the CPU) and reports only counts and
names, which do not depend on the machine; Lightning's log lines and warnings are silenced, its progress bar draws
nowhere (its totals are read from the bar itself).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import random
import tempfile
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from course_utils.engine.arithmetic import training_arithmetic


def random_points(n: int, batch_size: int, seed: int, shuffle: bool = True) -> DataLoader:
    """`n` random 2-d points; shuffled for training, in a fixed order for validation (a validation mean summed in
    another order each time moves in its last bits: EarlyStopping then sees improvements that are rounding)."""
    data = TensorDataset(torch.randn(n, 2, generator=torch.Generator().manual_seed(seed)))
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=torch.Generator().manual_seed(seed))


@contextlib.contextmanager
def quiet_libraries():
    """No log line, warning or stray output from a library while it runs (nbval compares every line), and no lasting
    change to the caller: the warning filters both libraries add at import (Accelerate's hides every UserWarning of
    torch.optim.lr_scheduler) are dropped on exit, and the random streams are put back."""
    loggers = [logging.getLogger(name) for name in ("lightning", "lightning.pytorch", "lightning.fabric",
                                                     "pytorch_lightning", "lightning_fabric", "accelerate")]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()), torch.random.fork_rng():
            warnings.simplefilter("ignore")
            yield
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)
        random.setstate(python_state)
        np.random.set_state(numpy_state)


@dataclass(frozen=True)
class LightningRun:
    """What one Lightning fit did, counted from inside it."""

    version: str
    train_batches: int                  # trainer.num_training_batches
    val_batches: int                    # trainer.num_val_batches, summed over the validation loaders
    estimated_stepping_batches: int     # read in configure_optimizers, where a schedule is sized
    optimizer_steps: int                # calls of the optimizer's own step(), counted by a hook
    global_step: int
    scheduler_steps: int                # the scheduler's last_epoch at the end
    train_bar_totals: tuple[int, ...]   # the training bar's total, at each epoch's start
    val_bar_totals: tuple[int, ...]     # the validation bar's total, at each validation run
    checkpoint_keys: tuple[str, ...]    # the top-level keys of trainer.save_checkpoint's file
    steps_seen_in_training_step: tuple[int, ...] = ()    # trainer.global_step, read at every training_step
    steps_seen_before_update: tuple[int, ...] = ()       # the same, read in on_before_optimizer_step


def run_lightning(n_train: int = 14_905, n_val: int = 3_726, batch_size: int = 64, accumulate: int = 4,
                  epochs: int = 1, seed: int = 0) -> LightningRun:
    """Fit a Linear(2, 1) with Lightning (accumulate_grad_batches, a per-step schedule sized by
    estimated_stepping_batches), count what happened, save a checkpoint and read its keys (chapter 7)."""
    with quiet_libraries():
        import lightning
        import lightning.pytorch as pl
        from lightning.pytorch.callbacks import TQDMProgressBar

    class Bar(TQDMProgressBar):
        """Lightning's own bar, its bars created disabled (in Jupyter an enabled one is a widget, whatever stdout
        says); it records the totals it would show."""

        def __init__(self):
            super().__init__()
            self.train_totals: list[int] = []
            self.val_totals: list[int] = []

        @property
        def is_disabled(self) -> bool:
            return True

        def on_train_epoch_start(self, trainer, *args) -> None:
            super().on_train_epoch_start(trainer, *args)
            self.train_totals.append(self.train_progress_bar.total)

        def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
            super().on_validation_batch_start(trainer, pl_module, batch, batch_idx, dataloader_idx)
            if batch_idx == 0 and not trainer.sanity_checking:
                self.val_totals.append(self.val_progress_bar.total)

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(2, 1)
            self.estimated = -1
            self.steps = 0
            self.in_step: list[int] = []
            self.before_update: list[int] = []

        def training_step(self, batch, batch_idx):
            self.in_step.append(self.trainer.global_step)
            return self.net(batch[0]).pow(2).mean()

        def on_before_optimizer_step(self, optimizer):
            self.before_update.append(self.trainer.global_step)

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", self.net(batch[0]).pow(2).mean())

        def configure_optimizers(self):
            self.estimated = self.trainer.estimated_stepping_batches
            optimizer = torch.optim.SGD(self.parameters(), lr=0.01)
            optimizer.register_step_post_hook(lambda *_: setattr(self, "steps", self.steps + 1))
            schedule = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=self.estimated)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    with quiet_libraries(), tempfile.TemporaryDirectory() as folder:
        torch.manual_seed(seed)
        model, bar = Tiny(), Bar()
        trainer = pl.Trainer(max_epochs=epochs, accumulate_grad_batches=accumulate, accelerator="cpu", devices=1,
                             logger=False, enable_checkpointing=False, enable_model_summary=False,
                             callbacks=[bar], default_root_dir=folder)
        trainer.fit(model, random_points(n_train, batch_size, seed), random_points(n_val, batch_size, seed + 1, shuffle=False))
        path = os.path.join(folder, "last.ckpt")
        trainer.save_checkpoint(path)
        keys = tuple(sorted(torch.load(path, weights_only=False)))
    val = trainer.num_val_batches
    return LightningRun(
        version=lightning.__version__, train_batches=int(trainer.num_training_batches),
        val_batches=int(sum(val) if isinstance(val, list) else val), estimated_stepping_batches=int(model.estimated),
        optimizer_steps=model.steps, global_step=trainer.global_step,
        scheduler_steps=trainer.lr_scheduler_configs[0].scheduler.last_epoch,
        train_bar_totals=tuple(int(t) for t in bar.train_totals), val_bar_totals=tuple(int(t) for t in bar.val_totals),
        checkpoint_keys=keys, steps_seen_in_training_step=tuple(model.in_step),
        steps_seen_before_update=tuple(model.before_update))


def lightning_lines(run: LightningRun, n_train: int = 14_905, n_val: int = 3_726, batch_size: int = 64,
                    accumulate: int = 4, epochs: int = 1) -> list[str]:
    """The Lightning run against chapter 0's calculator, each figure stated as a check (chapter 7)."""
    train = training_arithmetic(n_train, batch_size, epochs, accumulate)
    val = training_arithmetic(n_val, batch_size, 1)
    agree = (run.estimated_stepping_batches == run.optimizer_steps == run.global_step == run.scheduler_steps
             == train.total_weight_updates)
    return [
        f"Lightning {run.version}: {n_train:,} training and {n_val:,} validation examples, batch {batch_size}, "
        f"accumulate_grad_batches={accumulate}, {epochs} epoch{'s' if epochs > 1 else ''}",
        f"batches per epoch: {run.train_batches} training, {run.val_batches} validation | the calculator: "
        f"{train.iters_per_epoch} and {val.iters_per_epoch}",
        f"estimated_stepping_batches = {run.estimated_stepping_batches} | optimizer steps taken: {run.optimizer_steps}, "
        f"global_step: {run.global_step}, scheduler steps: {run.scheduler_steps}",
        f"the calculator's updates: {train.total_weight_updates} = ceil({train.iters_per_epoch} / {accumulate}) x "
        f"{epochs} (the last window of {train.last_window_size} batch{'es' if train.last_window_size > 1 else ''} "
        f"steps too; (i + 1) % K alone gives {train.naive_updates_per_epoch * epochs}) | all agree: {agree}",
        f"training bar's total per epoch: {', '.join(map(str, run.train_bar_totals))} | validation bar's: "
        f"{', '.join(map(str, run.val_bar_totals))} | one bar for both (Lightning 1.x) would run to "
        f"{run.train_batches} + {run.val_batches} = {run.train_batches + run.val_batches}",
        f"checkpoint keys: {', '.join(run.checkpoint_keys)}",
        periodic_task_line(run, every=20),
    ]


def periodic_task_line(run: LightningRun, every: int) -> str:
    """How often `if self.trainer.global_step % every == 0:` runs, placed in training_step and in
    on_before_optimizer_step (chapter 7)."""
    in_step = [g for g in run.steps_seen_in_training_step if g % every == 0]
    before = [g for g in run.steps_seen_before_update if g % every == 0]
    times = {g: in_step.count(g) for g in sorted(set(in_step))}
    where = (f"{', '.join(map(str, times))}, {next(iter(times.values()))} times each" if len(set(times.values())) == 1
             else ", ".join(f"{g} ({n} times)" if n > 1 else f"{g} (once)" for g, n in times.items()))
    return (f"a task under `if self.trainer.global_step % {every} == 0:` in training_step ran {len(in_step)} times, "
            f"at global_step {where}; in on_before_optimizer_step it ran {len(before)} times, once each")


def lightning_validation_runs() -> dict[str, list[tuple[int, int, int]]]:
    """When Lightning validates: (epoch, training batches seen, global_step) at each validation run, for
    val_check_interval as a fraction, as a count within an epoch and as a count across epochs, and for
    check_val_every_n_epoch with EarlyStopping on a loss that never improves (lr=0): patience counts validation
    runs, not epochs (chapter 7). 20 batches of 16 per epoch."""
    with quiet_libraries():
        import lightning.pytorch as pl
        from lightning.pytorch.callbacks import EarlyStopping

    class Probe(pl.LightningModule):
        def __init__(self, lr: float):
            super().__init__()
            self.net, self.lr, self.batches, self.checks = torch.nn.Linear(2, 1), lr, 0, []

        def training_step(self, batch, batch_idx):
            self.batches += 1
            return self.net(batch[0]).pow(2).mean()

        def on_validation_epoch_start(self) -> None:
            if not self.trainer.sanity_checking:
                self.checks.append((self.trainer.current_epoch + 1, self.batches, self.trainer.global_step))

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", self.net(batch[0]).pow(2).mean())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    def checks(lr: float = 0.01, callbacks=(), **options) -> list[tuple[int, int, int]]:
        with quiet_libraries(), tempfile.TemporaryDirectory() as folder:
            torch.manual_seed(0)
            probe = Probe(lr)
            trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                                 enable_model_summary=False, enable_progress_bar=False, default_root_dir=folder,
                                 callbacks=list(callbacks), **options)
            trainer.fit(probe, random_points(320, 16, 0), random_points(64, 16, 1, shuffle=False))
        return probe.checks

    return {"max_epochs=2, val_check_interval=0.5": checks(max_epochs=2, val_check_interval=0.5),
            "max_epochs=2, val_check_interval=5, accumulate_grad_batches=4":
                checks(max_epochs=2, val_check_interval=5, accumulate_grad_batches=4),
            "max_epochs=3, val_check_interval=30, check_val_every_n_epoch=None":
                checks(max_epochs=3, val_check_interval=30, check_val_every_n_epoch=None),
            "max_epochs=30, check_val_every_n_epoch=2, EarlyStopping(patience=2), a loss that never improves":
                checks(lr=0.0, max_epochs=30, check_val_every_n_epoch=2,
                       callbacks=[EarlyStopping("val_loss", patience=2)])}


# What each concept is called in each checkpoint: the course's trainer, Lightning's file, Accelerate's folder.
CHECKPOINT_PARTS = (
    ("weights", ("model",), ("state_dict",), ("model.safetensors",)),
    ("optimizer", ("optimizer",), ("optimizer_states",), ("optimizer.bin",)),
    ("scheduler", ("scheduler",), ("lr_schedulers",), ("scheduler.bin",)),
    ("update count", ("updates",), ("global_step",), ()),
    ("place in the epoch", ("epoch", "position"), ("epoch", "loops"), ()),
    ("random streams", ("rng", "ranks"), (), ("random_states_0.pkl",)),
    ("early stopping", ("early_stopping",), ("callbacks",), ()),
)


def checkpoint_lines(course_keys, lightning_keys, accelerate_files) -> list[str]:
    """Which part of a resumable state each checkpoint holds, read from the keys and files the runs wrote: the
    course's trainer, Lightning, Accelerate (chapter 7)."""
    def held(names, present) -> str:
        found = [name for name in names if name in present]
        return ", ".join(found) if found and len(found) == len(names) else "-"

    rows = [("", "the course's trainer", "Lightning", "Accelerate")]
    for part, course, light, acc in CHECKPOINT_PARTS:
        rows.append((part, held(course, set(course_keys)), held(light, set(lightning_keys)),
                     held(acc, set(accelerate_files))))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def lightning_epoch_mean(n_val: int = 100, batch_size: int = 32, seed: int = 0) -> dict[str, object]:
    """What `self.log(name, loss, on_epoch=True)` reports for an epoch whose last batch is short: one validation
    run of Lightning over n_val points in batches of batch_size, against the plain mean of the step values and their
    mean weighted by batch size; then the same logged with batch_size=1 (chapter 7)."""
    with quiet_libraries():
        import lightning.pytorch as pl

    class Logged(pl.LightningModule):
        def __init__(self, given_size: int | None):
            super().__init__()
            self.net, self.given_size = torch.nn.Linear(2, 1), given_size
            self.values: list[float] = []
            self.sizes: list[int] = []

        def validation_step(self, batch, batch_idx):
            loss = self.net(batch[0]).pow(2).mean()
            self.values.append(loss.item())
            self.sizes.append(len(batch[0]))
            self.log("val_loss", loss, on_epoch=True, batch_size=self.given_size)

    out: dict[str, object] = {}
    for given in (None, 1):
        with quiet_libraries():
            torch.manual_seed(seed)
            model = Logged(given)
            trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                                 enable_model_summary=False, enable_progress_bar=False)
            trainer.validate(model, random_points(n_val, batch_size, seed + 1, shuffle=False))
        out[given] = float(trainer.callback_metrics["val_loss"])
    out["sizes"] = model.sizes
    out["plain"] = sum(model.values) / len(model.values)
    out["weighted"] = sum(v * n for v, n in zip(model.values, model.sizes)) / sum(model.sizes)
    return out


def lightning_epoch_lines(run: dict[str, object]) -> list[str]:
    """The epoch values as chapter 7 prints them."""
    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 * max(1.0, abs(b))
    return [f"validation batches of {run['sizes']}: mean of the step values {run['plain']:.4f}, weighted by batch "
            f"size {run['weighted']:.4f}",
            f"self.log('val_loss', loss, on_epoch=True): {run[None]:.4f}, the weighted mean: "
            f"{close(run[None], run['weighted'])}",
            f"the same with batch_size=1: {run[1]:.4f}, the plain mean of the steps: {close(run[1], run['plain'])}"]
