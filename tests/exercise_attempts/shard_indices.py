"""Attempts at Exercise 2.3, shard_indices(n, world_size, rank)."""
import math

import torch


def right_modulo(n, world_size, rank):
    """Position j of the padded list holds index j % n; rank takes every world_size-th position."""
    total = math.ceil(n / world_size) * world_size if n else 0
    return [j % n for j in range(rank, total, world_size)]


def right_build_padded(n, world_size, rank):
    """Builds the padded list as the sampler does, repeating the list as many times as the padding needs."""
    per_rank = -(-n // world_size)
    indices = list(range(n))
    while len(indices) < per_rank * world_size:
        indices += indices[:per_rank * world_size - len(indices)]
    return indices[rank::world_size]


def wrong_no_padding(n, world_size, rank):
    """Strided without padding: n=10, world_size=4 gives rank 2 [2, 6], not [2, 6, 0]."""
    return list(range(rank, n, world_size))


def wrong_contiguous_blocks(n, world_size, rank):
    """Contiguous blocks instead of a stride: n=8, world_size=2 gives rank 0 [0, 1, 2, 3], not [0, 2, 4, 6]."""
    per = math.ceil(n / world_size)
    return [j % n for j in range(rank * per, (rank + 1) * per)]


def wrong_pad_with_last(n, world_size, rank):
    """Pads by repeating the last index: n=10, world_size=4 gives rank 2 [2, 6, 9], not [2, 6, 0]."""
    total = math.ceil(n / world_size) * world_size
    indices = list(range(n)) + [n - 1] * (total - n)
    return indices[rank::world_size]


def wrong_pad_once(n, world_size, rank):
    """indices + indices[:padding] repeats the list once only: n=2, world_size=5 gives rank 4 [], not [0]."""
    total = math.ceil(n / world_size) * world_size
    indices = list(range(n))
    indices += indices[:total - n]
    return indices[rank::world_size]


def wrong_drop_tail(n, world_size, rank):
    """Floors to n // world_size per rank (the drop_last=True behaviour): n=10, world_size=4 gives rank 0 [0, 4]."""
    total = (n // world_size) * world_size
    return list(range(rank, total, world_size))


def wrong_extra_round(n, world_size, rank):
    """per_rank = n // world_size + 1: one too many when world_size divides n, n=8, world_size=4 gives 3 per rank."""
    total = (n // world_size + 1) * world_size
    return [j % n for j in range(rank, total, world_size)]


def wrong_returns_tensor(n, world_size, rank):
    """Right values as a LongTensor, not the list asked for: any input."""
    total = math.ceil(n / world_size) * world_size
    return torch.arange(rank, total, world_size) % n
