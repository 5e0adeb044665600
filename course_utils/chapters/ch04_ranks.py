"""Chapter 4: evaluating on W ranks. DistributedSampler's padding counts some examples twice; the fix sums
(loss, correct, count) over the real examples and all-reduces the sums, never the means.

The all-reduce is real: ``all_reduce_sum`` runs one gloo process group per rank, each rank in a thread of this
process (the same collective a torchrun job calls, without starting W interpreters).
"""
from __future__ import annotations

import datetime
import threading
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from course_utils.engine.rank_shards import rank_sums, real_slots


def all_reduce_sum(per_rank: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every rank's tensor after a real gloo all_reduce (SUM), one thread per rank (chapter 4)."""
    world_size = len(per_rank)
    store = dist.HashStore()
    out: list[torch.Tensor | None] = [None] * world_size
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            group = dist.ProcessGroupGloo(store, rank, world_size, datetime.timedelta(seconds=30))
            tensor = per_rank[rank].clone()
            group.allreduce([tensor]).wait()
            out[rank] = tensor
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [t for t in out if t is not None]


@dataclass(frozen=True)
class RankResults:
    """What each rank's evaluation loop saw: its indices, per-example losses and hits, in its sampler's order."""

    n: int
    world_size: int
    indices: list[list[int]]
    losses: list[torch.Tensor]
    correct: list[torch.Tensor]

    @property
    def slots(self) -> int:
        return sum(len(i) for i in self.indices)

    @property
    def duplicates(self) -> int:
        return self.slots - self.n


def rank_results(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, world_size: int,
                 batch_size: int = 64) -> RankResults:
    """Run every rank's evaluation loader (DistributedSampler, shuffle=False) over the data (chapter 4)."""
    data = TensorDataset(inputs, targets, torch.arange(len(targets)))
    model.eval()
    indices, losses, correct = [], [], []
    with torch.no_grad():
        for rank in range(world_size):
            sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=False)
            seen, rank_losses, hits = [], [], []
            for x, y, i in DataLoader(data, batch_size=batch_size, sampler=sampler):
                logits = model(x)
                rank_losses.append(nn.functional.cross_entropy(logits, y, reduction="none"))
                hits.append(logits.argmax(dim=1) == y)
                seen += i.tolist()
            indices.append(seen)
            losses.append(torch.cat(rank_losses))
            correct.append(torch.cat(hits))
    return RankResults(len(targets), world_size, indices, losses, correct)


@dataclass(frozen=True)
class ShardedMetrics:
    """One model's validation loss and accuracy computed four ways across W ranks (chapter 4)."""

    single: tuple[float, float]           # one process over every example: the truth
    with_padding: tuple[float, float]     # sums over every rank's slots, duplicates included
    mean_of_means: tuple[float, float]    # each rank's mean over its real examples, then averaged over ranks
    reduced_sums: tuple[float, float]     # all_reduce of (loss sum, correct, count) over the real examples
    duplicates: int
    real_per_rank: list[int]


def _rank_rows(results: RankResults, rank: int) -> torch.Tensor:
    """Rank `rank`'s rows to all-reduce: sums over every slot, sums over its real examples, its real means."""
    keep = torch.tensor(real_slots(results.n, results.world_size, rank))
    losses, correct = results.losses[rank], results.correct[rank]
    real = rank_sums(losses, correct, keep)
    return torch.stack([rank_sums(losses, correct), real, torch.cat([real[:2] / real[2], real[2:]])])


def sharded_metrics(models: list[nn.Module], inputs: torch.Tensor, targets: torch.Tensor,
                    world_size: int) -> list[ShardedMetrics]:
    """For each model: one process's metrics against three ways of combining W ranks' results (chapter 4).

    The ranks' rows of every model go through one real all_reduce.
    """
    results = [rank_results(model, inputs, targets, world_size) for model in models]
    per_rank = [torch.stack([_rank_rows(r, rank) for r in results]) for rank in range(world_size)]
    reduced = all_reduce_sum(per_rank)[0]
    out = []
    for model, r, (every, real, means) in zip(models, results, reduced):
        means = means / world_size
        with torch.no_grad():
            logits = model.eval()(inputs)
        single = (float(nn.functional.cross_entropy(logits.double(), targets)),
                  float((logits.argmax(dim=1) == targets).double().mean()))
        out.append(ShardedMetrics(single, (float(every[0] / every[2]), float(every[1] / every[2])),
                                  (float(means[0]), float(means[1])), (float(real[0] / real[2]), float(real[1] / real[2])),
                                  r.duplicates, [sum(real_slots(r.n, world_size, k)) for k in range(world_size)]))
    return out


def padding_layout(n: int, world_size: int) -> list[list[int]]:
    """Each rank's DistributedSampler indices (shuffle=False), for printing where the copies sit (chapter 4)."""
    return [list(DistributedSampler(range(n), num_replicas=world_size, rank=r, shuffle=False))
            for r in range(world_size)]
