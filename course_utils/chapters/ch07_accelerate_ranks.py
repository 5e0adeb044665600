"""Accelerate run, not read (chapter 7): its prepared scheduler on two processes, and `accumulate` at the loader's end.

`scheduler_steps_on_ranks` forks `world_size` CPU processes that join one gloo group the way `accelerate launch`
sets them up (MASTER_ADDR, RANK, WORLD_SIZE, LOCAL_RANK), and counts how far a prepared scheduler advances in a
few calls of `scheduler.step()`: by default, with `split_batches=True`, and with
`step_scheduler_with_optimizer=False`. `last_batch_steps` counts, in one process, the optimizer steps that
`accelerator.accumulate(model)` lets through when each batch is itself cut into smaller pieces.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import socket
import warnings
from dataclasses import dataclass

import torch

VARIANTS = ("default", "split_batches=True", "step_scheduler_with_optimizer=False")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def _silent_process():
    """A forked child writes nothing where the notebook would show it (ipykernel forwards file descriptors 1, 2)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _rank(rank: int, world_size: int, port: int, calls: int, results) -> None:
    with _silent_process():
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                          LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
        from accelerate import Accelerator, DataLoaderConfiguration
        from accelerate.state import AcceleratorState, GradientState, PartialState

        AcceleratorState._reset_state(True)                       # nothing inherited from the parent
        PartialState._reset_state()
        GradientState._reset_state()
        counts = {}
        for variant in VARIANTS:
            model = torch.nn.Linear(2, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            inner = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
            accelerator = Accelerator(cpu=True, step_scheduler_with_optimizer=variant != VARIANTS[2],
                                      dataloader_config=DataLoaderConfiguration(split_batches=variant == VARIANTS[1]))
            model, optimizer, schedule = accelerator.prepare(model, optimizer, inner)
            for _ in range(calls):
                accelerator.backward(model(torch.ones(4, 2)).sum())
                optimizer.step()
                schedule.step()
                optimizer.zero_grad()
            counts[variant] = inner.last_epoch
            processes, kind = AcceleratorState().num_processes, str(AcceleratorState().distributed_type)
        results.put((rank, processes, kind.rsplit(".", 1)[-1], counts))
        accelerator.wait_for_everyone()
        torch.distributed.destroy_process_group()


@dataclass(frozen=True)
class RanksRun:
    processes: int                     # what AcceleratorState saw in each rank
    kind: str                          # its distributed type (MULTI_CPU)
    calls: int                         # scheduler.step() calls made by each rank
    steps: dict[str, list[int]]        # variant -> how far the wrapped scheduler advanced, per rank


def scheduler_steps_on_ranks(world_size: int = 2, calls: int = 3, timeout: float = 120.0) -> RanksRun:
    """Fork `world_size` processes into one gloo group, as `accelerate launch` would, and count each rank's scheduler
    steps for the three VARIANTS."""
    context = mp.get_context("fork")
    results = context.Queue()
    port = _free_port()
    children = [context.Process(target=_rank, args=(rank, world_size, port, calls, results))
                for rank in range(world_size)]
    for child in children:
        child.start()
    try:
        got = sorted(results.get(timeout=timeout) for _ in children)
    finally:
        for child in children:
            child.join(timeout)
            if child.is_alive():
                child.kill()
    if any(child.exitcode for child in children):
        raise RuntimeError(f"an Accelerate rank failed (exit codes {[child.exitcode for child in children]})")
    steps = {variant: [counts[variant] for *_, counts in got] for variant in VARIANTS}
    return RanksRun(got[0][1], got[0][2], calls, steps)


def last_batch_steps(batches: int = 5, accumulate: int = 2, pieces: int = 2) -> list[tuple[bool, int]]:
    """One process: `batches` batches under `accelerator.accumulate(model)` with gradient_accumulation_steps
    `accumulate`, each batch cut into `pieces` smaller ones, each with its own backward and optimizer.step().
    Per batch: (sync_gradients, optimizer steps that really happened)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState, GradientState

        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        taken = [0]
        optimizer.register_step_post_hook(lambda *_: taken.__setitem__(0, taken[0] + 1))
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(4 * batches, 2)), batch_size=4)
        accelerator = Accelerator(cpu=True, gradient_accumulation_steps=accumulate)
        try:
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            per_batch = []
            for (x,) in loader:
                before = taken[0]
                with accelerator.accumulate(model):
                    for piece in x.chunk(pieces):
                        accelerator.backward(model(piece).sum())
                        optimizer.step()
                        optimizer.zero_grad()
                    per_batch.append((accelerator.sync_gradients, taken[0] - before))
        finally:
            accelerator.free_memory()
            AcceleratorState._reset_state(True)
            GradientState._reset_state()
    return per_batch


def ranks_lines(run: RanksRun, per_batch: list[tuple[bool, int]], accumulate: int = 2, pieces: int = 2) -> list[str]:
    """What the two runs counted."""
    lines = [f"Accelerate on {run.processes} processes ({run.kind}, gloo), {run.calls} calls of scheduler.step() "
             "on each: the wrapped scheduler advanced"]
    lines += [f"  {variant:<38} {', '.join(map(str, counts))} (per rank)" for variant, counts in run.steps.items()]
    lines.append(f"one process, gradient_accumulation_steps={accumulate}, each batch cut into {pieces} pieces "
                 "with a step each: per batch (sync_gradients, optimizer steps taken)")
    lines.append("  " + " | ".join(f"batch {i}: {sync}, {steps}" for i, (sync, steps) in enumerate(per_batch)))
    return lines


def clip_in_accumulate(accumulate: int = 4, batches: int = 16, batch_size: int = 4, max_norm: float = 0.5,
                       seed: int = 0) -> dict[str, tuple[int, float]]:
    """One process, `batches` batches inside `accelerator.accumulate(model)`, `accelerator.clip_grad_norm_` called
    either on every batch or only when `accelerator.sync_gradients`. The oracle: plain torch, one backward of each
    window's `accumulate` batches taken as one batch, clipped once, one step. Per way: (clip calls, the largest
    difference of a final weight from the oracle's)."""
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(batches * batch_size, 8, generator=g), torch.randn(batches * batch_size, 1, generator=g)
    window = accumulate * batch_size

    def fresh() -> torch.nn.Linear:
        torch.manual_seed(seed)
        return torch.nn.Linear(8, 1)

    oracle = fresh()
    plain = torch.optim.SGD(oracle.parameters(), lr=0.1)
    for start in range(0, len(x), window):
        plain.zero_grad()
        torch.nn.functional.mse_loss(oracle(x[start:start + window]), y[start:start + window]).backward()
        torch.nn.utils.clip_grad_norm_(oracle.parameters(), max_norm)
        plain.step()
    expected = torch.cat([p.detach().flatten() for p in oracle.parameters()])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState, GradientState
        for way in ("when sync_gradients", "on every batch"):
            model = fresh()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
            accelerator = Accelerator(cpu=True, gradient_accumulation_steps=accumulate)
            clips = 0
            try:
                model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
                for xb, yb in loader:
                    with accelerator.accumulate(model):
                        accelerator.backward(torch.nn.functional.mse_loss(model(xb), yb))
                        if way == "on every batch" or accelerator.sync_gradients:
                            accelerator.clip_grad_norm_(model.parameters(), max_norm)
                            clips += 1
                        optimizer.step()
                        optimizer.zero_grad()
                got = torch.cat([p.detach().flatten() for p in model.parameters()])
            finally:
                accelerator.free_memory()
                AcceleratorState._reset_state(True)
                GradientState._reset_state()
            out[way] = (clips, (got - expected).abs().max().item())
    return out


def unscale_twice_error() -> str:
    """A GradScaler (torch's, on the CPU here) whose gradients are unscaled on a micro-batch that does not step, then
    again on the next: torch's own message. Accelerate's `clip_grad_norm_` under fp16 calls `unscale_` first."""
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    for _ in range(2):
        scaler.scale(model(torch.ones(4, 2)).sum()).backward()
        try:
            scaler.unscale_(optimizer)
        except RuntimeError as error:
            return f"RuntimeError: {error}"
    return "no error"


def clip_lines(runs: dict[str, tuple[int, float]], accumulate: int = 4, batches: int = 16) -> list[str]:
    """The clipping runs as chapter 7 prints them."""
    lines = [f"{batches} batches, gradient_accumulation_steps={accumulate}, max_norm 0.5; the oracle clips each "
             f"window's gradient once:"]
    for way, (clips, off) in runs.items():
        lines.append(f"  clip {way:<21} {clips:>2} clip calls; final weights equal the oracle's within 1e-6: "
                     f"{off < 1e-6}")
    lines.append(f"GradScaler, unscale_ on two micro-batches of one window: {unscale_twice_error()}")
    return lines
