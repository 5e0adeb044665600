"""Attempts at Exercise 2.4, weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0)."""
import math

import torch
from torch.utils.data import DistributedSampler, WeightedRandomSampler


def right_weighted_random_sampler(weights, num_samples, world_size, rank, epoch, seed=0):
    """torch's own WeightedRandomSampler draws the total with the seeded generator; a slice deals it out."""
    total = world_size * math.ceil(num_samples / world_size)
    sampler = WeightedRandomSampler(weights, total, replacement=True,
                                    generator=torch.Generator().manual_seed(seed + epoch))
    return list(sampler)[rank::world_size]


def right_distributed_sampler_deal(weights, num_samples, world_size, rank, epoch, seed=0):
    """Draws once, then lets a DistributedSampler (no shuffle, nothing to pad) pick this rank's positions."""
    per_rank = -(-num_samples // world_size)
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    drawn = torch.multinomial(weights, per_rank * world_size, replacement=True, generator=g).tolist()
    positions = DistributedSampler(drawn, num_replicas=world_size, rank=rank, shuffle=False)
    return [drawn[p] for p in positions]


def wrong_ignores_epoch(weights, num_samples, world_size, rank, epoch, seed=0):
    """Seeds with `seed` alone, so every epoch draws the same sample: epoch=1 gives epoch 0's indices."""
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].tolist()


def wrong_seed_plus_rank(weights, num_samples, world_size, rank, epoch, seed=0):
    """Seeds every rank differently (seed + epoch + rank): rank 1 of epoch 0 draws what rank 0 draws in epoch 1."""
    per_rank = math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch + rank)
    return torch.multinomial(weights, per_rank, replacement=True, generator=g).tolist()


def wrong_same_draw_every_rank(weights, num_samples, world_size, rank, epoch, seed=0):
    """The chapter's first attempt: every rank draws its ceil(num_samples / W) with the same seed; all ranks agree."""
    per_rank = math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, per_rank, replacement=True, generator=g).tolist()


def wrong_global_rng(weights, num_samples, world_size, rank, epoch, seed=0):
    """Right indices, but seeds torch's global RNG (manual_seed) and draws from it: the caller's random stream moves."""
    total = world_size * math.ceil(num_samples / world_size)
    torch.manual_seed(seed + epoch)
    return torch.multinomial(weights, total, replacement=True)[rank::world_size].tolist()


def wrong_unseeded_generator(weights, num_samples, world_size, rank, epoch, seed=0):
    """Seeds the global RNG, then draws with a fresh Generator() it never seeded (torch's default seed): any input."""
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator()
    torch.manual_seed(seed + epoch)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].tolist()


def wrong_floor_per_rank(weights, num_samples, world_size, rank, epoch, seed=0):
    """Draws W * (num_samples // W): num_samples=10, world_size=4 gives each rank 2 indices, not 3."""
    total = world_size * (num_samples // world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].tolist()


def wrong_pad_from_start(weights, num_samples, world_size, rank, epoch, seed=0):
    """Draws num_samples and pads with its first draws, as DistributedSampler pads: num_samples=10, W=4, rank 2's last."""
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    drawn = torch.multinomial(weights, num_samples, replacement=True, generator=g).tolist()
    drawn += drawn[:total - num_samples]
    return drawn[rank::world_size]


def wrong_contiguous_blocks(weights, num_samples, world_size, rank, epoch, seed=0):
    """Rank r keeps a contiguous block (view(W, -1)[r]) instead of every W-th draw: any world_size > 1."""
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, total, replacement=True, generator=g).view(world_size, -1)[rank].tolist()


def wrong_normalises_in_place(weights, num_samples, world_size, rank, epoch, seed=0):
    """Right indices, but `weights /= weights.sum()` rescales the caller's tensor: any weights not summing to 1."""
    weights /= weights.sum()
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size].tolist()


def wrong_list_of_tensors(weights, num_samples, world_size, rank, epoch, seed=0):
    """`list(tensor)` gives 0-d tensors, not the ints asked for: any input (equal to ints with ==, but not ints)."""
    total = world_size * math.ceil(num_samples / world_size)
    g = torch.Generator().manual_seed(seed + epoch)
    return list(torch.multinomial(weights, total, replacement=True, generator=g)[rank::world_size])
