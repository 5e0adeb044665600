"""Exercise 2.4: a weighted sampler shared out between ranks, checked against the engine's rule (one draw from
seed + epoch on every rank, dealt out like DistributedSampler) and torch.multinomial itself."""
from __future__ import annotations

import math

import torch

from course_utils.engine.rank_shards import weighted_shard as reference
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.search import search
from course_utils.exercises.words import Fail, as_numbers, kind, show


def _draw(weights: torch.Tensor, total: int, seed: int) -> list[int]:
    """torch.multinomial with the weights as given (the float32 path may differ from WeightedRandomSampler's double)."""
    return torch.multinomial(weights, total, replacement=True, generator=torch.Generator().manual_seed(seed)).tolist()


def _right_answers(weights: torch.Tensor, num_samples: int, world_size: int, rank: int, epoch: int,
                   seed: int) -> list[list[int]]:
    total = world_size * math.ceil(num_samples / world_size)
    return [reference(weights, num_samples, world_size, rank, epoch, seed),
            _draw(weights, total, seed + epoch)[rank::world_size]]


def _diagnose(got: list[int], weights: torch.Tensor, num_samples: int, W: int, rank: int, epoch: int,
              seed: int) -> str:
    """A hint naming the likely mistake, found by comparing with the usual wrong recipes."""
    total = W * math.ceil(num_samples / W)
    per_rank = total // W
    full = _draw(weights.double(), total, seed + epoch)
    if got == _draw(weights.double(), total, seed + epoch + rank)[rank::W] and rank > 0:
        return ("Every rank seeds its generator with seed + epoch, the same number on every rank. With seed + rank + "
                "epoch, rank 1's epoch 0 is rank 0's epoch 1.")
    if got == _draw(weights.double(), total, seed)[rank::W] or got == _draw(weights, total, seed)[rank::W]:
        return "The draw must change from epoch to epoch: seed the generator with seed + epoch."
    if got == full or got == full[:num_samples]:
        return "Each rank keeps only its share of the draw: every world_size-th index, starting at its rank."
    if got == full[rank * per_rank:(rank + 1) * per_rank]:
        return ("Deal the draw out like DistributedSampler: rank r keeps draws r, r + world_size, r + 2·world_size, "
                "..., not one contiguous block.")
    if len(got) != per_rank:
        return (f"Every rank draws the same number, ceil(num_samples / world_size) = {per_rank}: the whole draw holds "
                f"world_size * ceil(num_samples / world_size) = {total} indices.")
    return ("Draw with torch.multinomial(weights, total, replacement=True, generator=g), g seeded with seed + epoch, "
            "then keep draws rank, rank + world_size, ...")


def _case(attempt: Attempt, weights: torch.Tensor, num_samples: int, W: int, rank: int, epoch: int,
          seed: int) -> None:
    what = (f"weights {show(weights, 60)}, num_samples={num_samples}, world_size={W}, rank={rank}, epoch={epoch}, "
            f"seed={seed}")
    before_w, before_rng = weights.clone(), torch.get_rng_state()
    got = attempt.call(what, weights, num_samples, W, rank, epoch, seed)
    if not torch.equal(weights, before_w) or weights.dtype != before_w.dtype:
        raise Fail("your function changed the `weights` tensor it was given (the sampler uses it again next epoch).",
                   "Leave the input alone: work on a copy, or on a new tensor.")
    if not torch.equal(torch.get_rng_state(), before_rng):
        raise Fail("your function drew from torch's global random state (it changed after the call). Every rank "
                   "must make the same draw whatever else the script has drawn before.",
                   "Draw from your own generator: g = torch.Generator().manual_seed(seed + epoch).")
    listed = as_numbers(list(got) if isinstance(got, range) else got)
    if listed is None or not all(isinstance(i, int) for i in listed):
        raise Fail(f"your function returned {kind(got)} ({show(got)}), not a list of indices.",
                   "Return a list of ints (`.tolist()` turns a tensor into one).")
    if any(weights[i] == 0 for i in listed if 0 <= i < len(weights)) or any(not 0 <= i < len(weights) for i in listed):
        raise Fail(f"rank {rank} got {show(listed, 60)}: an index out of range or of weight 0.",
                   "Draw indices of examples, in proportion to the weights.")
    if listed in _right_answers(weights, num_samples, W, rank, epoch, seed):
        return
    want = _right_answers(weights, num_samples, W, rank, epoch, seed)[0]
    raise Fail(f"rank {rank} drew {show(listed, 70)}; the shared draw gives it {show(want, 70)}.",
               _diagnose(listed, weights, num_samples, W, rank, epoch, seed))


def _all_ranks(attempt: Attempt, weights: torch.Tensor, num_samples: int, W: int, epoch: int, seed: int) -> None:
    for rank in range(W):
        _case(attempt, weights, num_samples, W, rank, epoch, seed)


def check_weighted_shard(attempt: Attempt) -> str:
    """The oracle: engine.rank_shards.weighted_shard (one multinomial draw from seed + epoch, dealt out)."""
    f32, f64 = torch.float32, torch.float64
    edge = [(torch.tensor([1.0, 1.0, 2.0, 4.0], dtype=f32), 8, 2, 0, 0),      # two ranks, divisible
            (torch.tensor([0.9] * 9 + [0.1], dtype=f64), 10, 4, 0, 0),         # 10 draws on 4 ranks: 12 in all
            (torch.tensor([1.0, 3.0], dtype=f32), 5, 1, 0, 0),                  # one rank: the whole draw
            (torch.tensor([0.0, 1.0, 3.0], dtype=f32), 2, 3, 0, 0),             # fewer draws than ranks; a zero weight
            (torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=f64), 12, 3, 1, 0),  # epoch 1
            (torch.tensor([5.0, 1.0, 1.0], dtype=f32), 9, 3, 2, 7)]             # epoch 2, seed 7
    for weights, num_samples, W, epoch, seed in edge:
        _all_ranks(attempt, weights, num_samples, W, epoch, seed)
    same = [attempt.call("the same arguments twice (rank 1 of 3, epoch 4)", torch.tensor([1.0, 2.0, 3.0]), 30, 3, 1, 4, 0)
            for _ in range(2)]
    if as_numbers(same[0]) != as_numbers(same[1]):
        raise Fail("two calls with the same arguments drew different indices: the ranks would not agree on one draw.",
                   "Seed your own generator with seed + epoch inside the function.")
    from hypothesis import strategies as st
    cases = st.tuples(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=12), st.integers(1, 40),
                      st.integers(1, 6), st.integers(0, 5), st.integers(0, 100))
    tried = search(cases, lambda c: _all_ranks(attempt, torch.tensor(c[0], dtype=f64), c[1], c[2], c[3], c[4]),
                   examples=40)
    return (f"{len(edge) + tried} weight vectors, every rank of each: the shared draw from seed + epoch, dealt out "
            "rank by rank (draws not divisible by the ranks, fewer draws than ranks, a zero weight, one rank, float32 "
            "and float64 weights), the same on a second call, the weights and torch's random state left alone.")


def exercises() -> list[Exercise]:
    """Chapter 2, exercise 2.4."""
    return [Exercise("weighted_shard", "02", "one rank's share of a weighted draw made alike on every rank",
                     "weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0) -> list[int]",
                     check_weighted_shard, arity=(6,),
                     oracle="one torch.multinomial draw from seed + epoch, dealt out like DistributedSampler")]
