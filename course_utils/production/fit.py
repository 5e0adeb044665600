"""fit(config): the production training loop of chapter 7, every component in order on one page.

Read it top to bottom: where am I (alone or one rank of torchrun), seeding, data, model, optimizer,
schedule, precision, early stopping, resume, wrap (compile, DDP), logging, then the loop, whose body
is chapter 3's step plus accumulation, clipping, the NaN guard, checkpoints and validation.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_utils.arithmetic import batch_sizes, is_update_step, loss_weight, training_arithmetic
from course_utils.data import spiral_splits
from course_utils.models import MLP, make_optimizer
from course_utils.notebook import seed_everything
from course_utils.production import checkpoint as ckpt
from course_utils.production import data_order, distributed, rng
from course_utils.production.amp import Precision
from course_utils.production.config import FitConfig
from course_utils.production.early_stopping import EarlyStopping
from course_utils.production.logs import RunLog
from course_utils.schedules import make_scheduler
from course_utils.storage import atomic_write_bytes


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

    @property
    def final(self) -> dict[str, Any]:
        """The last epoch's metrics ({} if no epoch ended)."""
        return self.history[-1] if self.history else {}

    @property
    def completed(self) -> bool:
        return not self.stop_reason.startswith("diverged")


def evaluate(model: nn.Module, loader, precision: Precision, device: torch.device) -> tuple[float, float]:
    """Validation loss (mean over examples) and accuracy, in eval mode without gradients (chapter 4)."""
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    with torch.no_grad():
        for inputs, targets in loader:
            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
            with precision.autocast():
                logits = model(inputs)
            loss_sum += nn.functional.cross_entropy(logits.float(), targets, reduction="sum").double()
            correct += (logits.argmax(dim=1) == targets).sum()
    model.train()
    n = len(loader.dataset)
    return loss_sum.item() / n, correct.item() / n


def weights_digest(model: nn.Module) -> str:
    """SHA-256 of the model's tensors, in state_dict order: equal digests mean bitwise-equal weights."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def fit(config: FitConfig) -> FitResult:
    """Train the spiral MLP with checkpoints, exact resume, AMP, early stopping, logging, DDP (chapter 7)."""
    # -- 1. where am I: alone, or one rank of `torchrun --nproc_per_node=N` ----------------------
    ranks = distributed.setup(config.device)
    device, main = ranks.device, ranks.is_main
    say = print if main else (lambda *args, **kw: None)
    out = Path(config.out)
    folder = out / "checkpoints"

    # -- 2. seed everything (same seed on every rank: same init, same dropout stream) ------------
    if config.threads:
        torch.set_num_threads(config.threads)
    seed_everything(config.seed)

    # -- 3. data: the spiral, an order that depends only on (seed, epoch), seeded loaders --------
    splits = spiral_splits(config.n_train, config.n_val, classes=config.classes, noise=config.noise,
                           seed=config.seed)
    sampler = data_order.ResumableSampler(splits.train, ranks.world_size, ranks.rank, config.seed)
    cuda = device.type == "cuda"
    loader = data_order.train_loader(splits.train, sampler, config.batch_size, config.workers, cuda, config.seed)
    val_loader = data_order.eval_loader(splits.val, 256, cuda)
    sizes = batch_sizes(sampler.num_samples, config.batch_size)          # this rank's micro-batch sizes
    counts = training_arithmetic(config.n_train, config.batch_size, config.epochs, config.accum_steps,
                                 world_size=ranks.world_size)             # chapter 0's calculator
    assert counts.iters_per_epoch == len(sizes)

    # -- 4. model, optimizer, schedule, precision, early stopping --------------------------------
    model = MLP(2, config.hidden, config.classes, config.depth, config.dropout).to(device)
    optimizer = make_optimizer(config.optimizer, model.parameters(), lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay)
    scheduler, cadence = make_scheduler(config.schedule, optimizer, epochs=config.epochs,
                                        steps_per_epoch=counts.updates_per_epoch)
    precision = Precision(config.amp, device)
    stopper = EarlyStopping(config.patience if config.patience is not None else 2**62, config.min_delta, config.mode)
    stopping = config.patience is not None          # without patience the stopper only tracks the best value
    loss_fn = nn.CrossEntropyLoss()

    # -- 5. resume: every piece above gets its state back from the newest valid checkpoint -------
    state = {"epoch": 0, "position": 0, "updates": 0, "skipped": 0, "bad_in_a_row": 0, "history": [],
             "running": [0.0, 0.0], "best": {"metric": config.monitor, "value": None, "epoch": None},
             "elapsed_s": 0.0}
    resumed_from = None
    found = _find_resume(config, folder, ranks, say)
    if found is not None:
        resumed_from, saved = found
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        precision.load_state_dict(saved["scaler"])
        stopper.load_state_dict(saved["early_stopping"])
        state = {key: saved[key] for key in state}
        mine = saved["ranks"][ranks.rank]               # this rank's RNG states and running sums
        rng.restore(mine["rng"])
        state["running"] = list(mine["running"])
        say(f"resumed from {resumed_from} (epoch {state['epoch'] + 1}, after {state['position']} batches, "
            f"{state['updates']} updates)")

    # -- 6. wrap: torch.compile, then DistributedDataParallel -----------------------------------
    net = torch.compile(model) if config.compile else model
    net = distributed.wrap(net, ranks)

    # -- 7. logging: metrics.jsonl, TensorBoard (purging what a killed run logged past its checkpoint), tqdm
    log = RunLog(out, main, state["history"], state["updates"] if found else None, config.tensorboard,
                 config.progress)

    def save_checkpoint(epoch: int, position: int, best: bool = False) -> None:
        """Every piece of state, written by rank 0 only, durably; the old ones pruned after."""
        per_rank = distributed.gather({"rng": rng.capture(), "running": list(state["running"])}, ranks)
        if not main:
            return
        log.flush()
        payload = ckpt.serialize({
            "format": ckpt.FORMAT, "config": config.as_plain(), "epoch": epoch, "position": position,
            "updates": state["updates"], "skipped": state["skipped"], "bad_in_a_row": state["bad_in_a_row"],
            "running": list(state["running"]), "history": state["history"], "best": dict(state["best"]),
            "elapsed_s": state["elapsed_s"] + time.perf_counter() - started,
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "scaler": precision.state_dict(), "early_stopping": stopper.state_dict(), "rng": per_rank[0]["rng"],
            "world_size": ranks.world_size, "ranks": per_rank})
        ckpt.write_checkpoint(folder, ckpt.checkpoint_name("last", epoch, position), payload)
        if best:
            ckpt.write_checkpoint(folder, ckpt.checkpoint_name("best", epoch, position), payload)
            ckpt.prune(folder, "best", 1)
        ckpt.prune(folder, "last", config.keep)

    # -- 8. the loop ---------------------------------------------------------------------------
    started = time.perf_counter()
    stop_reason = "completed"
    K, micro_per_epoch = config.accum_steps, len(sizes)
    model.train()
    for epoch in range(state["epoch"], config.epochs):
        if stopping and stopper.should_stop:
            break
        first = state["position"] if epoch == state["epoch"] else 0
        data_order.start_epoch(loader, epoch, first, config.seed)
        log.start_epoch(epoch, config.epochs, micro_per_epoch, first)
        if first == 0:
            state["running"] = [0.0, 0.0]                   # this epoch's (loss x examples, examples)
        window_loss = torch.zeros((), dtype=torch.float64, device=device)
        window_examples = 0
        for i, (inputs, targets) in enumerate(loader, start=first):
            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
            update = is_update_step(i, micro_per_epoch, K)              # K micro-batches, or the epoch's flush
            # forward and backward; the loss weighted by this batch's share of its window's examples
            with distributed.sync_gradients(net, update):            # DDP all-reduces on an update only
                with precision.autocast():
                    loss = loss_fn(net(inputs), targets)
                if epoch * micro_per_epoch + i in config.inject_nan_at:
                    loss = loss * float("nan")                        # demo: a poisoned batch
                precision.backward(loss * loss_weight(i, sizes, K))
            window_loss += loss.detach().double() * len(targets)
            window_examples += len(targets)
            log.micro_step()
            if not update:
                continue
            # the update: unscale (fp16), measure and clip the norm, guard against NaN/Inf, step
            precision.unscale(optimizer)
            params = [p for p in model.parameters() if p.grad is not None]
            grad_norm = (nn.utils.clip_grad_norm_(params, config.clip_norm) if config.clip_norm
                         else nn.utils.get_total_norm([p.grad for p in params]))
            grad_norm, window_mean = grad_norm.item(), window_loss.item() / window_examples
            stepped = math.isfinite(grad_norm) and math.isfinite(window_mean)
            if stepped:
                precision.step(optimizer)
                state["updates"] += 1
                state["bad_in_a_row"] = 0
                state["running"][0] += window_mean * window_examples
                state["running"][1] += window_examples
                if cadence == "update":
                    scheduler.step()
            elif precision.scaler is not None and math.isfinite(window_mean):
                precision.step(optimizer)                 # fp16 overflow: the scaler skips it and lowers the scale
            else:
                if precision.scaler is not None:
                    precision.step(optimizer)             # fp16: the scaler sees the NaN, skips, and resets
                state["skipped"] += 1
                state["bad_in_a_row"] += 1
                say(f"skipped update at epoch {epoch + 1}, batch {i + 1}: loss {window_mean:.4g}, "
                    f"gradient norm {grad_norm:.4g} ({state['bad_in_a_row']} in a row)")
            optimizer.zero_grad(set_to_none=True)
            window_loss.zero_()
            window_examples = 0
            if state["bad_in_a_row"] >= config.max_bad_steps:
                stop_reason = (f"diverged: {state['bad_in_a_row']} updates in a row had a non-finite loss or "
                               f"gradient (epoch {epoch + 1}, batch {i + 1}); nothing was saved after the last "
                               "good checkpoint")
                break
            if not stepped:
                continue
            log.update(state["updates"], {"loss": window_mean, "lr": optimizer.param_groups[0]["lr"],
                                          "grad_norm": grad_norm})
            every = config.checkpoint_every
            if every and state["updates"] % every == 0 and i + 1 < micro_per_epoch:
                save_checkpoint(epoch, i + 1)                    # mid-epoch: resume restarts at batch i + 1
        if stop_reason != "completed":
            break
        # -- end of epoch: schedule, validate, early stopping, log, checkpoint ------------------
        if cadence == "epoch":
            scheduler.step()
        val_loss, val_acc = evaluate(model, val_loader, precision, device)
        loss_sum, seen = distributed.all_sum(torch.tensor(state["running"], dtype=torch.float64), ranks).tolist()
        improved = stopper.update(val_loss if config.monitor == "val_loss" else val_acc)
        if improved:
            state["best"] = {"metric": config.monitor, "value": stopper.best_score, "epoch": epoch + 1}
        record = {"epoch": epoch + 1, "updates": state["updates"], "train_loss": loss_sum / max(seen, 1),
                  "val_loss": val_loss, "val_acc": val_acc, "lr": optimizer.param_groups[0]["lr"],
                  "skipped_updates": state["skipped"],
                  "elapsed_s": round(state["elapsed_s"] + time.perf_counter() - started, 3)}
        state["history"].append(record)
        log.epoch(record)
        state["position"] = 0
        save_checkpoint(epoch + 1, 0, best=improved)
        if stopping and stopper.should_stop:
            stop_reason = f"early stopping after epoch {epoch + 1}: {stopper.reason}"
            break

    # -- 9. the end: final weights, a summary every rank agrees with -----------------------------
    log.close()
    digests = distributed.gather(weights_digest(model), ranks)
    paths = {"out": str(out), "metrics": str(out / "metrics.jsonl"), "checkpoints": str(folder),
             "tb": str(out / "tb"), "model": str(out / "model.pt")}
    if main and stop_reason.startswith("diverged"):
        say(stop_reason)                                   # the newest checkpoint is the last good state
    elif main:
        atomic_write_bytes(out / "model.pt", ckpt.serialize(model.state_dict()))
    if main:
        summary = {"stop_reason": stop_reason, "updates": state["updates"], "skipped_updates": state["skipped"],
                   "world_size": ranks.world_size, "backend": ranks.backend or None, "device": str(device),
                   "weights_sha256_per_rank": digests,
                   "resumed_from": str(resumed_from) if resumed_from else None}
        atomic_write_bytes(out / "summary.json", json.dumps(summary, indent=1).encode())
    distributed.teardown(ranks)
    return FitResult(stop_reason, state["updates"], state["skipped"], len(state["history"]), state["history"],
                     state["best"], str(resumed_from) if resumed_from else None, paths)


def _find_resume(config: FitConfig, folder: Path, ranks, say) -> tuple[Path, dict[str, Any]] | None:
    """Rank 0 picks the checkpoint (or the error); every rank then loads the same file."""
    choice: tuple[str, str] | None = None   # ("path", p) | ("error", message) | None
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
            choice = ("error", str(exc))
    choice = distributed.share(choice, ranks)
    if choice is None:
        return None
    if choice[0] == "error":
        distributed.abandon(ranks)
        raise (ckpt.UnsafeCheckpointError if "refusing" in choice[1] else ckpt.CheckpointError)(choice[1])
    path = Path(choice[1])
    saved = ckpt.load_checkpoint(path)
    changed = config.differences(saved["config"])
    if saved["world_size"] != ranks.world_size:
        changed.insert(0, f"world size {saved['world_size']} (now {ranks.world_size})")
    if changed:
        distributed.abandon(ranks)
        raise ckpt.CheckpointError(f"checkpoint {path} belongs to a different run: {', '.join(changed[:3])}; "
                                   "resume with the same settings or choose another output folder")
    return path, saved
