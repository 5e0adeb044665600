"""Every line running on every rank, DDP's constructor flags, SyncBatchNorm and the collectives a metric needs, run on
the two gloo ranks of chapter 7's torchrun cell, with the checks of ``ch07_ddp_batches`` (chapter 7).

``python -m course_utils.chapters.ch07_ddp_ranks <trainer flags>`` is what that cell launches under torchrun: each
rank joins the process group, runs ``record_rank_traps`` (collectives and tiny DDP models, under a second with the
first DDP's import of torch._dynamo; every call that raises does so on every rank before any message is sent, but
for the timed-out barrier and the uneven batches, which have groups of their own), rank 0 writes what it saw to
``<out>/rank_traps.json``, and the same process then runs the production trainer (``course_utils.train``) with the
same flags, in the group already made (gloo; with a GPU, gloo for CPU tensors and nccl for CUDA ones).

``rank_trap_lines`` reads that record for the notebook and refuses one written by other code than these modules'
(the record carries a digest of their source), so the lines printed are what this code did on two real ranks.
"""
from __future__ import annotations

import datetime
import gc
import hashlib
import inspect
import json
import os
import shutil
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

from course_utils.chapters import ch07_ddp_batches, ch07_rank_tools
from course_utils.chapters.ch07_ddp_batches import uneven_batches, whole_batch, workers_per_rank
from course_utils.chapters.ch07_rank_tools import both_ranks, equal_on_ranks, first_line, without_source
from course_utils.chapters.raised import raised

RECORD = "rank_traps.json"


def _count_buckets(calls: list[int], bucket):        # no return annotation: DDP checks a string's
    """A communication hook that records how many parameters each bucket holds and sends nothing (the model is
    thrown away): no gloo work is started from Python."""
    calls.append(len(bucket.parameters()))
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def _collectives(rank: int) -> dict[str, object]:
    out: dict[str, object] = {"get_rank() on each rank": both_ranks(dist.get_rank())}
    t = torch.tensor([rank + 1.0])
    returned = dist.all_reduce(t)
    out["x = all_reduce(t): x, then t (rank r holds r + 1)"] = (returned, t.item())
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    out["all_reduce(op=ReduceOp.MAX)"] = t.item()
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["all_reduce(op=ReduceOp.AVG)"] = t.item()
    t = torch.tensor([rank + 1.0])
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    out["all_reduce(async_op=True): returns, t after wait()"] = (type(work).__name__, t.item())
    parts = [torch.zeros(2) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, torch.tensor([rank, 10.0 * rank]))
    out["all_gather: rank 0 holds"] = [p.tolist() for p in parts]
    parts = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, torch.tensor([rank + 1.0]), async_op=True).wait()
    out["all_gather(async_op=True) then wait()"] = [p.item() for p in parts]
    t = torch.tensor([rank + 1.0])
    dist.broadcast(t, src=1)
    out["broadcast(src=1): every rank holds"] = both_ranks(t.item())
    t = torch.tensor([rank + 1.0])
    dist.broadcast(t, src=0, async_op=True).wait()
    out["broadcast(src=0, async_op=True): every rank holds"] = both_ranks(t.item())
    t = torch.tensor([rank + 1.0])
    dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    out["reduce(dst=0, op=SUM): rank 0 holds the sum"] = both_ranks(t.item())[0]
    t = torch.tensor([rank + 1.0])
    dist.reduce(t, dst=1, async_op=True).wait()
    out["reduce(dst=1, async_op=True): rank 1 holds"] = both_ranks(t.item())[1]
    out["barrier(async_op=True) returns"] = type(dist.barrier(async_op=True)).__name__
    late = dist.new_group(backend="gloo")     # its own group: the timed-out barrier leaves the main one intact
    if rank == 0:                             # rank 1 is busy elsewhere (rank 0 alone evaluating, in reverse)
        message = first_line(lambda: dist.barrier(group=late, timeout=datetime.timedelta(seconds=0.05)))
        out["rank 0 at barrier(timeout=50 ms), rank 1 never comes"] = without_source(message)
    dist.barrier()                            # rank 1 keeps the late group open until rank 0 has timed out
    dist.destroy_process_group(late)
    return out


class Branchy(nn.Module):
    """Two heads; the forward uses only one, so the other's parameters get no gradient (chapter 7)."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.used, self.unused = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(self.body(x))


def _two_steps(wrap) -> str:
    """Two forward/backward passes of Branchy under wrap(Branchy()), a DDP: 'ran' or torch's message."""
    torch.manual_seed(0)
    model = wrap(Branchy())

    def run() -> None:
        for _ in range(2):
            model(torch.ones(2, 4)).sum().backward()
    message = raised(run)
    return "ran" if message == "no error" else " ".join(
        line.strip() for line in message.splitlines() if "Expected" in line or "indices" in line).split(" This")[0] + (
        " ... " + next(line.strip() for line in message.splitlines() if "indices" in line))


def _bn_model(rank: int) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    model[1].running_mean.fill_(float(rank))      # each rank's own statistics, as after training apart
    return model


def _ddp_flags(rank: int) -> dict[str, object]:
    out: dict[str, object] = {}
    cpu = nn.Linear(2, 2)
    out["DDP(cpu model, device_ids=[0], output_device=0)"] = first_line(
        lambda: DDP(cpu, device_ids=[0], output_device=0))
    torch.manual_seed(rank)                          # a different seed on each rank
    model = nn.Linear(3, 1)
    DDP(model, init_sync=False)
    out["different seeds, init_sync=False: weights equal on both ranks"] = equal_on_ranks(model.weight)
    DDP(model)
    out["different seeds, default init_sync=True: weights equal on both ranks (rank 0's)"] = equal_on_ranks(model.weight)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = _bn_model(rank)
        DDP(model, broadcast_buffers=False)
    out["broadcast_buffers=False: BatchNorm running_mean equal after DDP(...)"] = equal_on_ranks(model[1].running_mean)
    out["broadcast_buffers' warning"] = [str(w.message) for w in caught if "broadcast_buffers" in str(w.message)]
    model = _bn_model(rank)
    ddp = DDP(model, forward_sync_buffers=False)
    out["forward_sync_buffers=False: running_mean equal after DDP(...)"] = equal_on_ranks(model[1].running_mean)
    model[1].running_mean.fill_(float(rank))
    ddp.eval()
    ddp(torch.ones(2, 3))
    out["forward_sync_buffers=False, ranks apart, after an eval forward: equal"] = equal_on_ranks(model[1].running_mean)
    model = _bn_model(rank)
    ddp = DDP(model, forward_sync_buffers=True)
    model[1].running_mean.fill_(float(rank))
    ddp.eval()
    ddp(torch.ones(2, 3))
    out["forward_sync_buffers=True, same: equal (rank 0's, broadcast at the forward)"] = equal_on_ranks(model[1].running_mean)
    out["unused head, default DDP: two steps"] = _two_steps(DDP)
    out["unused head, find_unused_parameters=True"] = _two_steps(lambda m: DDP(m, find_unused_parameters=True))
    out["unused head, static_graph=True"] = _two_steps(lambda m: DDP(m, static_graph=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["unused head, check_reduction=True"] = _two_steps(lambda m: DDP(m, check_reduction=True))
    out["check_reduction's warning"] = [str(w.message) for w in caught if "check_reduction" in str(w.message)]
    unused = []
    for skip in (True, False):
        torch.manual_seed(0)
        model = Branchy()
        ddp = DDP(model, find_unused_parameters=True, skip_all_reduce_unused_params=skip)
        ddp(torch.ones(2, 4)).sum().backward()
        unused.append(model.unused.weight.grad)
    out["find_unused_parameters=True: unused head's grad with skip_all_reduce_unused_params=True, without"] = unused
    grads = {}
    for name, wrap in (("default", DDP), ("batched_grad_copy", lambda m: DDP(m, batched_grad_copy=True)),
                       ("gradient_as_bucket_view", lambda m: DDP(m, gradient_as_bucket_view=True))):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 1))
        ddp = wrap(model)
        for _ in range(2):
            ddp(torch.arange(16.0).reshape(2, 8) + rank).sum().backward()
        grads[name] = [p.grad.clone() for p in model.parameters()]
    for name in ("batched_grad_copy", "gradient_as_bucket_view"):
        out[f"{name}=True: grads = the default's, bit for bit"] = all(
            torch.equal(a, b) for a, b in zip(grads["default"], grads[name]))
    out["gradient_as_bucket_view=True: p.grad.detach_()"] = first_line(lambda: model[0].weight.grad.detach_())
    for name, wrap in (("default (25 MiB)", DDP), ("bucket_cap_mb=0.0001", lambda m: DDP(m, bucket_cap_mb=0.0001)),
                       ("bucket_cap_mb_list=[0.0001, 0.0001]",
                        lambda m: DDP(m, bucket_cap_mb_list=[0.0001, 0.0001]))):
        torch.manual_seed(0)
        ddp = wrap(nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 1)))
        calls: list[int] = []
        ddp.register_comm_hook(calls, _count_buckets)
        per_backward = []
        for _ in range(2):
            ddp(torch.ones(2, 8)).sum().backward()
            per_backward.append(calls[sum(map(len, per_backward)):])
        out[f"{name}: parameters per bucket, backward 1 and 2"] = per_backward
    return out


def _synced_batchnorm(x: torch.Tensor, norm: nn.BatchNorm1d) -> torch.Tensor:
    """SyncBatchNorm's arithmetic in train mode, written out: every rank's row count and sums all-reduced (the sums
    differentiably), then the whole batch's mean and biased variance normalise, and its unbiased variance updates
    the running one. (torch's module gathers each rank's mean, inverse std and count instead: the same statistics.)"""
    from torch.distributed.nn.functional import all_reduce
    rows = torch.tensor([float(x.shape[0])])
    dist.all_reduce(rows)
    count = int(rows.item())
    mean = all_reduce(x.sum(dim=0)) / count
    var = all_reduce((x * x).sum(dim=0)) / count - mean * mean
    with torch.no_grad():
        m = norm.momentum
        norm.running_mean.mul_(1 - m).add_(m * mean)
        norm.running_var.mul_(1 - m).add_(m * var * count / (count - 1))
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def _sync_batchnorm(rank: int) -> dict[str, object]:
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.ReLU())
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    out: dict[str, object] = {"convert_sync_batchnorm: layers": [type(m).__name__ for m in converted]}
    layer = nn.SyncBatchNorm(3)
    out["SyncBatchNorm on CPU, training forward"] = first_line(lambda: layer(torch.ones(2, 3)))
    layer.eval()
    out["SyncBatchNorm on CPU, eval forward: output shape"] = list(layer(torch.ones(2, 3)).shape)
    world = dist.get_world_size()
    batch = torch.randn(2 * world, 3, generator=torch.Generator().manual_seed(0)) * 2 + 1
    mine = batch[2 * rank:2 * rank + 2]
    whole = nn.BatchNorm1d(3)                                # one process, the whole batch
    expected = whole(batch)[2 * rank:2 * rank + 2]
    alone = nn.BatchNorm1d(3)                                # this rank's rows only
    own = nn.BatchNorm1d(3)
    own(mine)
    plain = DDP(nn.Sequential(alone))                        # buffers broadcast from rank 0 at each forward
    got = plain(mine)
    synced = nn.BatchNorm1d(3)
    shared = _synced_batchnorm(mine, synced)
    out[f"BatchNorm in DDP, {len(mine)} of the {len(batch)} rows on each rank: outputs equal one process's on all "
        f"{len(batch)}"] = all(both_ranks(torch.allclose(got, expected, atol=1e-6)))
    out["  its running_mean: this rank's own rows' on every rank"] = all(both_ranks(
        torch.allclose(alone.running_mean, own.running_mean, atol=1e-6)))
    out["  rank 0's running_mean (what rank 0's checkpoint keeps): rank 0's rows'"] = both_ranks(
        torch.allclose(alone.running_mean, own.running_mean, atol=1e-6))[0]
    out["the same rows, the sums all-reduced first (SyncBatchNorm's arithmetic, by hand): outputs equal one "
        "process's"] = all(both_ranks(torch.allclose(shared, expected, atol=1e-6)))
    out["  its running_mean and running_var: the whole batch's, on every rank"] = all(both_ranks(
        torch.allclose(synced.running_mean, whole.running_mean, atol=1e-6)
        and torch.allclose(synced.running_var, whole.running_var, atol=1e-6)))
    out["one row per rank, BatchNorm1d in train mode"] = first_line(lambda: nn.BatchNorm1d(3)(mine[:1]))
    return out


def _every_prediction(rank: int) -> dict[str, object]:
    """Each rank predicts its DistributedSampler shard of 11 examples (example i's prediction: 10 * i); what one
    rank holds, and what all_gather_object of (index, prediction) pairs collects, with and without drop_last."""
    examples = list(range(11))
    out: dict[str, object] = {}
    for drop_last in (False, True):
        shard = DistributedSampler(examples, dist.get_world_size(), rank, shuffle=True, seed=0, drop_last=drop_last)
        parts = both_ranks([(i, 10 * i) for i in shard])
        pairs = [pair for part in parts for pair in part]
        keyed = dict(pairs)                  # a padded duplicate lands on the same key
        out[f"drop_last={drop_last}: examples per rank"] = [len(part) for part in parts]
        out[f"drop_last={drop_last}: rank 0's own predictions cover"] = f"{len(set(dict(parts[0])))} of 11"
        out[f"drop_last={drop_last}: gathered pairs, distinct examples"] = (len(pairs), len(keyed))
        out[f"drop_last={drop_last}: keyed by index, every example once"] = sorted(keyed) == examples
    return out


def _digest() -> str:
    """What wrote a record: this module's source and the two its checks come from."""
    sources = "".join(inspect.getsource(m) for m in (sys.modules[__name__], ch07_ddp_batches, ch07_rank_tools))
    return hashlib.sha256(sources.encode()).hexdigest()[:16]


def _every_line(rank: int, out: Path) -> dict[str, object]:
    """Every rank runs every line of the script: a file written in the loop (a hook saving extra files, a log) is
    written once per rank, unless the write sits under ``if dist.get_rank() == 0``."""
    folder = Path(out) / "every-rank"
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    dist.barrier()
    with open(folder / "unguarded.txt", "a", encoding="utf-8") as log:     # appends: one line per writer
        log.write(f"{rank}\n")
    if dist.get_rank() == 0:
        with open(folder / "guarded.txt", "a", encoding="utf-8") as log:
            log.write(f"{rank}\n")
    dist.barrier()

    def writers(name: str) -> list[int]:
        return sorted(int(line) for line in (folder / name).read_text(encoding="utf-8").split())
    return {"a file written in the loop, unguarded: ranks that wrote it": writers("unguarded.txt"),
            "the same write under if dist.get_rank() == 0: ranks that wrote it": writers("guarded.txt")}


def record_rank_traps(out: Path) -> dict[str, dict[str, object]]:
    """Run every trap on this rank of the current process group; rank 0 writes them to out/RECORD (chapter 7)."""
    rank = dist.get_rank()
    record = {"every line on every rank": {**_every_line(rank, out), **workers_per_rank(rank)},
              "collectives": _collectives(rank),
              "DDP flags": _ddp_flags(rank), "one batch split over the ranks": whole_batch(rank),
              "uneven batch counts": uneven_batches(rank), "SyncBatchNorm": _sync_batchnorm(rank),
              "predictions from every rank": _every_prediction(rank)}
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"source": _digest(), "world_size": dist.get_world_size(), "traps": record}, default=str)
        (out / RECORD).write_text(text, encoding="utf-8")
    return record


def rank_trap_lines(out: Path, recorded_by=record_rank_traps) -> list[str]:
    """The record's lines, after checking it was written by `recorded_by`'s module as it is now (chapter 7)."""
    saved = json.loads((Path(out) / RECORD).read_text(encoding="utf-8"))
    if saved["source"] != _digest() or recorded_by is not record_rank_traps:
        raise RuntimeError(f"{out / RECORD} was written by other code than {__name__}: rerun the torchrun cell")
    lines = [f"world size: {saved['world_size']}"]
    for section, rows in saved["traps"].items():
        lines.append(f"{section}:")
        lines += [f"  {what}: {result}" for what, result in rows.items()]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Join the group torchrun describes, record the traps, then run the production trainer with `argv` in it."""
    argv = sys.argv[1:] if argv is None else argv
    from course_utils.production.cli import main as train
    # One group for the checks and the trainer (which finds it made and uses it): a second group, made after
    # destroying the first, hung two runs: once a rank read the old group's address from the store, once the
    # garbage collector freed the old group during training while a gloo thread was inside a work's destructor
    backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"     # the checks' tensors: CPU
    dist.init_process_group(backend)
    folder = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path(os.getcwd())
    record_rank_traps(folder)
    gc.collect()                              # the checks' DDP objects freed now, not in the middle of training
    dist.barrier()
    return train(argv)


if __name__ == "__main__":
    from course_utils.production.cli import exit_process
    exit_process(main())
