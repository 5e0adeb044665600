"""fit(config, task): the production training loop of chapter 7, every component in order on one page.

Read it top to bottom: where am I (alone or one rank of torchrun), seeding, the task (your model and
data, or a built-in one), data order, optimizer, schedule, precision, early stopping, resume, wrap
(compile, DDP), logging, then the loop, whose body is chapter 3's step plus accumulation, clipping,
the NaN guard, checkpoints and validation; at the end the weights it delivers.
"""
from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_utils.engine.arithmetic import batch_sizes, is_update_step, loss_weight, training_arithmetic
from course_utils.engine.loop import global_norm
from course_utils.engine.models import make_optimizer
from course_utils.infra.notebook import seed_everything
from course_utils.production.determinism import deterministic
from course_utils.production import checkpoint as ckpt
from course_utils.production import data_order, distributed, rng
from course_utils.production.amp import Precision
from course_utils.production.builtin import task_to_train
from course_utils.production.config import MONITORS, FitConfig
from course_utils.production.early_stopping import EarlyStopping
from course_utils.production.evaluation import check_task, evaluate, metric_names, to_device, train_mode
from course_utils.production.guard import APPLIED, SKIPPED, DeviceSchedule, Settled, UpdateGuard, can_fuse, \
    why_reads_per_update, zero_momentum
from course_utils.production.logs import RunLog
from course_utils.production.task import Task, TaskError
from course_utils.production.writer import BackgroundWriter, snapshot
from course_utils.engine.schedules import CADENCE, make_scheduler
from course_utils.infra.storage import atomic_write_bytes


@dataclass
class FitResult:
    """What fit() returns (chapter 7): how it ended, the counts, the per-epoch history, where the files are."""

    stop_reason: str                  # "completed", "early stopping: ...", "diverged: ..."
    updates: int                      # optimizer steps taken (skipped non-finite updates not counted)
    skipped_updates: int
    epochs_completed: int
    history: list[dict[str, Any]]     # one dict per epoch, as in metrics.jsonl
    best: dict[str, Any]              # {"metric", "value", "epoch"} of the best validation check
    resumed_from: str | None
    paths: dict[str, str] = field(default_factory=dict)
    delivered: str = "last"           # which weights model.pt holds: "best" (early stopping on) or "last"

    @property
    def final(self) -> dict[str, Any]:
        """The last epoch's metrics ({} if no epoch ended)."""
        return self.history[-1] if self.history else {}

    @property
    def completed(self) -> bool:
        return not self.stop_reason.startswith("diverged")


def weights_digest(model: nn.Module) -> str:
    """SHA-256 of the model's tensors, in state_dict order: equal digests mean bitwise-equal weights."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def fit(config: FitConfig, task: Task | None = None) -> FitResult:
    """Train `task` (else config.task: the spiral MLP by default) with exact resume, AMP, DDP (chapter 7)."""
    cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    with deterministic(torch.device("cuda" if cuda else "cpu"), config.deterministic):
        return _fit(config, task)


def _fit(config: FitConfig, task: Task | None) -> FitResult:
    """fit's body: the steps of chapter 7's flowchart, in order."""
    # -- 1. where am I: alone, or one rank of `torchrun --nproc_per_node=N` ----------------------
    ranks = distributed.setup(config.device)
    device, main = ranks.device, ranks.is_main
    say = print if main else (lambda *args, **kw: None)
    out = Path(config.out)
    folder = out / "checkpoints"
    try:
        # -- 2. seed everything (same seed on every rank: same init, same dropout stream) --------
        if config.threads:
            torch.set_num_threads(config.threads)
        seed_everything(config.seed)

        # -- 3. the task, its data order and loaders; one batch checked before any training ---------
        task = task_to_train(config, task)
        cuda = device.type == "cuda"
        sampler = data_order.ResumableSampler(task.train_data, ranks.world_size, ranks.rank, config.seed)
        loader = data_order.train_loader(task.train_data, sampler, config.batch_size, config.workers, cuda,
                                         config.seed, task.collate_fn, _seeded(task, task.train_data))
        val_loader = data_order.eval_loader(task.val_data, task.val_batch_size, cuda, config.seed, task.collate_fn,
                                            _seeded(task, task.val_data))
        sizes = batch_sizes(sampler.num_samples, config.batch_size)          # this rank's micro-batch sizes
        counts = training_arithmetic(len(task.train_data), config.batch_size, config.epochs, config.accum_steps,
                                     world_size=ranks.world_size)             # chapter 0's calculator
        assert counts.iters_per_epoch == len(sizes)
        model = task.model.to(device)
        loss_fn = task.loss_fn.to(device) if isinstance(task.loss_fn, nn.Module) else task.loss_fn
        if isinstance(task.validator, nn.Module):              # a torchmetrics object keeps its state in buffers
            task.validator.to(device)
        precision = Precision(config.amp, device)
        class_dim = check_task(task, model, val_loader, precision, device)  # does the output fit the loss?
        mode = _monitor_mode(config.monitor, task, metric_names(task, class_dim))

        # -- 4. optimizer, schedule, early stopping ----------------------------------------------
        params = [p for p in model.parameters() if p.requires_grad]
        fused = can_fuse(params)                    # fused kernels skip a bad update on the device (the guard)
        optimizer = make_optimizer(config.optimizer, params, lr=config.lr, momentum=config.momentum,
                                   weight_decay=config.weight_decay, fused=fused or None)
        if fused:
            zero_momentum(optimizer)
        def make(opt):
            return make_scheduler(config.schedule, opt, epochs=config.epochs, steps_per_epoch=counts.updates_per_epoch)
        cadence = CADENCE[config.schedule]            # the table first: the scheduler rewrites the groups' rates
        on_device_lr = DeviceSchedule.build(lambda opt: make(opt).scheduler, optimizer, counts.total_weight_updates,
                                            device) if fused and cadence == "update" else None
        scheduler, cadence = make(optimizer)
        reads_why = why_reads_per_update(fused, cadence, precision, on_device_lr)
        guard = UpdateGuard(optimizer, precision, ranks.world_size, reads_why is None, on_device_lr)
        stopper = EarlyStopping(config.patience if config.patience is not None else 2**62, config.min_delta, mode)
        stopping = config.patience is not None      # without patience the stopper only tracks the best value
        identity = _identity(task, model)
        seed_everything(training_seed(config.seed))  # training's draws start here, however many building the task
                                                      # took: the same run from fit(config, task) and from --task

        # -- 5. resume: every piece above gets its state back from the newest valid checkpoint -------
        state = {"epoch": 0, "position": 0, "updates": 0, "skipped": 0, "bad_in_a_row": 0, "history": [],
                 "running": [0.0, 0.0], "best": {"metric": config.monitor, "value": None, "epoch": None},
                 "elapsed_s": 0.0}
        resumed_from = None
        found = _find_resume(config, identity, folder, ranks, say)
    except (TaskError, ckpt.CheckpointError, ValueError):
        distributed.abandon(ranks)                  # every rank raises the same error: leave without waiting
        raise
    if found is not None:
        resumed_from, saved = found
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        precision.load_state_dict(saved["scaler"])
        stopper.load_state_dict(saved["early_stopping"])
        state = {key: saved[key] for key in state}
        mine = saved["ranks"][ranks.rank]               # this rank's RNG states and running sums
        rng.restore(mine["rng"], device)
        state["running"] = list(mine["running"])
        say(f"resumed from {resumed_from} (epoch {state['epoch'] + 1}, after {state['position']} batches, "
            f"{state['updates']} updates)")

    if guard.schedule is not None:
        guard.schedule.start(state["updates"])         # the learning rate on the device, from the applied count

    # -- 6. wrap: torch.compile, then DistributedDataParallel -----------------------------------
    net = torch.compile(model) if config.compile else model
    net = distributed.wrap(net, ranks)

    # -- 7. logging: metrics.jsonl, TensorBoard (purging what a killed run logged past its checkpoint), tqdm
    log = RunLog(out, main, state["history"], state["updates"] if found else None, config.tensorboard,
                 config.progress)
    plain_config = config.as_plain()
    writer = BackgroundWriter(before=log.flush_events,
                              after=lambda: (ckpt.prune(folder, "last", config.keep), ckpt.prune(folder, "best", 1)),
                              behind=lambda waited, share, copy, write: say(
                                  f"checkpoints come faster than they are written: training has waited {waited:.1f} s "
                                  f"for earlier writes ({share:.0%} of the run so far; the last write took "
                                  f"{write * 1e3:.0f} ms on the writer thread, the copy, training's own part, "
                                  f"{copy * 1e3:.0f} ms); checkpoint less often (checkpoint_every) to stop waiting"))

    def save_checkpoint(epoch: int, position: int, best: bool = False) -> None:
        """Every piece of state, by rank 0 only: copied here, written durably on a thread, the old ones pruned after."""
        per_rank = distributed.gather({"rng": rng.capture(device), "running": list(state["running"])}, ranks)
        if not main:
            return
        log.hand_over()                                   # the steps logged so far reach disk before the checkpoint
        kinds = ("best", "last") if best else ("last",)   # the best first: a 'last' naming it finds it
        names = [ckpt.checkpoint_name(kind, epoch, position) for kind in kinds]
        writer.save({
            "format": ckpt.FORMAT, "config": plain_config, "task": identity, "epoch": epoch,
            "position": position, "updates": state["updates"], "skipped": state["skipped"],
            "bad_in_a_row": state["bad_in_a_row"], "running": list(state["running"]), "history": state["history"],
            "best": dict(state["best"]), "elapsed_s": state["elapsed_s"] + time.perf_counter() - started,
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "scaler": precision.state_dict(), "early_stopping": stopper.state_dict(), "rng": per_rank[0]["rng"],
            "world_size": ranks.world_size, "ranks": per_rank}, folder, names)

    def lr_now() -> float:
        """The first group's learning rate, as a number (on the device, from the schedule's table: no read)."""
        return guard.schedule.lr(state["updates"]) if guard.schedule else optimizer.param_groups[0]["lr"]

    def account(settled: list[Settled]) -> str | None:
        """What the host learns at a log point, update by update: counts, the running loss, the per-update log, the
        skipped updates by number; why to stop (a run of non-finite updates), else None."""
        for one in settled:
            if one.outcome == APPLIED:
                state["updates"] += 1
                state["bad_in_a_row"] = 0
                state["running"][0] += one.loss * one.examples
                state["running"][1] += one.examples
                if cadence == "update":
                    scheduler.step()
                log.update(state["updates"], {"loss": one.loss, "lr": lr_now(), "grad_norm": one.grad_norm})
            elif one.outcome == SKIPPED:
                state["skipped"] += 1
                state["bad_in_a_row"] += 1
                say(f"skipped update {state['updates'] + state['skipped']} at epoch {one.epoch + 1}, batch "
                    f"{one.batch + 1}: loss {one.loss:.4g}, "
                    f"gradient norm {one.grad_norm:.4g} ({state['bad_in_a_row']} in a row)")
                if state["bad_in_a_row"] >= config.max_bad_steps:
                    return (f"diverged: {state['bad_in_a_row']} updates in a row had a non-finite loss or gradient "
                            f"(epoch {one.epoch + 1}, batch {one.batch + 1}); nothing was saved after the last "
                            "good checkpoint")
        return None

    # -- 8. the loop ---------------------------------------------------------------------------
    if reads_why:
        say(f"the NaN guard reads the device once per update: {reads_why}")
    started = time.perf_counter()
    stop_reason = "completed"
    K, micro_per_epoch = config.accum_steps, len(sizes)
    updates_at = [is_update_step(i, micro_per_epoch, K) for i in range(micro_per_epoch)]  # K batches, or the flush
    weights = [loss_weight(i, sizes, K) for i in range(micro_per_epoch)]   # each batch's share of its window
    train_mode(model, say)                              # eval -> train; layers frozen in eval inside stay frozen
    for epoch in range(state["epoch"], config.epochs):
        if stopping and stopper.should_stop:
            stop_reason = f"early stopping after epoch {epoch}: {stopper.reason}"
            break
        first = state["position"] if epoch == state["epoch"] else 0
        data_order.start_epoch(loader, epoch, first, config.seed)
        log.start_epoch(epoch, config.epochs, micro_per_epoch, first)
        if first == 0:
            state["running"] = [0.0, 0.0]                   # this epoch's (loss x examples, examples)
        window: list[torch.Tensor] = []                     # this window's micro-batch losses (no sync yet)
        for i, batch in enumerate(loader, start=first):
            inputs, targets = task.split(to_device(batch, device))
            update = updates_at[i]                                     # K micro-batches, or the epoch's flush
            # forward and backward; the loss weighted by this batch's share of its window's examples
            with distributed.sync_gradients(net, update):            # DDP all-reduces on an update only
                with precision.autocast():
                    loss = loss_fn(task.forward(net, inputs), targets)
                if epoch * micro_per_epoch + i in config.inject_nan_at:
                    loss = loss * float("nan")                        # demo: a poisoned batch
                precision.backward(loss if weights[i] == 1.0 else loss * weights[i])
            window.append(loss.detach())
            log.micro_step()
            if not update:
                continue
            # the update: unscale (fp16), measure and clip the norm, then step, skipped on the device if not finite
            precision.unscale(optimizer)
            grad_norm = global_norm([p.grad for p in params if p.grad is not None])
            if config.clip_norm:
                nn.utils.clip_grads_with_norm_(params, config.clip_norm, grad_norm)
            guard.step(grad_norm, window, sizes[i + 1 - len(window):i + 1], epoch, i)   # no host read (see guard.py)
            window.clear()
            optimizer.zero_grad(set_to_none=True)
            every = config.checkpoint_every
            taken = state["updates"] + state["skipped"] + guard.taken         # applied or skipped
            checkpoint_now = every and taken % every == 0 and i + 1 < micro_per_epoch
            if checkpoint_now or guard.taken >= config.log_every or not guard.on_device:
                stop_reason = account(guard.settle()) or stop_reason             # a log point: the one host read
                if stop_reason != "completed":
                    break
            if checkpoint_now:
                save_checkpoint(epoch, i + 1)                    # mid-epoch: resume restarts at batch i + 1
        if stop_reason == "completed":
            stop_reason = account(guard.settle()) or stop_reason                 # the epoch's last updates
        if stop_reason != "completed":
            break
        # -- end of epoch: schedule, validate, early stopping, log, checkpoint ------------------
        if cadence == "epoch":
            scheduler.step()
        validation = evaluate(task, model, val_loader, precision, device, class_dim)
        loss_sum, seen = distributed.all_sum(torch.tensor(state["running"], dtype=torch.float64), ranks).tolist()
        improved = stopper.update(validation[config.monitor])
        if improved:
            state["best"] = {"metric": config.monitor, "value": stopper.best_score, "epoch": epoch + 1}
        record = {"epoch": epoch + 1, "updates": state["updates"], "train_loss": loss_sum / max(seen, 1),
                  **validation, "lr": lr_now(), "skipped_updates": state["skipped"],
                  "elapsed_s": round(state["elapsed_s"] + time.perf_counter() - started, 3)}
        state["history"].append(record)
        log.epoch(record)
        state["position"] = 0
        save_checkpoint(epoch + 1, 0, best=improved)
        if stopping and stopper.should_stop:
            stop_reason = f"early stopping after epoch {epoch + 1}: {stopper.reason}"
            break

    # -- 9. the end: every checkpoint on disk; the weights delivered (the best ones with early stopping)
    if main:
        writer.wait()                                  # the last checkpoint on disk before anything below
    log.close()
    digests = distributed.gather(weights_digest(model), ranks)     # also waits for rank 0's last write
    paths = {"out": str(out), "metrics": str(out / "metrics.jsonl"), "checkpoints": str(folder),
             "tb": str(out / "tb"), "model": str(out / "model.pt")}
    diverged = stop_reason.startswith("diverged")
    delivered = "best" if stopping and not diverged and state["best"]["epoch"] is not None else "last"
    # model.pt and model-last.pt hold CPU tensors, as the checkpoints do: they load on a machine without a GPU
    last_weights = ckpt.serialize(snapshot(model.state_dict())) if main and not diverged else None
    if delivered == "best":                          # Keras's restore_best_weights: the model object too
        try:
            model.load_state_dict(_best_weights(folder, state["best"]["epoch"]))
            paths["model_last"] = str(out / "model-last.pt")
        except ckpt.CheckpointError as exc:
            warnings.warn(f"delivering the last weights, not the best: {exc}", RuntimeWarning, stacklevel=2)
            delivered = "last"
    if main and diverged:
        say(stop_reason)                                   # the newest checkpoint is the last good state
    elif main:
        if delivered == "best":
            atomic_write_bytes(out / "model-last.pt", last_weights)
        atomic_write_bytes(out / "model.pt", last_weights if delivered == "last" else
                           ckpt.serialize(snapshot(model.state_dict())))
    if main:
        summary = {"stop_reason": stop_reason, "updates": state["updates"], "skipped_updates": state["skipped"],
                   "world_size": ranks.world_size, "backend": ranks.backend or None, "device": str(device),
                   "task": identity["name"], "weights_sha256_per_rank": digests, "delivered": delivered,
                   "best": state["best"], "resumed_from": str(resumed_from) if resumed_from else None}
        atomic_write_bytes(out / "summary.json", json.dumps(summary, indent=1).encode())
    distributed.teardown(ranks)
    return FitResult(stop_reason, state["updates"], state["skipped"], len(state["history"]), state["history"],
                     state["best"], str(resumed_from) if resumed_from else None, paths, delivered)


def training_seed(seed: int) -> int:
    """The seed of training's own random stream (dropout...): derived from the one that built the task, not equal."""
    return (seed + 0x9E3779B9) % 2**32


def _seeded(task: Task, dataset) -> bool:
    """Seed each batch's random draws (auto: unless the dataset draws nothing, like a TensorDataset)."""
    return task.seed_batches if task.seed_batches is not None else not data_order.draws_nothing(dataset)


def _monitor_mode(monitor: str, task: Task, names: list[str]) -> str:
    """'min' or 'max' for the monitored metric; TaskError when this task does not log it."""
    if monitor not in names:
        raise TaskError(f"monitor {monitor} is not logged by task {task.name!r}, which logs {', '.join(names)}"
                        + (" (val_acc needs class logits for integer targets)" if monitor == "val_acc" else ""))
    return MONITORS.get(monitor, task.metric_mode)


def _identity(task: Task, model: nn.Module) -> dict[str, Any]:
    """What a checkpoint records of the task: a resume must train the same model on the same data sizes."""
    shapes = [f"{name}:{tuple(p.shape)}" for name, p in model.state_dict().items()]
    return {"name": task.name, "train_examples": len(task.train_data), "val_examples": len(task.val_data),
            "model": hashlib.sha256("\n".join(shapes).encode()).hexdigest()[:16]}


def _best_weights(folder: Path, epoch: int) -> dict[str, torch.Tensor]:
    """The model weights of the best checkpoint (written at the end of `epoch`), checksum verified."""
    return ckpt.load_checkpoint(folder / ckpt.checkpoint_name("best", epoch, 0))["model"]


def _find_resume(config: FitConfig, identity: dict[str, Any], folder: Path, ranks,
                 say) -> tuple[Path, dict[str, Any]] | None:
    """Rank 0 picks the checkpoint (or the error); every rank then loads the same file."""
    choice: tuple[str, str] | None = None   # ("path", p) | (error type's name, message) | None
    if ranks.is_main:
        try:
            if not config.resume:
                if ckpt.checkpoint_files(folder):
                    raise ckpt.CheckpointError(f"{folder} already holds checkpoints of an earlier run: pass resume "
                                               "(--resume) to continue it, or choose another output folder")
            else:
                found = ckpt.newest_valid(folder, say)
                if found is None:
                    say(f"--resume: no checkpoint in {folder}, starting fresh")
                else:
                    choice = ("path", str(found[0]))
        except ckpt.CheckpointError as exc:
            choice = (type(exc).__name__, str(exc))
    choice = distributed.share(choice, ranks)
    if choice is None:
        return None
    if choice[0] != "path":                            # every rank raises rank 0's error, of its type
        raise getattr(ckpt, choice[0])(choice[1])
    path = Path(choice[1])
    saved = ckpt.load_checkpoint(path)
    changed = config.differences(saved["config"])
    theirs = saved.get("task", {"name": "spiral"})
    changed += [f"task {key} {theirs.get(key)!r} (now {value!r})" for key, value in identity.items()
                if key in theirs and theirs[key] != value]
    if saved["world_size"] != ranks.world_size:
        changed.insert(0, f"world size {saved['world_size']} (now {ranks.world_size})")
    if changed:
        raise ckpt.CheckpointError(f"checkpoint {path} belongs to a different run: {', '.join(changed[:3])}; "
                                   "resume with the same settings or choose another output folder")
    if saved["epoch"] > config.epochs:
        raise ckpt.CheckpointError(f"checkpoint {path} is at epoch {saved['epoch']}, past epochs={config.epochs}")
    return path, saved
