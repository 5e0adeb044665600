"""The NaN guard on the device (chapter 7, issue 41): a bad update is skipped without the host waiting for it.

A host read (``.item()``, ``float(t)``, ``.tolist()``) makes Python wait until the GPU has finished
everything queued; the GPU then idles while Python fetches the next batch. So the guard decides on
the device: ``bad = not finite(pre-clip gradient norm) or not finite(window loss)`` is a 0-dim tensor
handed to the fused optimizer as ``found_inf``, the path ``torch.amp.GradScaler`` uses; the fused
kernel then leaves parameters, optimizer state and step counts exactly as they were. Each update's
loss, norm and verdict stay on the device until a log point (every ``log_every`` updates, a
checkpoint, the epoch end), where ``settle()`` reads them all in one host read.

A schedule stepped per update must know whether each update happened before the next one: it runs on
the device too (``DeviceSchedule``: the learning rate as a tensor, the next one picked by a count of
applied updates kept on the device). What must still read once per update (``why_reads_per_update``,
said once at the start): a schedule that also cycles momentum or Adam's betas, fp16 (its GradScaler
decides the skip and rescales), and an optimizer with no fused kernel for its parameters.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from course_utils.production.amp import Precision

APPLIED, SKIPPED, RESCALED = "applied", "skipped", "rescaled"   # RESCALED: fp16 overflow, the scaler's own skip


@dataclass(frozen=True)
class Settled:
    """One update as the host learns it, at a log point."""

    epoch: int             # 0-based epoch, and the batch index that closed the update's window
    batch: int
    loss: float            # the window's mean loss, weighted by examples
    grad_norm: float       # the global gradient norm before clipping
    examples: int
    outcome: str           # APPLIED, SKIPPED or RESCALED


def can_fuse(parameters: list[torch.Tensor]) -> bool:
    """Does torch have fused optimizer kernels for these parameters (floating point, on a supported device)?"""
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    supported = set(_get_fused_kernels_supported_devices())
    return bool(parameters) and all(p.is_floating_point() and p.device.type in supported for p in parameters)


def zero_momentum(optimizer: torch.optim.Optimizer) -> None:
    """Create SGD's momentum buffers as zeros before the first step (dampening 0: the same first step, bitwise).

    Measured on torch 2.13: fused SGD with momentum whose *first* step is skipped by ``found_inf`` leaves its
    buffers created but unwritten (``empty_like``), and every later step reads them as a real history; with
    zeros, ``0.9 * 0 + g`` is exactly the first step's ``g``, skipped or not.
    """
    for group in optimizer.param_groups:
        if group.get("momentum", 0) and not group.get("dampening", 0):
            for p in group["params"]:
                optimizer.state[p].setdefault("momentum_buffer", torch.zeros_like(p))


class DeviceSchedule:
    """A schedule stepped per update, on the device: the learning rates after k applied updates are row k of a
    table (torch's own scheduler replayed on a stand-in optimizer), picked by a count kept on the device.

    The fused optimizers take the learning rate as a tensor (see ``__init__`` for its precision). Only a schedule that changes nothing but the learning rate can
    run this way; OneCycleLR cycling momentum or Adam's betas cannot (``build`` returns None).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, rows: list[list[float]], device: torch.device):
        self.optimizer, self.rows = optimizer, rows
        # CPU: float64, measured bitwise equal to a Python float for the four optimizers; elsewhere float32, the
        # precision the fused GPU kernels compute in (MPS has no float64; CUDA not measured here: no GPU was lent)
        wide = torch.float64 if device.type == "cpu" else torch.float32
        self.table = torch.tensor(rows, dtype=wide, device=device)
        self.count = torch.zeros(1, dtype=torch.long, device=device)

    @staticmethod
    def build(make: Callable[[torch.optim.Optimizer], object], optimizer: torch.optim.Optimizer, total: int,
              device: torch.device) -> DeviceSchedule | None:
        """`make(optimizer)` builds the run's scheduler; replay it `total` updates on a stand-in of `optimizer`."""
        groups = [{k: v for k, v in g.items() if k != "params"} | {"params": [torch.zeros(1)]}
                  for g in optimizer.param_groups]
        stand_in = type(optimizer)(groups)
        scheduler = make(stand_in)
        kept = [{k: v for k, v in g.items() if k not in ("params", "lr", "initial_lr", "max_lr", "min_lr")}
                for g in stand_in.param_groups]
        rows = []
        for update in range(total + 1):
            rows.append([float(g["lr"]) for g in stand_in.param_groups])
            if [{k: v for k, v in g.items() if k in kept[i]} for i, g in enumerate(stand_in.param_groups)] != kept:
                return None                        # it also changes momentum or betas: not on the device
            if update < total:
                stand_in.step()                    # no gradients: nothing moves; the scheduler sees a step
                scheduler.step()
        return DeviceSchedule(optimizer, rows, device)

    def start(self, applied: int) -> None:
        """Put the learning rates on the device, at the row of `applied` updates (0, or a resumed run's count)."""
        self.count.fill_(applied)
        for group, lr in zip(self.optimizer.param_groups, self.rows[min(applied, len(self.rows) - 1)]):
            group["lr"] = torch.tensor(lr, dtype=self.table.dtype, device=self.table.device)

    def advance(self, bad: torch.Tensor) -> None:
        """After an update: one more applied unless it was skipped; the next learning rates, all on the device."""
        self.count.add_(1 - bad.long()).clamp_(max=len(self.rows) - 1)
        row = self.table.index_select(0, self.count)[0]
        for i, group in enumerate(self.optimizer.param_groups):
            group["lr"].copy_(row[i])

    def lr(self, applied: int) -> float:
        """The first group's learning rate after `applied` updates, known on the host without a read."""
        return self.rows[min(applied, len(self.rows) - 1)][0]


def why_reads_per_update(fused: bool, cadence: str, precision: Precision, schedule: DeviceSchedule | None) -> str | None:
    """Why this run must read the guard's verdict every update (None: only at log points)."""
    if precision.scaler is not None:
        return "amp fp16: its GradScaler decides each skip and rescales"
    if not fused:
        return "the optimizer has no fused kernel for these parameters, to skip an update on the device"
    if cadence == "update" and schedule is None:
        return ("the schedule steps once per applied update and also changes momentum (or Adam's betas), which the "
                "fused kernels take as numbers: it must learn whether each update happened")
    return None


class UpdateGuard:
    """The update and its guard (chapter 7): `step()` per update, `settle()` at log points (see the module)."""

    def __init__(self, optimizer: torch.optim.Optimizer, precision: Precision, world_size: int, on_device: bool,
                 schedule: DeviceSchedule | None = None):
        self.optimizer, self.precision, self.world_size, self.on_device = optimizer, precision, world_size, on_device
        self.schedule = schedule if on_device else None
        self.pending: list[tuple[int, int, list[int], torch.Tensor]] = []   # epoch, batch, sizes, values (device)
        self.ready: list[Settled] = []              # updates already read (a run that reads per update)

    def step(self, grad_norm: torch.Tensor, losses: list[torch.Tensor], sizes: list[int], epoch: int,
             batch: int) -> None:
        """Take the update unless its gradient norm or a loss is not finite (on the device when it can)."""
        wide = torch.float64 if any(t.dtype == torch.float64 for t in [grad_norm, *losses]) else torch.float32
        values = torch.stack([t.detach().to(wide) for t in [grad_norm, *losses]])   # exact: the floats .item() gives
        # Under DDP the verdict reads the norm alone: the gradients are all-reduced, so every rank sees the same norm
        # and skips together (a rank's NaN loss makes its gradients, and so everyone's, NaN), with no collective
        bad = (~torch.isfinite(values if self.world_size == 1 else values[:1]).all()).to(wide)
        self.pending.append((epoch, batch, list(sizes), torch.cat([bad.reshape(1), values])))
        if self.on_device:
            self.optimizer.found_inf = bad.float()  # the fused kernel leaves everything as it was when this is 1
            try:
                self.optimizer.step()
            finally:
                del self.optimizer.found_inf
            if self.schedule is not None:
                self.schedule.advance(bad)
            return
        self.ready += self._read()                  # this update's one host read
        if self.ready[-1].outcome == APPLIED or self.precision.scaler is not None:
            self.precision.step(self.optimizer)     # fp16: the scaler skips inf/NaN gradients and lowers its scale

    @property
    def taken(self) -> int:
        """Updates stepped since the last settle (applied or skipped: the host does not know yet)."""
        return len(self.pending) + len(self.ready)

    def settle(self) -> list[Settled]:
        """Every update since the last log point, in one host read (none when nothing is pending)."""
        settled, self.ready = self.ready + self._read(), []
        return settled

    def _read(self) -> list[Settled]:
        if not self.pending:
            return []
        flat = torch.cat([v.double() for *_, v in self.pending]).tolist()
        settled, at = [], 0
        for epoch, batch, sizes, _ in self.pending:
            bad, norm, *losses = flat[at:at + 2 + len(sizes)]
            at += 2 + len(sizes)
            loss = sum(value * n for value, n in zip(losses, sizes)) / sum(sizes)
            finite_losses = all(math.isfinite(v) for v in losses)
            outcome = APPLIED if not bad else RESCALED if self.precision.scaler is not None and finite_losses \
                else SKIPPED
            settled.append(Settled(epoch, batch, loss, norm, sum(sizes), outcome))
        self.pending.clear()
        return settled
