"""How batches meet ranks, run on chapter 7's two gloo ranks: one batch split over the ranks against one process on
all of it, uneven batch counts (the hang, and Join), and DataLoader workers per rank (chapter 7)."""
from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.chapters.ch07_rank_tools import both_ranks, equal_on_ranks, first_line, without_source
from course_utils.infra.gloo_groups import destroy_kept


def whole_batch(rank: int) -> dict[str, object]:
    """What DDP's averaged gradient is: each rank takes its half of one batch of 8; one SGD step on every rank against
    one process stepping on the whole batch (same start, same lr), for a mean and for a summed loss."""
    world = dist.get_world_size()
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    mine = slice(rank * 8 // world, (rank + 1) * 8 // world)
    out: dict[str, object] = {}
    for reduction in ("mean", "sum"):
        torch.manual_seed(1)
        alone, model = nn.Linear(4, 1), nn.Linear(4, 1)
        model.load_state_dict(alone.state_dict())
        ddp = DDP(model)
        nn.functional.mse_loss(ddp(x[mine]), y[mine], reduction=reduction).backward()
        nn.functional.mse_loss(alone(x), y, reduction=reduction).backward()
        ratio = (alone.weight.grad.norm() / model.weight.grad.norm()).item()
        for net in (alone, model):
            torch.optim.SGD(net.parameters(), lr=0.1).step()
        same = all(torch.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(alone.parameters(), model.parameters()))
        out[f"loss reduction={reduction!r}, 4 examples per rank: gradient, one process on all 8 / DDP's"] = round(
            ratio, 3)
        out[f"loss reduction={reduction!r}: weights after one SGD step (lr 0.1) = one process's on all 8"] = same
    return out


def uneven_batches(rank: int) -> dict[str, object]:
    """Rank 0 has 3 batches, rank 1 has 2 (random per-rank data, an unsharded stream): DDP's all-reduce in rank 0's
    third backward waits for a rank that has finished; then the same loop under Join([ddp])."""
    out: dict[str, object] = {}
    batches = 3 if rank == 0 else 2
    late = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=0.5))   # its own group and a short
    torch.manual_seed(0)                                                               # timeout (default 30 min)
    ddp = DDP(nn.Linear(4, 1), process_group=late)
    done = 0

    def train() -> None:
        nonlocal done
        for _ in range(batches):
            dist.barrier()                    # both ranks start each shared batch together: under load, a rank
            ddp(torch.ones(2, 4)).sum().backward()        # late by the timeout must not pass for the hang
            done += 1
    message = first_line(train)
    if rank == 1:                             # the barrier before rank 0's third batch (then rank 1 is gone)
        dist.barrier()
    out["the default timeout instead (gloo's; torch.distributed.constants.default_pg_timeout)"] = str(
        dist.constants.default_pg_timeout)
    out["rank 0: 3 batches, rank 1: 2; each rank's result"] = both_ranks(      # rank 1 keeps the late group open
        without_source(message) if message != "no error" else f"finished its {done} batches")  # until then
    destroy_kept(late)                        # kept until exit: freed right after a backward, a group can deadlock
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    ddp = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    with Join([ddp]):                         # a rank that runs out answers the others' all-reduces with zeros
        for _ in range(batches):
            optimizer.zero_grad()
            ddp(torch.ones(2, 4) * (rank + 1)).sum().backward()
            optimizer.step()
            steps += 1
    out["the same loop under Join([ddp]): steps per rank"] = both_ranks(steps)
    out["under Join: weights equal on both ranks at the end"] = equal_on_ranks(model.weight)
    return out


class _Pids(torch.utils.data.Dataset):
    """Eight items, each the id of the process that loaded it (a worker's, with num_workers > 0)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        return os.getpid()


def workers_per_rank(rank: int) -> dict[str, object]:
    """num_workers is per process: each rank's DataLoader starts its own workers (chapter 7)."""
    loader = torch.utils.data.DataLoader(_Pids(), batch_size=2, num_workers=2)
    pids = {int(pid) for batch in loader for pid in batch}
    counts = both_ranks(len(pids - {os.getpid()}))
    return {"DataLoader(num_workers=2) on each rank: worker processes each rank started": counts,
            "worker processes in all, on 2 ranks": sum(counts)}
