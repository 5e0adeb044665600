"""Accelerate run beside the course's counts: its documented accumulation loop, the prepared scheduler's steps on one
process and on W, and what save_state writes (chapter 7; Lightning's run is ``ch07_libraries``).

One tiny run (a ``Linear(2, 1)`` on random inputs, one process, the CPU) reporting only counts and names, which do
not depend on the machine; ``release_accelerator`` frees it and Accelerate's process-wide state.
"""
from __future__ import annotations

import inspect
import math
import os
import tempfile
from dataclasses import dataclass

import torch

from course_utils.chapters.ch07_libraries import quiet_libraries, random_points
from course_utils.engine.arithmetic import training_arithmetic


@dataclass(frozen=True)
class AccelerateRun:
    """What one Accelerate loop did, counted from inside it."""

    version: str
    processes: int
    micro_batches: int                  # calls of scheduler.step() (the loop calls it after every batch)
    optimizer_steps: int                # calls of the wrapped optimizer's own step()
    scheduler_steps: int                # the wrapped scheduler's last_epoch at the end
    accelerator_step: int               # Accelerator.step, as save_state records it
    files: tuple[str, ...]              # what save_state wrote
    random_state_keys: tuple[str, ...]


def run_accelerate(n_train: int = 14_905, batch_size: int = 64, accumulate: int = 4, seed: int = 0) -> AccelerateRun:
    """One epoch of Accelerate's documented accumulation loop (prepare, accumulate, scheduler.step() after every
    batch), counted; then save_state into a temporary folder and list what it wrote (chapter 7)."""
    updates = training_arithmetic(n_train, batch_size, 1, accumulate).total_weight_updates
    calls, steps = 0, [0]
    with quiet_libraries(), tempfile.TemporaryDirectory() as folder:
        import accelerate
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState

        torch.manual_seed(seed)
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        optimizer.register_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
        inner = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=updates)
        accelerator = Accelerator(gradient_accumulation_steps=accumulate, cpu=True)
        try:
            model, optimizer, loader, schedule = accelerator.prepare(model, optimizer,
                                                                     random_points(n_train, batch_size, seed), inner)
            for (x,) in loader:
                with accelerator.accumulate(model):
                    accelerator.backward(model(x).pow(2).mean())
                    optimizer.step()
                    schedule.step()
                    optimizer.zero_grad()
                    calls += 1
            processes = AcceleratorState().num_processes
            accelerator.save_state(folder)
            files = tuple(sorted(os.listdir(folder)))
            saved = torch.load(os.path.join(folder, "random_states_0.pkl"), weights_only=False)
        finally:
            release_accelerator(accelerator)
    return AccelerateRun(version=accelerate.__version__, processes=processes, micro_batches=calls,
                         optimizer_steps=steps[0], scheduler_steps=inner.last_epoch,
                         accelerator_step=int(saved["step"]), files=files, random_state_keys=tuple(sorted(saved)))


def release_accelerator(accelerator) -> None:
    """Free an Accelerator and reset Accelerate's process-wide state, so that a second run in the same kernel
    starts from nothing."""
    from accelerate.state import AcceleratorState, GradientState

    accelerator.free_memory()
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def scheduler_source_line() -> tuple[int, str]:
    """The line of the installed AcceleratedScheduler.step that steps the wrapped scheduler once per process, with
    its line number in accelerate/scheduler.py (chapter 7)."""
    with quiet_libraries():
        from accelerate.scheduler import AcceleratedScheduler

    lines, first = inspect.getsourcelines(AcceleratedScheduler.step)
    for offset, line in enumerate(lines):
        if "range(num_processes)" in line:
            return first + offset, line.strip()
    raise LookupError("AcceleratedScheduler.step no longer loops over num_processes: reread the source")


def accelerate_lines(run: AccelerateRun, n_train: int = 14_905, batch_size: int = 64, accumulate: int = 4,
                     world_size: int = 2) -> list[str]:
    """The Accelerate run against chapter 0's calculator, and what the source says W processes do (chapter 7)."""
    one = training_arithmetic(n_train, batch_size, 1, accumulate)
    ranks = training_arithmetic(n_train, batch_size, 1, accumulate, world_size=world_size)
    number, line = scheduler_source_line()
    stepped = ranks.updates_per_epoch * world_size
    return [
        f"Accelerate {run.version}, {run.processes} process: Accelerator(gradient_accumulation_steps={accumulate}), "
        f"one epoch of {n_train:,} examples, batch {batch_size}",
        f"scheduler.step() called {run.micro_batches} times (after every batch) | optimizer steps: "
        f"{run.optimizer_steps} | wrapped scheduler stepped: {run.scheduler_steps} | the calculator's updates: "
        f"{one.updates_per_epoch} | agree: {run.optimizer_steps == run.scheduler_steps == one.updates_per_epoch}",
        f"accelerate/scheduler.py line {number}: `{line}`: on {world_size} processes each rank makes "
        f"{ranks.updates_per_epoch} updates (the calculator) and the wrapped scheduler steps {stepped} times, "
        f"a schedule sized for {ranks.updates_per_epoch} ends after {math.ceil(ranks.updates_per_epoch / world_size)}",
        f"save_state wrote: {', '.join(run.files)}",
        f"random_states_0.pkl holds: {', '.join(run.random_state_keys)}; its step = {run.accelerator_step}: "
        f"batches through accumulate() since the epoch began, not the {run.optimizer_steps} updates",
    ]
