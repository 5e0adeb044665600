"""Chapter 7: a milestone schedule moved to another batch size, stepped by torch's MultiStepLR.

The example is detectron2's 3x detection schedule (16 images per update, base LR 0.02, 270,000 updates, the LR
divided by 10 at updates 210,000 and 250,000) run with 4 images per update. A schedule's milestones are counted
in updates, but what a milestone means is how much data the model has seen at it. Scaling by s = new batch /
old batch, the rule detectron2's ``DefaultTrainer.auto_scale_workers`` applies when ``SOLVER.REFERENCE_WORLD_SIZE``
is set (0 by default: off): IMS_PER_BATCH and BASE_LR times s, MAX_ITER, STEPS and WARMUP_ITERS divided by s.
Warmup is left out here. Updates are counted in thousands (270 for 270,000): the same proportions, 1,000 times
fewer scheduler steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

UNIT = 1000


@dataclass(frozen=True)
class Schedule:
    batch: int
    lr: float
    max_iter: int
    steps: tuple[int, ...]


REFERENCE = Schedule(batch=16, lr=0.02, max_iter=270_000, steps=(210_000, 250_000))
ONE_X = Schedule(batch=16, lr=0.02, max_iter=90_000, steps=(60_000, 80_000))


def scaled(schedule: Schedule, batch: int) -> Schedule:
    """Every field moved with the batch, as detectron2's auto_scale_workers does (its rounding)."""
    s = batch / schedule.batch
    return Schedule(batch, schedule.lr * s, int(round(schedule.max_iter / s)),
                    tuple(int(round(step / s)) for step in schedule.steps))


def lr_per_update(schedule: Schedule) -> list[float]:
    """The LR of each block of UNIT updates, read from torch's MultiStepLR driving an SGD optimizer."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=schedule.lr)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [s // UNIT for s in schedule.steps], gamma=0.1)
    lrs = []
    for _ in range(schedule.max_iter // UNIT):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def shares(schedule: Schedule) -> list[float]:
    """The share of all images seen at each LR value, in the order the values come."""
    lrs = lr_per_update(schedule)
    values = sorted(set(lrs), reverse=True)
    return [lrs.count(v) / len(lrs) for v in values]


def lr_per_image(schedule: Schedule) -> list[float]:
    """The LR divided by the images per update, at each image seen (one value per block of UNIT updates, repeated
    for the images of that block, in blocks of `schedule.batch` images): comparable across batch sizes."""
    return [lr / schedule.batch for lr in lr_per_update(schedule) for _ in range(schedule.batch)]


def _describe(name: str, schedule: Schedule) -> str:
    drops = " and ".join(f"{s:,}" for s in schedule.steps)
    images = " and ".join(f"{s * schedule.batch:,}" for s in schedule.steps)
    return (f"{name}: {schedule.batch} images per update, LR {schedule.lr:g}, {schedule.max_iter:,} updates, drops at "
            f"{drops}: at {images} images of {schedule.max_iter * schedule.batch:,}")


def milestone_lines(batch: int = 4) -> list[str]:
    ref, moved = REFERENCE, scaled(REFERENCE, batch)
    same = all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(lr_per_image(ref), lr_per_image(moved), strict=True))
    kept = replace(moved, steps=ref.steps)
    unchanged = replace(ref, batch=batch, lr=moved.lr)

    def split(schedule):
        return " / ".join(f"{share:.1%}" for share in shares(schedule))
    return [_describe("the 3x reference", ref),
            _describe(f"all scaled by {batch}/{ref.batch}", moved),
            f"  LR per image the same at every point of the {ref.max_iter * ref.batch:,} images: "
            f"{same}; share of the images at each LR: reference {split(ref)}, "
            f"scaled {split(moved)}",
            _describe("MAX_ITER scaled, STEPS kept", kept) + f"; share at each LR {split(kept)}",
            _describe("only the batch and LR changed", unchanged),
            "where the drops fall in each schedule's run: " + "; ".join(
                f"{name} " + " and ".join(f"{step / sch.max_iter:.1%}" for step in sch.steps)
                for name, sch in (("1x", ONE_X), ("3x", ref), ("3x scaled", moved)))]
