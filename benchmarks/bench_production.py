"""What the chapter-7 production trainer costs against a plain loop doing the same arithmetic, and where it goes.

1. fit() against a plain loop, the same task and the same arithmetic: seed, the task built by the same
   function (so the same data and initial weights), torch's DistributedSampler order for one rank,
   zero_grad / forward / loss / backward / Adam step, validation (loss and accuracy) and a checkpoint
   (``torch.save`` of model and optimizer state) at every epoch end. fit() adds what it guarantees:
   the gradient norm and the NaN guard, durable checksummed checkpoints with every RNG state,
   TensorBoard (one event per update), metrics.jsonl. Both end with the same weights (checked).
   Two sizes: the course's tiny default (a spiral MLP, a ~1 ms step) and a wide MLP whose step takes
   well over 10 ms. Timed: the epochs alone (wall time; fit's own clock, the plain loop timed the same
   way), and the whole call (fit's setup and its wait for its last checkpoint included) in CPU time of
   the process (every thread: what the work costs, whatever else the machine runs) and in wall time.
2. fit() at the tiny default with one component changed at a time.
3. Each component timed alone, as a share of one plain training step.
4. One checkpoint taken apart; 5. what seeded batches (exact random augmentation) cost.
6. fit()'s overhead apart, on the CPU or a GPU (--device): per update, per checkpoint stall, per run
   (production_overhead.py).

Run: .venv/bin/python benchmarks/bench_production.py [--repeats 5] [--only overhead --device cuda]
Figures are minima over repeats taken round-robin (the machine is shared: minima are the least disturbed,
and a change of load hits every variant alike). DataLoader workers are left out: their processes' CPU
time is not the benchmark's own.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.loop import global_norm
from course_utils.engine.models import MLP
from course_utils.infra.notebook import seed_everything
from course_utils.production import FitConfig, fit, weights_digest
from course_utils.production import checkpoint as ckpt
from course_utils.production import rng
from course_utils.production.builtin import spiral_task
from course_utils.production.data_order import SeededBatches
from course_utils.production.fit import training_seed
from course_utils.production.writer import snapshot
from production_overhead import FETCHES, SIZES as SIZES_BY_DEVICE, overhead

SIZES = {   # name: (FitConfig fields, epochs)
    "tiny default (spiral MLP 2x64, batch 32, 600 examples)":
        (dict(n_train=600, n_val=300, batch_size=32, hidden=64), 10),
    "wide MLP (3x1024, batch 256, 16384 examples: a 25 MB checkpoint every 64 updates)":
        (dict(n_train=16384, n_val=1024, batch_size=256, hidden=1024, depth=3), 3),
    "wide MLP, short epochs (4096 examples: a 25 MB checkpoint every 16 updates)":
        (dict(n_train=4096, n_val=1024, batch_size=256, hidden=1024, depth=3), 6),
}
COMMON = dict(lr=0.01, optimizer="adam", threads=1, progress=False)


def plain_loop(fields: dict, epochs: int, folder: Path) -> str:
    """The loop a learner writes by hand, doing fit's arithmetic; returns the final weights' digest."""
    config = FitConfig(out=str(folder), epochs=epochs, **COMMON, **fields)
    seed_everything(config.seed)
    task = spiral_task(config)
    seed_everything(training_seed(config.seed))
    model, loss_fn = task.model, task.loss_fn
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    sampler = DistributedSampler(task.train_data, num_replicas=1, rank=0, shuffle=True, seed=config.seed)
    loader = DataLoader(task.train_data, batch_size=config.batch_size, sampler=sampler)
    val = DataLoader(task.val_data, batch_size=256)
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
        model.eval()
        total, correct = torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64)
        with torch.no_grad():
            for x, y in val:
                logits = model(x)
                total += loss_fn(logits, y).double() * len(y)
                correct += (logits.argmax(1) == y).sum()
        _ = total.item() / len(task.val_data), correct.item() / len(task.val_data)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1},
                   folder / "checkpoint.pt")
    return time.perf_counter() - start, weights_digest(model)


def fit_run(fields: dict, epochs: int, folder: Path, **changes) -> tuple[float, str]:
    """fit() on the same work; returns (its epochs' wall time by its own clock, the final weights' digest)."""
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.redirect_stdout(io.StringIO()):
        result = fit(FitConfig(out=str(folder), epochs=epochs, **{**COMMON, **fields, **changes}))
    model = MLP(2, fields["hidden"], 3, fields.get("depth", 2))
    model.load_state_dict(torch.load(folder / "model.pt", weights_only=True))
    return result.final["elapsed_s"], weights_digest(model)


def round_robin(runs: list, repeats: int) -> dict[str, list]:
    """Minimum over `repeats` rounds of each run's epochs-only wall time ("epochs"), whole-call CPU time of the
    training thread ("main") and of the other threads ("others": checkpoint and TensorBoard writers), whole-call
    wall time ("wall"); and each run's digest."""
    best = {key: [float("inf")] * len(runs) for key in ("epochs", "main", "others", "wall")}
    digests = [""] * len(runs)
    for _ in range(repeats):
        for index, run in enumerate(runs):
            start = time.thread_time(), time.process_time(), time.perf_counter()
            epochs_s, digests[index] = run()
            main_s, total_s = time.thread_time() - start[0], time.process_time() - start[1]
            for key, value in (("epochs", epochs_s), ("main", main_s), ("others", total_s - main_s),
                               ("wall", time.perf_counter() - start[2])):
                best[key][index] = min(best[key][index], value)
    return {**best, "digests": digests}


def against_plain(root: Path, repeats: int, sizes: tuple[str, ...] = ("tiny", "wide", "short")) -> None:
    print("1. fit() against a plain loop, same task, same arithmetic; checkpoint and validation every epoch.\n"
          "   training thread: CPU time of the whole call in the thread that trains (what training waits for when "
          "the writer threads have a core of their own); other threads: their CPU time (checkpoint hashing, "
          "writes, fsyncs; TensorBoard); wall: the whole call, and the epochs alone (on a shared machine)")
    for key, (label, (fields, epochs)) in zip(("tiny", "wide", "short"), SIZES.items()):
        if key not in sizes:
            continue
        counts = training_arithmetic(fields["n_train"], fields["batch_size"], epochs)
        runs = [lambda: plain_loop(fields, epochs, root / "plain"), lambda: fit_run(fields, epochs, root / "fit"),
                lambda: fit_run(fields, epochs, root / "fit", tensorboard=False)]
        t = round_robin(runs, repeats)
        step = t["main"][0] / counts.total_weight_updates
        print(f"  {label}: {epochs} epochs x {counts.iters_per_epoch} updates, plain loop {step * 1e3:.2f} ms CPU "
              "per update")
        for name, i in (("fit, TensorBoard on", 1), ("fit, TensorBoard off", 2)):
            print(f"    {name:<21} training thread {t['main'][i] / t['main'][0]:.3f}x ({t['main'][i]:.3f} vs "
                  f"{t['main'][0]:.3f} s CPU); other threads +{(t['others'][i] - t['others'][0]) * 1e3:.0f} ms CPU; "
                  f"wall {t['wall'][i] / t['wall'][0]:.3f}x, epochs alone {t['epochs'][i] / t['epochs'][0]:.3f}x")
        print("    same final weights as the plain loop:", "yes" if len(set(t["digests"])) == 1 else "NO")


def variants(root: Path, repeats: int) -> None:
    fields, epochs = SIZES["tiny default (spiral MLP 2x64, batch 32, 600 examples)"]
    changes = [("production default: checkpoint each epoch, TensorBoard", {}),
               ("  without TensorBoard", {"tensorboard": False}),
               ("  with a checkpoint every 10 updates", {"checkpoint_every": 10}),
               ("  with a checkpoint every update", {"checkpoint_every": 1}),
               ("  with gradient clipping (clip_norm=1)", {"clip_norm": 1.0}),
               ("  with bf16 autocast (CPU)", {"amp": "bf16"}),
               ("  with early stopping (patience 100: never stops)", {"patience": 100})]
    runs = [lambda: plain_loop(fields, epochs, root / "plain")]
    runs += [lambda change=change: fit_run(fields, epochs, root / "variant", **change) for _, change in changes]
    t = round_robin(runs, repeats)
    print(f"\n2. fit() at the tiny default, one change at a time (ratio to the plain loop; min of {repeats})")
    print(f"  {'run':<56} {'training thread CPU':>20} {'other threads':>14}")
    for (label, _), main_s, others_s in zip([("plain loop", None)] + changes, t["main"], t["others"]):
        extra = f"{(others_s - t['others'][0]) * 1e3:+9.0f}ms" if label != "plain loop" else ""
        print(f"  {label:<56} {main_s * 1e3:9.0f}ms {main_s / t['main'][0]:5.2f}x {extra:>14}")


def best_of(function, repeats: int, number: int) -> float:
    """Minimum over `repeats` of the mean CPU time of `number` calls (seconds per call)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(number):
            function()
        best = min(best, (time.process_time() - start) / number)
    return best


def components(folder: Path, repeats: int) -> None:
    """Each component on its own, in the tiny default's setting (batch 32, hidden 64), CPU time."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from torch.utils.tensorboard import SummaryWriter

    from course_utils.engine.arithmetic import batch_sizes, loss_weight
    seed_everything(0)
    task = spiral_task(FitConfig(out="-"))
    model, optimizer = task.model, torch.optim.Adam(task.model.parameters(), lr=0.01)
    x, y = (t[:32] for t in task.train_data.tensors)
    sizes = batch_sizes(600, 32)

    def plain_step():
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    def bf16_step():
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    plain_step()
    params = list(model.parameters())
    loss = nn.functional.cross_entropy(model(x), y)
    writer = SummaryWriter(str(folder / "tb"))
    events, step = writer._get_file_writer(), iter(range(10**9))
    tags = ("train/loss_step", "train/lr", "train/grad_norm")

    def three_add_scalar():
        n = next(step)
        for tag in tags:
            writer.add_scalar(tag, 0.5, n)

    def one_event():
        events.add_summary(Summary(value=[Summary.Value(tag=tag, simple_value=0.5) for tag in tags]), next(step))

    rows = [("one plain training step (reference)", "step", best_of(plain_step, repeats, 200)),
            ("bf16 autocast step instead (CPU)", "step", best_of(bf16_step, repeats, 200)),
            ("loss weighting by the window's examples (K > 1)", "micro-step",
             best_of(lambda: loss.detach() * loss_weight(3, sizes, 4), repeats, 2000)),
            ("gradient norm + .item() (the NaN guard's input)", "update",
             best_of(lambda: global_norm([p.grad for p in params]).item(), repeats, 1000)),
            ("gradient norm, clipped", "update",
             best_of(lambda: nn.utils.clip_grad_norm_(params, 1.0).item(), repeats, 1000)),
            ("TensorBoard: 3 add_scalar calls (before)", "update", best_of(three_add_scalar, repeats, 1000)),
            ("TensorBoard: 3 scalars in one event (fit, at epoch end)", "update", best_of(one_event, repeats, 1000))]
    writer.close()
    reference = rows[0][2]
    print("\n3. components one by one (min CPU time over repeats, including TensorBoard's writer thread; "
          "% of one plain step)")
    for label, unit, seconds in rows:
        print(f"  {label:<52} {seconds * 1e6:9.1f}us per {unit:<10} {100 * seconds / reference:7.1f}%")


def timed(function, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def checkpoint_parts(folder: Path, repeats: int) -> None:
    """The epoch-end checkpoint of the tiny default taken apart: capture RNG, copy, serialise, durable write, load."""
    seed_everything(0)
    model = MLP(2, 64, 3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(8, 2)).sum().backward()
    optimizer.step()
    state = {"format": ckpt.FORMAT, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "rng": rng.capture(torch.device("cpu")), "history": [{"epoch": i, "val_loss": 0.5} for i in range(10)]}
    payload = ckpt.serialize(state)
    folder.mkdir(parents=True, exist_ok=True)

    def plain_write():
        with open(folder / "plain.pt", "wb") as handle:
            handle.write(payload)
    rows = [("capture RNG states", timed(lambda: rng.capture(torch.device("cpu")), repeats * 20)),
            ("copy the state (the training thread's part)", timed(lambda: snapshot(state), repeats * 20)),
            ("serialise (torch.save to memory; on the writer thread)",
             timed(lambda: ckpt.serialize(state), repeats * 20)),
            ("durable write: .sha256 then .pt (4 fsyncs; on the writer thread)",
             timed(lambda: ckpt.write_checkpoint(folder, "last-e0000-s000000.pt", payload), repeats * 5)),
            ("plain open/write, no fsync (for comparison)", timed(plain_write, repeats * 5)),
            ("verify checksum + torch.load(weights_only=True)",
             timed(lambda: ckpt.load_checkpoint(folder / "last-e0000-s000000.pt"), repeats * 5))]
    print(f"\n4. one checkpoint of the tiny default taken apart ({len(payload) / 1024:.0f} KiB; wall time, min)")
    for label, seconds in rows:
        print(f"  {label:<66} {seconds * 1e3:8.3f} ms")


def seeded_batches(repeats: int) -> None:
    """What SeededBatches adds per batch, in a worker (seeding) and in the main process (seeding, streams put back)."""
    import torch.utils.data._utils.worker as worker_module

    class Noisy(torch.utils.data.Dataset):
        def __len__(self):
            return 1000

        def __getitem__(self, index):
            return torch.randn(4) * float(np.random.uniform(0.8, 1.2)) + random.random(), index % 3

    plain, indices = Noisy(), list(range(32))
    seeded = SeededBatches(plain, seed=0, collate_fn=None)
    collate = torch.utils.data.default_collate
    best = {}
    for _ in range(repeats * 6):            # interleaved: plain and seeded, in a worker's context and the main one
        for where in ("worker", "main"):
            worker_module._worker_info = (worker_module.WorkerInfo(id=0, num_workers=1, seed=0, dataset=seeded)
                                          if where == "worker" else None)   # collate then uses shared memory
            for name, load in (("plain", lambda: collate([plain[i] for i in indices])),
                               ("seeded", lambda: seeded.__getitems__(indices))):
                start = time.process_time()
                for _ in range(100):
                    load()
                seconds = (time.process_time() - start) / 100
                best[where, name] = min(best.get((where, name), float("inf")), seconds)
    worker_module._worker_info = None
    print("\n5. exact random augmentation: each batch's draws seeded from (seed, epoch, indices) "
          "(batch of 32 items, each drawing from torch, NumPy and random; CPU time, min)")
    for where, label in (("worker", "in a DataLoader worker: + seeding"),
                         ("main", "in the main process (0 workers): + seeding, streams put back")):
        base, extra = best[where, "plain"], best[where, "seeded"] - best[where, "plain"]
        print(f"  {label:<62} {extra * 1e6:+7.1f} us on {base * 1e6:6.1f} us per batch")
    print("  at resume: nothing (no batch is replayed; the skipped batches are never loaded)")


def overhead_size(args) -> tuple[dict, int]:
    """Section 6's spiral fields and epochs: the device's default, with the flags given instead."""
    fields = dict(SIZES_BY_DEVICE[args.device])
    fields.update({name: getattr(args, name) for name in ("hidden", "depth", "batch_size", "n_train")
                   if getattr(args, name) is not None})
    return fields, args.epochs or 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("plain", "variants", "components", "checkpoint", "seeded", "overhead"))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where section 6 (overhead apart) trains; sections 1-5 run on the CPU, and with cuda only "
                             "section 6 runs unless --only says otherwise")
    for flag in ("--hidden", "--depth", "--batch-size", "--n-train", "--epochs"):
        parser.add_argument(flag, type=int, help="section 6: instead of the device's default size")
    parser.add_argument("--fetch", choices=FETCHES, default="items",
                        help="section 6: batches built item by item and collated (as recorded before 30 Nov 2026), or "
                             "whole, one index_select per tensor (the loader's host cost below the GPU's work)")
    parser.add_argument("--sizes", nargs="*", choices=("tiny", "wide", "short"), default=("tiny", "wide", "short"),
                        help="which sizes step 1 compares")
    args = parser.parse_args()
    if args.device == "cuda" and args.only is None:
        args.only = "overhead"
    torch.set_num_threads(1)
    from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (import once, outside the timings)

    root = Path(tempfile.mkdtemp(prefix="bench_production_"))
    print(f"torch {torch.__version__}, 1 thread, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}, min of {args.repeats} repeats")
    steps = {"plain": lambda r, n: against_plain(r, n, tuple(args.sizes)), "variants": variants, "components": lambda r, n: components(r / "c", n),
             "checkpoint": lambda r, n: checkpoint_parts(r / "k", n), "seeded": lambda r, n: seeded_batches(n),
             "overhead": lambda r, n: overhead(r / "o", n, torch.device(args.device), *overhead_size(args),
                                             args.fetch)}
    for name, step in steps.items():
        if args.only in (None, name):
            step(root, args.repeats)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
