"""What the chapter-7 production loop costs against a plain loop doing the same work, and each component's share.

The plain loop: seed, spiral, MLP, Adam, the same data order (torch's DistributedSampler for one rank),
zero_grad / forward / loss / backward / step, validation every epoch. The production loop is
course_utils.production.fit with a checkpoint at every epoch end (the default), TensorBoard and
metrics.jsonl. Both end with the same weights (printed as a check that the work is the same).
Then fit() is timed with one component changed at a time, and the checkpoint write is taken apart.

Run: .venv/bin/python benchmarks/bench_production.py [--repeats 5] [--epochs 10]
Figures are the minimum over repeats, taken round-robin (the machine is shared: minima are the least
disturbed, and a change of load hits every variant alike).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from course_utils.arithmetic import training_arithmetic
from course_utils.data import spiral_splits
from course_utils.models import MLP
from course_utils.notebook import seed_everything
from course_utils.production import FitConfig, fit, weights_digest
from course_utils.production import checkpoint as ckpt
from course_utils.production import rng

WORK = dict(n_train=600, n_val=300, batch_size=32, hidden=64, lr=0.01, optimizer="adam", threads=1,
            progress=False)


def plain_loop(epochs: int) -> tuple[float, str]:
    """The loop a learner writes by hand, on the same work; returns (seconds in the loop, weights' digest)."""
    seed_everything(0)
    splits = spiral_splits(WORK["n_train"], WORK["n_val"], seed=0)
    model = MLP(2, WORK["hidden"], 3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=WORK["lr"])
    sampler = DistributedSampler(splits.train, num_replicas=1, rank=0, shuffle=True, seed=0)
    loader = DataLoader(splits.train, batch_size=WORK["batch_size"], sampler=sampler)
    val = DataLoader(splits.val, batch_size=256)
    start = time.perf_counter()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            total = sum(nn.functional.cross_entropy(model(x), y, reduction="sum").item() for x, y in val)
        _ = total / len(splits.val)
    return time.perf_counter() - start, weights_digest(model)


def timed(function, repeats: int) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def fit_in(folder: Path, **changes):
    def run():
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.redirect_stdout(io.StringIO()):
            result = fit(FitConfig(out=str(folder), **{**WORK, **changes}))
        model = MLP(2, WORK["hidden"], 3, 2)
        model.load_state_dict(torch.load(folder / "model.pt", weights_only=True))
        return result.final["elapsed_s"], weights_digest(model)
    return run


def checkpoint_parts(folder: Path, repeats: int) -> list[tuple[str, float]]:
    """The epoch-end checkpoint taken apart: capture RNG, serialise, durable write (x2 files), verify + load."""
    seed_everything(0)
    model = MLP(2, WORK["hidden"], 3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(8, 2)).sum().backward()
    optimizer.step()
    state = {"format": ckpt.FORMAT, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "rng": rng.capture(), "history": [{"epoch": i, "val_loss": 0.5} for i in range(10)]}
    payload = ckpt.serialize(state)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [("capture RNG states", timed(rng.capture, repeats * 20)[0]),
            ("serialise (torch.save to memory)", timed(lambda: ckpt.serialize(state), repeats * 20)[0]),
            ("durable write: .pt + .sha256 (fsync x2, folder fsync x2)",
             timed(lambda: ckpt.write_checkpoint(folder, "last-e0000-s000000.pt", payload), repeats * 5)[0])]

    def plain_write():
        with open(folder / "plain.pt", "wb") as handle:
            handle.write(payload)
    rows.append(("plain open/write, no fsync (for comparison)", timed(plain_write, repeats * 5)[0]))
    rows.append(("verify checksum + torch.load(weights_only=True)",
                 timed(lambda: ckpt.load_checkpoint(folder / "last-e0000-s000000.pt"), repeats * 5)[0]))
    rows.append(("checkpoint size (KiB)", len(payload) / 1024))
    return rows


def best_of(function, repeats: int, number: int) -> float:
    """Minimum over `repeats` of the mean time of `number` calls (seconds per call)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            function()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def component_costs(folder: Path, repeats: int) -> list[tuple[str, str, float]]:
    """Each component on its own, in the loop's real setting (batch 32, hidden 64): (label, unit, seconds)."""
    from torch.utils.tensorboard import SummaryWriter

    from course_utils.arithmetic import batch_sizes, loss_weight
    seed_everything(0)
    splits = spiral_splits(WORK["n_train"], WORK["n_val"], seed=0)
    model = MLP(2, WORK["hidden"], 3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = splits.train.tensors[0][:32], splits.train.tensors[1][:32]
    sizes = batch_sizes(WORK["n_train"], 32)

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
    window = torch.zeros((), dtype=torch.float64)
    loss = nn.functional.cross_entropy(model(x), y)

    def weighting():
        _ = loss.detach() * loss_weight(3, sizes, 4)

    def running_sum():
        window.add_(loss.detach().double() * 32)

    def norm_measure():
        nn.utils.get_total_norm([p.grad for p in params]).item()

    def norm_clip():
        nn.utils.clip_grad_norm_(params, 1.0).item()

    writer = SummaryWriter(str(folder / "tb"))
    step = iter(range(10**9))

    def tensorboard():
        n = next(step)
        for tag in ("train/loss_step", "train/lr", "train/grad_norm"):
            writer.add_scalar(tag, 0.5, n)

    metrics = folder / "metrics.jsonl"

    def metrics_line():
        with open(metrics, "a", encoding="utf-8") as handle:
            handle.write('{"epoch": 1, "val_loss": 0.5}\n')
            handle.flush()
            os.fsync(handle.fileno())

    rows = [("one plain training step (reference)", "step", best_of(plain_step, repeats, 200)),
            ("bf16 autocast step instead (CPU)", "step", best_of(bf16_step, repeats, 200)),
            ("loss weighting by the window's examples", "micro-step", best_of(weighting, repeats, 2000)),
            ("running loss sum (no .item(), no sync)", "micro-step", best_of(running_sum, repeats, 2000)),
            ("gradient norm, measured (.item())", "update", best_of(norm_measure, repeats, 1000)),
            ("gradient norm, clipped (.item())", "update", best_of(norm_clip, repeats, 1000)),
            ("TensorBoard: 3 scalars", "update", best_of(tensorboard, repeats, 1000)),
            ("metrics.jsonl line, fsynced", "epoch", best_of(metrics_line, repeats, 20))]
    writer.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (import once, outside the timings)

    epochs = args.epochs
    counts = training_arithmetic(WORK["n_train"], WORK["batch_size"], epochs)
    steps = counts.total_weight_updates
    root = Path(tempfile.mkdtemp(prefix="bench_production_"))
    print(f"work: {epochs} epochs x {counts.iters_per_epoch} steps = {steps} updates; batch {WORK['batch_size']}, "
          f"hidden {WORK['hidden']}, 1 thread, min of {args.repeats} repeats")
    variants = [
        ("plain loop (same data order, same work)", None),
        ("production: checkpoint every epoch, TensorBoard, metrics.jsonl", {}),
        ("  the same without TensorBoard", {"tensorboard": False}),
        ("  the same with a checkpoint every 10 updates", {"checkpoint_every": 10}),
        ("  the same with a checkpoint every update", {"checkpoint_every": 1}),
        ("  the same with gradient clipping (clip_norm=1)", {"clip_norm": 1.0}),
        ("  the same with bf16 autocast (CPU)", {"amp": "bf16"}),
        ("  the same with early stopping (patience 100: never stops)", {"patience": 100}),
        ("  the same with 2 DataLoader workers", {"workers": 2}),
    ]
    runs = [(lambda: plain_loop(epochs)) if changes is None else fit_in(root / "run", epochs=epochs, **changes)
            for _, changes in variants]
    loop = [float("inf")] * len(runs)
    whole = [float("inf")] * len(runs)
    digests = [""] * len(runs)
    for _ in range(args.repeats):         # round-robin, so a change in the machine's load hits every variant
        for index, run in enumerate(runs):
            start = time.perf_counter()
            seconds, digests[index] = run()
            whole[index] = min(whole[index], time.perf_counter() - start)
            loop[index] = min(loop[index], seconds)
    print("loop = the epochs only (fit's own clock); call = the whole call, setup and final files included")
    print(f"\n{'run':<62} {'loop':>8} {'ratio':>6} {'+/update':>9} {'call':>8} {'ratio':>6}")
    for (label, _), loop_s, whole_s in zip(variants, loop, whole):
        extra = f"{(loop_s - loop[0]) / steps * 1e6:+7.0f}us" if loop_s is not loop[0] else ""
        print(f"{label:<62} {loop_s * 1e3:6.0f}ms {loop_s / loop[0]:6.2f} {extra:>9} "
              f"{whole_s * 1e3:6.0f}ms {whole_s / whole[0]:6.2f}")
    same = "same final weights as the plain loop: " + ("yes" if digests[1] == digests[0] else "NO")
    print(same)
    print("\ncomponents one by one (min over repeats; % of one plain training step)")
    costs = component_costs(root / "components", max(3, args.repeats))
    reference = costs[0][2]
    for label, unit, seconds in costs:
        print(f"  {label:<44} {seconds * 1e6:9.1f}us per {unit:<10} {100 * seconds / reference:7.1f}%")
    print("\ncheckpoint, taken apart (per call; size of the epoch-end state of this model)")
    for label, value in checkpoint_parts(root / "parts", args.repeats):
        print(f"  {label:<64} {value:9.1f}" + (" KiB" if "KiB" in label else "") if "KiB" in label
              else f"  {label:<64} {value * 1e3:9.3f}ms")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
