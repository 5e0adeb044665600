"""fit()'s overhead taken apart (issue 33, item 3), on the CPU or a GPU: per update, per checkpoint, per run.

Run through ``bench_production.py --only overhead --device cpu|cuda``. The same task (a wide spiral MLP whose
update is >= 10 ms of device work, not of data loading), the same data order and arithmetic, three ways:
a plain loop; the plain loop reading one value to the host per update (what a sync costs there); fit().
fit's phases are marked from outside, by wrapping functions it calls (its code is not changed): setup runs
until the first epoch starts; an epoch's updates run until its validation starts (on a GPU the device is
synchronised at both marks; per update is the least disturbed epoch's mean, wall and CPU time of the training
thread); fit's per-update TensorBoard work, handed over at epoch ends and checkpoints, is counted with the
updates; a checkpoint's stall is the time its training thread spends in
``BackgroundWriter.save`` (waiting for the previous write, then copying the state to the host); the end runs
from the last checkpoint to fit's return (the last write awaited, model.pt, summary.json). The plain loop
checkpoints with ``torch.save`` to a file in its training thread, as learners do.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import shutil
import statistics
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, TensorDataset

from course_utils.engine.models import MLP
from course_utils.infra.notebook import seed_everything
from course_utils.production import FitConfig, fit, weights_digest
from course_utils.production import checkpoint as ckpt
from course_utils.production.config import SPIRAL_FIELDS
from course_utils.production import data_order
from course_utils.production.builtin import spiral_task
from course_utils.production.fit import training_seed
from course_utils.production.logs import RunLog
from course_utils.production.writer import BackgroundWriter, snapshot

FIT = importlib.import_module("course_utils.production.fit")
SIZES = {   # device: spiral fields; on the course's CPU the first is ~40 ms of work an update
    "cpu": dict(n_train=4096, n_val=1024, batch_size=256, hidden=1024, depth=3),
    "cuda": dict(n_train=32768, n_val=4096, batch_size=2048, hidden=4096, depth=4),
}
COMMON = dict(lr=0.01, optimizer="adam", threads=1, progress=False, checkpoint_every=0)
FETCHES = ("items", "whole")   # how the loader builds a batch: item by item and collated, or whole


class WholeBatches(Dataset):
    """A TensorDataset read a batch at a time: the DataLoader hands ``__getitems__`` a batch's indices and gets one
    ``index_select`` per tensor (the same values as collating the items), so the training thread's share of the
    data is small, as with loader workers. Item by item, batch 2,048 costs the host about 14 ms an update here,
    more than the GPU size's device work: a loop timed so measures its loader, not the device."""

    def __init__(self, data: TensorDataset):
        self.tensors = data.tensors

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, index: int):
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices: list[int]):
        rows = torch.as_tensor(indices)
        return tuple(t.index_select(0, rows) for t in self.tensors)


def as_is(batch):
    """The collate function of WholeBatches: the batch is already made."""
    return batch


def bench_task(config: FitConfig, fetch: str):
    """The spiral task of `config` (seeded as fit seeds it), its data fetched `fetch`-wise (FETCHES)."""
    seed_everything(config.seed)
    task = spiral_task(config)
    if fetch == "items":
        return task
    return dataclasses.replace(task, train_data=WholeBatches(task.train_data), val_data=WholeBatches(task.val_data),
                               collate_fn=as_is, seed_batches=False)


class Clock:
    """Marks (label, seconds) on the training thread, the device synchronised first; checkpoint stalls."""

    def __init__(self, device: torch.device):
        self.device, self.marks, self.logging = device, [], [0.0, 0.0]
        self.stalls, self.stalls_cpu, self.waits = [], [], []

    def mark(self, label: str) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.marks.append((label, time.perf_counter(), time.thread_time()))

    def phases(self, updates: int, end: float) -> dict[str, float]:
        """Seconds: per update (wall, and CPU of the training thread), the median checkpoint stall, setup, end."""
        pairs = [(a, b) for a, b in zip(self.marks, self.marks[1:]) if (a[0], b[0]) == ("epoch", "validate")]
        per_epoch, logging = updates / len(pairs), [x / len(pairs) for x in self.logging]   # the least disturbed epoch
        return {"update": (min(b[1] - a[1] for a, b in pairs) + logging[0]) / per_epoch,
                "update_cpu": (min(b[2] - a[2] for a, b in pairs) + logging[1]) / per_epoch,
                "stall": statistics.median(self.stalls), "wait": statistics.median(self.waits or [0.0]),
                "stall_cpu": statistics.median(self.stalls_cpu or self.stalls),
                "setup": self.marks[1][1] - self.marks[0][1],
                "end": end - self.marks[-1][1]}


@contextlib.contextmanager
def watching(clock: Clock):
    """fit()'s phases marked on `clock`, by wrapping what fit calls."""
    start_epoch, evaluate = data_order.start_epoch, FIT.evaluate
    save, hand_over, wait = BackgroundWriter.save, RunLog.hand_over, BackgroundWriter.wait

    def marked_start(*args, **kwargs):
        clock.mark("epoch")
        return start_epoch(*args, **kwargs)

    def marked_evaluate(*args, **kwargs):
        clock.mark("validate")
        return evaluate(*args, **kwargs)

    def timed_save(self, *args, **kwargs):
        begin = time.perf_counter(), time.thread_time()
        self.wait()                                      # what save does first: the previous write, timed apart
        clock.waits.append(time.perf_counter() - begin[0])
        save(self, *args, **kwargs)
        clock.stalls.append(time.perf_counter() - begin[0])
        clock.stalls_cpu.append(time.thread_time() - begin[1])
        clock.mark("saved")

    def timed_hand_over(self):
        begin = time.perf_counter(), time.thread_time()
        hand_over(self)
        clock.logging[0] += time.perf_counter() - begin[0]
        clock.logging[1] += time.thread_time() - begin[1]

    data_order.start_epoch, FIT.evaluate, BackgroundWriter.save, RunLog.hand_over = (
        marked_start, marked_evaluate, timed_save, timed_hand_over)
    assert BackgroundWriter.wait is wait
    try:
        yield
    finally:
        data_order.start_epoch, FIT.evaluate, BackgroundWriter.save, RunLog.hand_over = (
            start_epoch, evaluate, save, hand_over)


def plain(fields: dict, epochs: int, folder: Path, device: torch.device, read: bool,
          fetch: str = "items") -> tuple[dict, str]:
    """The loop a learner writes, fit's arithmetic (with `read`: one loss value to the host per update)."""
    clock = Clock(device)
    clock.mark("call")
    config = FitConfig(out=str(folder), epochs=epochs, **COMMON, **fields)
    task = bench_task(config, fetch)
    seed_everything(training_seed(config.seed))
    model, loss_fn = task.model.to(device), task.loss_fn
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, fused=True)   # fit's own (issue 41)
    sampler = DistributedSampler(task.train_data, num_replicas=1, rank=0, shuffle=True, seed=config.seed)
    cuda = device.type == "cuda"
    loader = DataLoader(task.train_data, batch_size=config.batch_size, sampler=sampler, pin_memory=cuda,
                        collate_fn=task.collate_fn)
    val = DataLoader(task.val_data, batch_size=task.val_batch_size, pin_memory=cuda, collate_fn=task.collate_fn)
    folder.mkdir(parents=True, exist_ok=True)
    for epoch in range(epochs):
        clock.mark("epoch")
        sampler.set_epoch(epoch)
        model.train()
        for inputs, targets in loader:
            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            if read:
                loss.item()
        clock.mark("validate")
        model.eval()
        total = torch.zeros((), dtype=torch.float64, device=device)
        correct = torch.zeros((), dtype=torch.int64, device=device)
        with torch.no_grad():
            for x, y in val:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                logits = model(x)
                total += loss_fn(logits, y).double() * len(y)
                correct += (logits.argmax(1) == y).sum()
        _ = total.item() / len(task.val_data), correct.item() / len(task.val_data)
        begin = time.perf_counter(), time.thread_time()
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1},
                   folder / "checkpoint.pt")
        clock.stalls.append(time.perf_counter() - begin[0])
        clock.stalls_cpu.append(time.thread_time() - begin[1])
        clock.mark("saved")
    updates = epochs * len(loader)
    return clock.phases(updates, time.perf_counter()), weights_digest(model)


def fitted(fields: dict, epochs: int, folder: Path, device: torch.device, tensorboard: bool,
           fetch: str = "items") -> tuple[dict, str]:
    """fit() on the same work, its phases marked."""
    shutil.rmtree(folder, ignore_errors=True)
    clock = Clock(device)
    config = FitConfig(out=str(folder), epochs=epochs, device=device.type, tensorboard=tensorboard, **COMMON,
                       **fields)
    with watching(clock), contextlib.redirect_stdout(io.StringIO()):
        clock.mark("call")
        if fetch == "items":
            result = fit(config)
        else:   # the same task handed to fit (which then wants the spiral fields at their defaults)
            task = bench_task(config, fetch)
            result = fit(dataclasses.replace(config, **{k: getattr(FitConfig, k) for k in fields
                                                        if k in SPIRAL_FIELDS}), task)
        end = time.perf_counter()
    model = MLP(2, fields["hidden"], 3, fields["depth"])
    model.load_state_dict(torch.load(folder / "model.pt", map_location="cpu", weights_only=True))
    return clock.phases(result.updates, end), weights_digest(model)


def copies(folder: Path, device: torch.device, repeats: int) -> dict[str, float]:
    """The last checkpoint's state put back on the device: copying it to the host, and serialising it (what the
    training thread did before the writer took it over), each the best of `repeats`."""
    state = ckpt.load_checkpoint(ckpt.checkpoint_files(folder / "checkpoints", "last")[0])
    state = {k: (v if k not in ("model", "optimizer") else _to(v, device)) for k, v in state.items()}
    best = {key: float("inf") for key in ("copy", "serialise", "copy_cpu", "serialise_cpu")}
    for _ in range(repeats):
        for name, work in (("copy", lambda: snapshot(state)), ("serialise", lambda: ckpt.serialize(state))):
            begin = time.perf_counter(), time.thread_time()
            made = work()
            best[name] = min(best[name], time.perf_counter() - begin[0])
            best[name + "_cpu"] = min(best[name + "_cpu"], time.thread_time() - begin[1])
            if name == "serialise":
                best["bytes"] = len(made)
    return best


def _to(value, device: torch.device):
    if isinstance(value, torch.Tensor):
        return value.to(device) if value.dim() else value   # step counters stay on the CPU, as torch keeps them
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, list):
        return [_to(v, device) for v in value]
    return value


def overhead(root: Path, repeats: int, device: torch.device, fields: dict, epochs: int, fetch: str = "items") -> None:
    """Print per update, per checkpoint and per run, plain loop against fit(), minimum over round-robin repeats."""
    runs = {"plain loop": lambda: plain(fields, epochs, root / "plain", device, read=False, fetch=fetch),
            "plain loop + 1 host read per update": lambda: plain(fields, epochs, root / "plain", device, read=True,
                                                                 fetch=fetch),
            "fit(), TensorBoard off": lambda: fitted(fields, epochs, root / "fit", device, tensorboard=False,
                                                     fetch=fetch),
            "fit(), TensorBoard on": lambda: fitted(fields, epochs, root / "fit", device, tensorboard=True,
                                                    fetch=fetch)}
    best: dict[str, dict[str, float]] = {}
    digests: dict[str, str] = {}
    small = {**fields, "n_train": 2 * fields["batch_size"], "n_val": fields["batch_size"]}
    plain(small, 1, root / "warm", device, read=False, fetch=fetch)   # first calls (imports, allocators) untimed
    fitted(small, 1, root / "warm-fit", device, tensorboard=True, fetch=fetch)
    for _ in range(repeats):
        for name, run in runs.items():
            phases, digest = run()
            digests[name] = digest
            best[name] = {k: min(v, best.get(name, {}).get(k, float("inf"))) for k, v in phases.items()}
    parts = copies(root / "fit", device, 5 * repeats)
    same = len(set(digests.values())) == 1
    base = best["plain loop"]
    updates = epochs * ((fields["n_train"] + fields["batch_size"] - 1) // fields["batch_size"])
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, 1 thread"
    print(f"\n6. overhead apart on {device.type} ({name}, torch {torch.__version__}): spiral MLP "
          f"{fields['depth']}x{fields['hidden']}, batch {fields['batch_size']}, {fields['n_train']} examples, {epochs} "
          f"epochs ({updates} updates, checkpoint and validation each epoch), batches fetched {fetch}; min of "
          f"{repeats} round-robin repeats")
    print(f"  {'run':<38} {'per update, wall':>22} {'training thread CPU':>22} {'checkpoint stall wall / CPU':>28} "
          f"{'(waiting)':>10} {'setup':>9} {'end':>8}")
    for label, t in best.items():
        print(f"  {label:<38} {t['update'] * 1e3:12.2f} ms {t['update'] / base['update']:5.3f}x "
              f"{t['update_cpu'] * 1e3:12.2f} ms {t['update_cpu'] / base['update_cpu']:5.3f}x "
              f"{t['stall'] * 1e3:15.2f} / {t['stall_cpu'] * 1e3:6.2f} ms {t['wait'] * 1e3:7.2f} ms "
              f"{t['setup'] * 1e3:6.0f} ms {t['end'] * 1e3:5.0f} ms")
    print(f"  the state alone ({parts['bytes'] / 2**20:.1f} MiB), wall / CPU: copy to the host "
          f"{parts['copy'] * 1e3:.2f} / "
          f"{parts['copy_cpu'] * 1e3:.2f} ms (fit's whole stall now); serialise {parts['serialise'] * 1e3:.2f} / "
          f"{parts['serialise_cpu'] * 1e3:.2f} ms (on the training thread before, now on the writer)")
    print("  same final weights in all four:", "yes" if same else "NO")
