"""Defaults of Lightning and Accelerate that change a run, each measured by a fit on the pinned version (chapter 7).

A plain loop states every step itself; a library decides some for you. Each probe below is one small fit (a
``Linear(2, 1)`` and a ``BatchNorm1d`` on 80 fixed points, batches of 8, the CPU) that varies one thing and counts
what the library did: when a scheduler steps, what a skipped batch counts, which module modes survive, what a
resume restores, which weights are in memory after a checkpointed fit, what ``load_state`` gives back. Errors
are the libraries' and torch's own messages, first sentence, from the pinned versions.
"""
from __future__ import annotations

import os
import tempfile
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

from course_utils.chapters.ch07_accelerate_run import release_accelerator
from course_utils.chapters.ch07_libraries import quiet_libraries
from course_utils.chapters.raised import raised

N_POINTS, BATCH = 80, 8


def _data(n: int = N_POINTS, shuffle: bool = False) -> DataLoader:
    """`n` fixed points and their sums, in a fixed order unless `shuffle` (then drawn from torch's global stream,
    which Lightning's checkpoint does not hold)."""
    x = torch.randn(n, 2, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=BATCH, shuffle=shuffle)


def _module_class():
    """The probe's LightningModule, built on first use (Lightning is imported only when a probe runs)."""
    import lightning.pytorch as pl

    class Probe(pl.LightningModule):
        """One knob per argument: the optimizer, what configure_optimizers returns, a batch whose training_step
        returns None, a BatchNorm put in eval mode in __init__, and a validation metric given per epoch."""

        def __init__(self, optimizer="sgd", schedule="alone", skip=None, frozen_norm=False, metric=None):
            super().__init__()
            self.net, self.norm = torch.nn.Linear(2, 1), torch.nn.BatchNorm1d(2)
            if frozen_norm:
                self.norm.eval()
            self.optimizer_name, self.schedule, self.skip, self.metric = optimizer, schedule, skip, metric
            self.norm_modes: list[bool] = []
            self.rates: list[float] = []
            self.validation_calls = 0

        def loss(self, batch):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(self.norm(x)), y)

        def training_step(self, batch, batch_idx):
            self.norm_modes.append(self.norm.training)
            self.rates.append(self.trainer.optimizers[0].param_groups[0]["lr"])
            return None if batch_idx == self.skip else self.loss(batch)

        def validation_step(self, batch, batch_idx):
            self.validation_calls += 1
            value = self.loss(batch) if self.metric is None else torch.tensor(self.metric[self.current_epoch])
            self.log("val_metric", 0.0 if self.trainer.sanity_checking else value)

        def configure_optimizers(self):
            if self.optimizer_name == "two":
                return [torch.optim.SGD(self.parameters(), lr=0.1), torch.optim.SGD(self.parameters(), lr=0.1)]
            make = torch.optim.Adam if self.optimizer_name == "adam" else torch.optim.SGD
            optimizer = make(self.parameters(), lr=0.01)
            if self.schedule.startswith("plateau"):
                plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
                if self.schedule == "plateau":
                    return {"optimizer": optimizer, "lr_scheduler": plateau}
                return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": "train_loss"}}
            halving = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
            if self.schedule == "alone":
                return [optimizer], [halving]
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": halving, "interval": "step"}}

    return Probe


def _trainer(epochs: int, folder: str | None = None, callbacks=(), summary: bool = False, **options):
    """The probes' Trainer: one CPU process, no logger or progress bar, checkpointing only when callbacks are given
    (they are ModelCheckpoints unless `options` says otherwise); `options` set or override any other argument."""
    import lightning.pytorch as pl

    return pl.Trainer(**{"max_epochs": epochs, "accelerator": "cpu", "devices": 1, "logger": False,
                         "enable_checkpointing": bool(callbacks), "callbacks": list(callbacks),
                         "enable_progress_bar": False, "enable_model_summary": summary, "default_root_dir": folder,
                         **options})


def _fit(module, epochs: int, validate: bool = True, folder: str | None = None, callbacks=(), ckpt_path=None,
         shuffle: bool = False, summary: bool = False):
    trainer = _trainer(epochs, folder, callbacks, summary)
    trainer.fit(module, _data(shuffle=shuffle), _data(3 * BATCH) if validate else None, ckpt_path=ckpt_path)
    return trainer


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def _gap(a, b) -> float:
    return max((x.float() - y.float()).abs().max().item() for x, y in zip(a.state_dict().values(),
                                                                          b.state_dict().values()))


def lightning_defaults(epochs: int = 2) -> dict[str, object]:
    """Every Lightning probe's counts: schedules, errors, a skipped batch, module modes, the sanity check, a resume
    against an uninterrupted fit, and the weights in memory after a checkpointed fit."""
    import lightning

    found: dict[str, object] = {"version": lightning.__version__, "batches": N_POINTS // BATCH, "epochs": epochs}
    with quiet_libraries(), tempfile.TemporaryDirectory() as folder:
        Probe = _module_class()
        for schedule in ("alone", "step"):
            torch.manual_seed(0)
            trainer = _fit(Probe(schedule=schedule), epochs)
            found[f"scheduler_steps_{schedule}"] = trainer.lr_scheduler_configs[0].scheduler.last_epoch
        for case in ("plateau", "plateau_unlogged", "two"):
            torch.manual_seed(0)
            probe = Probe(schedule=case) if case != "two" else Probe(optimizer="two")
            found[f"error_{case}"] = raised(lambda: _fit(probe, 1), sentences=2 if case == "plateau_unlogged" else 1)
        torch.manual_seed(0)
        skipper = Probe(optimizer="adam", schedule="step", skip=3)
        trainer = _fit(skipper, 1, validate=False)
        found["skip"] = {"global_step": trainer.global_step,
                         "scheduler_steps": trainer.lr_scheduler_configs[0].scheduler.last_epoch,
                         "adam_steps": sorted({int(s["step"]) for s in trainer.optimizers[0].state.values()})}
        torch.manual_seed(0)
        frozen = Probe(frozen_norm=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _fit(frozen, epochs, summary=True)          # the model summary (on by default) is what warns
        found["eval_mode_warning"] = next((str(w.message).split(". ")[0] + "." for w in caught
                                           if "eval mode" in str(w.message)), "no warning")
        found["frozen_norm_modes"] = sorted(set(frozen.norm_modes))
        found["validation_calls"] = frozen.validation_calls
        found["validation_batches"] = len(_data(3 * BATCH))
        found.update(_resume(Probe, epochs, folder))
        found.update(_best_against_last(Probe, folder))
    return found


def _resume(Probe, epochs: int, folder: str) -> dict[str, object]:
    """2 × `epochs` epochs of Adam with a per-step schedule, uninterrupted; the same stopped after `epochs` and
    resumed with fit(ckpt_path=...); and the same weights loaded with load_state_dict into a new fit."""
    torch.manual_seed(0)
    whole = Probe(optimizer="adam", schedule="step")
    _fit(whole, 2 * epochs)
    torch.manual_seed(0)
    first = _fit(Probe(optimizer="adam", schedule="step"), epochs)
    path = os.path.join(folder, "half.ckpt")
    first.save_checkpoint(path)
    torch.manual_seed(1)                       # another start: whatever the resume restores, it restores
    resumed = Probe(optimizer="adam", schedule="step")
    trainer = _fit(resumed, 2 * epochs, ckpt_path=path)
    torch.manual_seed(1)
    reloaded = Probe(optimizer="adam", schedule="step")
    reloaded.load_state_dict(torch.load(path, weights_only=False)["state_dict"])
    again = _fit(reloaded, epochs)
    torch.manual_seed(0)
    shuffled_whole = Probe(optimizer="adam", schedule="step")
    _fit(shuffled_whole, 2 * epochs, shuffle=True)
    torch.manual_seed(0)
    shuffled_first = _fit(Probe(optimizer="adam", schedule="step"), epochs, shuffle=True)
    stream = torch.get_rng_state()                    # where the interrupted run's random stream stood
    shuffled_path = os.path.join(folder, "shuffled.ckpt")
    shuffled_first.save_checkpoint(shuffled_path)
    shuffled_same = {}
    for restored in (False, True):
        torch.manual_seed(0)                          # the same seed as the run it resumes
        shuffled_resumed = Probe(optimizer="adam", schedule="step")
        if restored:
            torch.set_rng_state(stream)
        _fit(shuffled_resumed, 2 * epochs, ckpt_path=shuffled_path, shuffle=True)
        shuffled_same[restored] = _same(shuffled_whole, shuffled_resumed)
    return {"shuffled_same": shuffled_same[False], "shuffled_restored_same": shuffled_same[True],"resumed_same": _same(whole, resumed), "resumed_at": (trainer.current_epoch, trainer.global_step),
            "reloaded_same": _same(whole, reloaded), "reloaded_gap": _gap(whole, reloaded),
            "reloaded_at": (again.current_epoch, again.global_step),
            "first_rates": (whole.rates[epochs * N_POINTS // BATCH], resumed.rates[0], reloaded.rates[0])}


def _best_against_last(Probe, folder: str) -> dict[str, object]:
    """A ModelCheckpoint (save_last=True) watching a metric lowest at epoch 1 of 4: which file it keeps, which epoch
    its last.ckpt holds, and whether the model left in memory by fit() is the best checkpoint's."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    metric = (3.0, 1.0, 2.0, 4.0)
    keeper = ModelCheckpoint(dirpath=os.path.join(folder, "best"), monitor="val_metric", mode="min", save_last=True)
    latest = ModelCheckpoint(dirpath=os.path.join(folder, "latest"))            # no monitor: the latest epoch
    torch.manual_seed(0)
    model = Probe(metric=metric)
    _fit(model, len(metric), callbacks=[keeper, latest])
    best = Probe.load_from_checkpoint(keeper.best_model_path)
    last = torch.load(keeper.last_model_path, weights_only=False)
    return {"metric": metric, "best_file": os.path.basename(keeper.best_model_path), "last_epoch": last["epoch"],
            "in_memory_is_best": _same(model, best), "in_memory_epoch": model.current_epoch - 1,
            "latest_epoch": torch.load(latest.best_model_path, weights_only=False)["epoch"]}


def lightning_default_lines(found: dict[str, object]) -> list[str]:
    """The probes as chapter 7 prints them, one finding per line."""
    batches, epochs = found["batches"], found["epochs"]
    skip, rates = found["skip"], found["first_rates"]
    return [
        f"Lightning {found['version']}; each fit: {batches} batches per epoch",
        f"scheduler returned in a list: stepped {found['scheduler_steps_alone']} times in {epochs} epochs "
        f"(once per epoch); in {{'interval': 'step'}}: {found['scheduler_steps_step']} times",
        f"ReduceLROnPlateau without 'monitor': {found['error_plateau']}",
        f"ReduceLROnPlateau monitoring a metric never logged: {found['error_plateau_unlogged']}",
        f"two optimizers, automatic optimization: {found['error_two']}",
        f"training_step returned None on 1 of {batches} batches: Adam stepped {skip['adam_steps'][0]} times; "
        f"global_step {skip['global_step']} and the per-step scheduler {skip['scheduler_steps']} (both count it)",
        f"a BatchNorm put in eval mode in __init__, {epochs} epochs with validation: its .training in every "
        f"training_step: "
        f"{' and '.join(map(str, found['frozen_norm_modes']))} (Lightning keeps each module's mode)",
        f"  and the model summary warns: {found['eval_mode_warning']}",
        f"validation_step calls in {epochs} epochs of {found['validation_batches']} validation batches: "
        f"{found['validation_calls']} (the sanity check runs "
        f"{found['validation_calls'] - epochs * found['validation_batches']} first)",
        f"resumed with fit(ckpt_path=...) after {epochs} of {2 * epochs} epochs: weights equal to the uninterrupted "
        f"fit's: {found['resumed_same']} (epoch {found['resumed_at'][0]}, global_step {found['resumed_at'][1]})",
        f"weights loaded with load_state_dict, then fit for {epochs} more: equal: {found['reloaded_same']} "
        f"(largest gap {found['reloaded_gap']:.2f}; epoch {found['reloaded_at'][0]}, "
        f"global_step {found['reloaded_at'][1]}: Adam's moments and the schedule start again)",
        f"rate at the first update after epoch {epochs}: uninterrupted {rates[0]:.1e}, resumed {rates[1]:.1e}, "
        f"reloaded {rates[2]:.1e}",
        f"the same resume, the training loader shuffled: equal to the uninterrupted fit's: {found['shuffled_same']} "
        f"(the checkpoint holds no random stream); with torch's random state saved at the stop and restored: "
        f"{found['shuffled_restored_same']}",
        f"ModelCheckpoint(mode='min', save_last=True) on a metric {list(found['metric'])} by epoch: keeps "
        f"{found['best_file']}; last.ckpt holds epoch {found['last_epoch']} (written only when a top-k file is)",
        f"the model in memory after fit() (epoch {found['in_memory_epoch']}'s end) is the best checkpoint: "
        f"{found['in_memory_is_best']}; a second ModelCheckpoint() without a monitor holds epoch "
        f"{found['latest_epoch']}",
    ]


def accelerate_resume(epochs_done: int = 2, epochs: int = 10) -> dict[str, object]:
    """Accelerate's save_state after `epochs_done` of `epochs` epochs (Adam, OneCycleLR sized for the whole run), then
    a fresh process's load_state followed by the usual `for epoch in range(epochs)` loop: what came back, how
    many updates ran, and where the schedule ended; beside it, torch's OneCycleLR stepped past its total alone."""
    found: dict[str, object] = {"epochs_done": epochs_done, "epochs": epochs, "batches": N_POINTS // BATCH}
    total = epochs * found["batches"]
    with quiet_libraries(), tempfile.TemporaryDirectory() as folder:
        import accelerate
        from accelerate import Accelerator

        def prepared(seed: int):
            torch.manual_seed(seed)
            model = torch.nn.Linear(2, 1)
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
            schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, total_steps=total)
            accelerator = Accelerator(cpu=True)
            return (accelerator, schedule, *accelerator.prepare(model, optimizer, _data(), schedule))

        def train(parts, epoch_count: int) -> int:
            accelerator, _, model, optimizer, loader, schedule = parts
            updates = 0
            for _ in range(epoch_count):
                for x, y in loader:
                    accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
                    optimizer.step()
                    schedule.step()
                    optimizer.zero_grad()
                    updates += 1
            return updates

        try:
            parts = prepared(0)
            train(parts, epochs_done)
            parts[0].save_state(folder)
            release_accelerator(parts[0])
            parts = prepared(1)
            parts[0].load_state(folder)
            inner, optimizer = parts[1], parts[3]
            found["restored_schedule_steps"] = inner.last_epoch
            found["restored_adam_steps"] = int(next(iter(optimizer.optimizer.state.values()))["step"])
            found["updates_after"] = train(parts, epochs)
            found["final_schedule_steps"] = inner.last_epoch
            found["final_lr"] = optimizer.param_groups[0]["lr"]
        finally:
            release_accelerator(parts[0])
        found["version"] = accelerate.__version__
        found["cosine"] = _prepared_cosine_past_end(total, extra=total // 5)
    optimizer = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=0.01)
    alone = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, total_steps=total)

    def past_the_end() -> None:
        for step in range(total + 1):
            optimizer.step()
            alone.step()
            if step == total - 2:                # last_epoch total - 1: the schedule's last designed step
                found["designed_final_lr"] = optimizer.param_groups[0]["lr"]

    found["torch_alone"] = raised(past_the_end, sentences=2)
    found["total"] = total
    return found


def _prepared_cosine_past_end(total: int, extra: int) -> tuple[float, float]:
    """A CosineAnnealingLR(T_max=total) prepared by Accelerate and stepped `extra` times past its end: the rate at
    T_max and at T_max + extra (Accelerate skips calls past the end only for schedulers with total_steps)."""
    from accelerate import Accelerator

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    accelerator = Accelerator(cpu=True)
    try:
        optimizer, schedule = accelerator.prepare(optimizer,
                                                  torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total))
        rates = []
        for step in range(1, total + extra + 1):
            optimizer.step()
            schedule.step()
            if step in (total, total + extra):
                rates.append(optimizer.param_groups[0]["lr"])
    finally:
        release_accelerator(accelerator)
    return rates[0], rates[1]


def accelerate_resume_lines(found: dict[str, object]) -> list[str]:
    """The Accelerate resume as chapter 7 prints it."""
    done, epochs, total = found["epochs_done"], found["epochs"], found["total"]
    return [
        f"Accelerate {found['version']}: save_state after {done} of {epochs} epochs ({found['batches']} batches each), "
        f"OneCycleLR sized for {total} updates",
        f"load_state in a new run: schedule at step {found['restored_schedule_steps']}, Adam at step "
        f"{found['restored_adam_steps']}; the epoch counter is the loop's own, so range({epochs}) ran "
        f"{found['updates_after']} more updates ({done * found['batches'] + found['updates_after']} in all)",
        f"the schedule stopped at step {found['final_schedule_steps']} (the prepared scheduler skips calls past "
        f"total_steps); the last {done * found['batches'] + found['updates_after'] - total} updates ran at "
        f"{found['final_lr']:.2e}, the rate one step past its end (its designed last rate: "
        f"{found['designed_final_lr']:.2e})",
        f"torch's OneCycleLR alone, stepped {total + 1} times: {found['torch_alone']}",
        f"a prepared CosineAnnealingLR(T_max={total}) is not stopped: rate {found['cosine'][0]:.2e} at step {total}, "
        f"{found['cosine'][1]:.2e} at step {total + total // 5} (climbing back)",
    ]


def overfit_lag_lines(epochs: int = 5) -> list[str]:
    """`overfit_batches=1`, the same loader for training and validation, both losses logged on_epoch only: each
    epoch's train_loss is computed before its one update, its val_loss after it, so train_loss of epoch k is
    val_loss of epoch k - 1, bit for bit (the weights it saw are the same)."""
    import lightning.pytorch as pl

    class Logged(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(2, 1)

        def _loss(self, batch, name: str):
            value = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log(name, value, on_step=False, on_epoch=True)
            return value

        def training_step(self, batch, batch_idx):
            return self._loss(batch, "train_loss")

        def validation_step(self, batch, batch_idx):
            self._loss(batch, "val_loss")

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    class Record(pl.Callback):
        def __init__(self):
            self.rows: list[dict[str, float]] = []

        def on_train_epoch_end(self, trainer, module):
            self.rows.append({k: v.item() for k, v in trainer.callback_metrics.items()})

    record = Record()
    with quiet_libraries():
        torch.manual_seed(0)
        _trainer(epochs, callbacks=[record], overfit_batches=1, enable_checkpointing=False).fit(Logged(), _data(),
                                                                                                 _data())
    rows = record.rows
    lagged = sum(now["train_loss"] == before["val_loss"] for before, now in zip(rows, rows[1:]))
    return [f"overfit_batches=1, one loader for both, {epochs} epochs: train_loss " +
            ", ".join(f"{r['train_loss']:.3f}" for r in rows),
            f"{'':40}val_loss   " + ", ".join(f"{r['val_loss']:.3f}" for r in rows),
            f"train_loss of epoch k equal to val_loss of epoch k-1, bit for bit: {lagged} of {epochs - 1}; "
            f"validation after epoch 1 below its train_loss: {rows[0]['val_loss'] < rows[0]['train_loss']}"]
