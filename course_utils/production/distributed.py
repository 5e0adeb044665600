"""Scale-out (chapter 7): the same fit() alone or as one rank under `torchrun` (DDP; gloo on CPU, nccl on CUDA)."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from course_utils.infra.gloo_groups import destroy_kept


@dataclass(frozen=True)
class Ranks:
    """Who this process is: rank, world size, its device, the backend ('' when alone)."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, metrics, TensorBoard and prints."""
        return self.rank == 0


def setup(device: str = "auto") -> Ranks:
    """Join the process group when torchrun started us (WORLD_SIZE > 1), else run alone (chapter 7)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda was asked for but no CUDA GPU is available")
    if world <= 1:
        return Ranks(0, 1, 0, torch.device("cuda" if cuda else "cpu"), "")
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if cuda else "gloo"
    target = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(target)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, **({"device_id": target} if cuda else {}))
    return Ranks(rank, world, local, target, backend)


def teardown(ranks: Ranks) -> None:
    """Leave the process group (when we joined one)."""
    if ranks.world_size > 1 and dist.is_initialized():
        dist.barrier()
        destroy_kept()        # the group's object kept until exit: freed after a backward, it can deadlock


def abandon(ranks: Ranks) -> None:
    """Leave the process group without waiting for the others (every rank is about to raise the same error)."""
    if ranks.world_size > 1 and dist.is_initialized():
        destroy_kept()        # the group's object kept until exit: freed after a backward, it can deadlock


def wrap(model: nn.Module, ranks: Ranks) -> nn.Module:
    """DistributedDataParallel around `model` under torchrun; the model itself when alone."""
    if ranks.world_size == 1:
        return model
    return DistributedDataParallel(model, device_ids=[ranks.device.index] if ranks.device.type == "cuda" else None)


def sync_gradients(model: nn.Module, update: bool) -> contextlib.AbstractContextManager:
    """Inside an accumulation window, skip DDP's all-reduce (`no_sync`); reduce on the window's last micro-batch."""
    if isinstance(model, DistributedDataParallel) and not update:
        return model.no_sync()
    return contextlib.nullcontext()


def all_sum(values: torch.Tensor, ranks: Ranks) -> torch.Tensor:
    """Sum a tensor over ranks (itself when alone)."""
    if ranks.world_size > 1:
        values = values.clone()
        dist.all_reduce(values)
    return values


def share(value: Any, ranks: Ranks) -> Any:
    """Rank 0's `value`, on every rank (a picklable object)."""
    if ranks.world_size == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(value: Any, ranks: Ranks) -> list[Any]:
    """Every rank's `value`, in rank order, on every rank."""
    if ranks.world_size == 1:
        return [value]
    boxes: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(boxes, value)
    return boxes
