"""What chapter 7's checks on two gloo ranks share: torch's first message line, gloo's C++ source position cut, and
every rank's value of something (chapter 7)."""
from __future__ import annotations

import re

import torch
import torch.distributed as dist

from course_utils.chapters.raised import raised


def first_line(call) -> str:
    """What `call` raised, its first line ("Type: message"), or "no error"."""
    return raised(call, whole=False)


def without_source(message: str) -> str:
    """torch's message without the C++ source position gloo puts in front ("[.../pair.cc:598] ")."""
    return re.sub(r"\[[^\]]*\.(?:cc|cpp|h):\d+\] ", "", message)


def both_ranks(value) -> list:
    """Every rank's `value`, in rank order (a picklable object)."""
    boxes: list = [None] * dist.get_world_size()
    dist.all_gather_object(boxes, value)
    return boxes


def equal_on_ranks(t: torch.Tensor) -> bool:
    """Does every rank hold the same values in `t`?"""
    values = both_ranks(t.detach().tolist())
    return all(v == values[0] for v in values)
