"""Exercise 2.4: a weighted sampler shared out between ranks, checked against the engine's rule (one draw from
seed + epoch on every rank, dealt out like DistributedSampler) and torch.multinomial itself."""
from __future__ import annotations

import math

import torch

from course_utils.engine.rank_shards import weighted_shard as reference
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.search import search
from course_utils.exercises.words import Fail, as_numbers, kind, show


def _draw(weights: torch.Tensor, total: int, seed: int | None) -> list[int]:
    """torch.multinomial with the weights as given (the float32 path may differ from WeightedRandomSampler's double);
    seed None: a fresh Generator() left at torch's default seed."""
    g = torch.Generator() if seed is None else torch.Generator().manual_seed(seed)
    return torch.multinomial(weights, total, replacement=True, generator=g).tolist() if total > 0 else []


def _right_answers(weights: torch.Tensor, num_samples: int, world_size: int, rank: int, epoch: int,
                   seed: int) -> list[list[int]]:
    total = world_size * math.ceil(num_samples / world_size)
    return [reference(weights, num_samples, world_size, rank, epoch, seed),
            _draw(weights, total, seed + epoch)[rank::world_size]]


def _slips(weights: torch.Tensor, n: int, W: int, rank: int, epoch: int, seed: int) -> list[tuple[list[int], str]]:
    """What the usual wrong recipes give this rank, each with the hint naming it (weights as given, and in float64)."""
    per_rank = math.ceil(n / W)
    total = W * per_rank
    found = []
    for w in (weights, weights.double()):
        full = _draw(w, total, seed + epoch)
        padded = _draw(w, n, seed + epoch)
        padded += padded[:total - n]
        found += [
            (_draw(w, per_rank, seed + epoch + rank), _SEED_RANK),
            (_draw(w, total, seed + epoch + rank)[rank::W], _SEED_RANK),
            (_draw(w, per_rank, seed + epoch), _SAME_DRAW),
            (_draw(w, total, seed)[rank::W], _NO_EPOCH),
            (_draw(w, total, None)[rank::W], _UNSEEDED),
            (full, _WHOLE), (full[:n], _WHOLE), (_draw(w, n, seed + epoch), _WHOLE),
            (full[rank * per_rank:(rank + 1) * per_rank], _BLOCKS),
            (_draw(w, W * (n // W), seed + epoch)[rank::W], _FLOOR), (_draw(w, n, seed + epoch)[rank::W], _FLOOR),
            (padded[rank::W], _PADDED)]
    return found


_SEED_RANK = ("Every rank seeds its generator with seed + epoch, the same number on every rank: with seed + epoch + "
              "rank the ranks make different draws, and rank 1's epoch 0 is rank 0's epoch 1.")
_SAME_DRAW = ("Every rank drew the same ceil(num_samples / world_size) indices, so the ranks train on one sample "
              "world_size times. Draw the whole total = world_size * ceil(num_samples / world_size) once, then keep "
              "draws rank, rank + world_size, ...")
_NO_EPOCH = "The draw must change from epoch to epoch: seed the generator with seed + epoch."
_UNSEEDED = ("A new torch.Generator() starts from its own fixed default seed, whatever torch.manual_seed did: seed "
             "the generator itself, g = torch.Generator().manual_seed(seed + epoch).")
_WHOLE = "Each rank keeps only its share of the draw: every world_size-th index, starting at its rank."
_BLOCKS = ("Deal the draw out like DistributedSampler: rank r keeps draws r, r + world_size, r + 2·world_size, "
           "..., not one contiguous block.")
_FLOOR = ("Every rank draws the same number, ceil(num_samples / world_size): the whole draw holds "
          "world_size * ceil(num_samples / world_size) indices, not num_samples or fewer.")
_PADDED = ("Draw the whole total = world_size * ceil(num_samples / world_size) at once: padding a draw of num_samples "
           "with its first indices, as DistributedSampler pads a dataset, is not the same draw.")
_NEUTRAL = ("Draw with torch.multinomial(weights, total, replacement=True, generator=g), g seeded with seed + epoch, "
            "then keep draws rank, rank + world_size, ...")


def _diagnose(attempt: Attempt, got: list[int], weights: torch.Tensor, n: int, W: int, rank: int, epoch: int,
              seed: int) -> str:
    """The hint of the one wrong recipe the answer fits; where several fit this rank, the learner's function is
    probed on the other ranks too (ch00_01._singled_out's rule); the neutral hint where none or several remain."""
    hints = {hint for answer, hint in _slips(weights, n, W, rank, epoch, seed) if answer == got}
    if len(hints) > 1:
        for other in range(W):
            if other == rank:
                continue
            try:
                with torch.random.fork_rng(devices=[]):
                    answer = as_numbers(attempt.fn(weights.clone(), n, W, other, epoch, seed))
            except Exception:  # noqa: BLE001 - a probe that raises is no evidence
                return _NEUTRAL
            hints &= {hint for recipe, hint in _slips(weights, n, W, other, epoch, seed) if recipe == answer}
    if len(hints) == 1:
        return hints.pop()
    per_rank = math.ceil(n / W)
    if not hints and len(got) != per_rank:
        return (f"Every rank draws the same number, ceil(num_samples / world_size) = {per_rank}: the whole draw holds "
                f"world_size * ceil(num_samples / world_size) = {W * per_rank} indices.")
    return _NEUTRAL


def _case(attempt: Attempt, weights: torch.Tensor, num_samples: int, W: int, rank: int, epoch: int,
          seed: int) -> None:
    what = (f"weights {show(weights, 60)}, num_samples={num_samples}, world_size={W}, rank={rank}, epoch={epoch}, "
            f"seed={seed}")
    before_w, before_rng = weights.clone(), torch.get_rng_state()
    got = attempt.call(what, weights, num_samples, W, rank, epoch, seed)
    if not torch.equal(weights, before_w) or weights.dtype != before_w.dtype:
        raise Fail("your function changed the `weights` tensor it was given (the sampler uses it again next epoch).",
                   "Leave the input alone: work on a copy, or on a new tensor.")
    moved = not torch.equal(torch.get_rng_state(), before_rng)
    torch.set_rng_state(before_rng)
    if isinstance(got, (list, tuple)) and got and all(isinstance(i, torch.Tensor) for i in got):
        raise Fail(f"your function returned {kind(got)} of tensors ({show(got)}), not a list of indices (ints).",
                   "`list(tensor)` gives 0-d tensors; `tensor.tolist()` gives ints.")
    listed = as_numbers(list(got) if isinstance(got, range) else got)
    if listed is None or not all(isinstance(i, int) for i in listed):
        raise Fail(f"your function returned {kind(got)} ({show(got)}), not a list of indices.",
                   "Return a list of ints (`.tolist()` turns a tensor into one).")
    if any(not 0 <= i < len(weights) for i in listed) or any(weights[i] == 0 for i in listed):
        raise Fail(f"rank {rank} got {show(listed, 60)}: an index out of range or of weight 0.",
                   "Draw indices of examples, in proportion to the weights.")
    right = listed in _right_answers(weights, num_samples, W, rank, epoch, seed)
    if moved:
        drew = (f"rank {rank}'s indices are right, but your function" if right else
                f"rank {rank} drew {show(listed, 70)}, not its share of the shared draw, and your function")
        raise Fail(f"{drew} changed torch's global random state (it seeded it or drew from it): every rank must make "
                   "the same draw whatever else the script has drawn before, and the script's own random numbers "
                   "must not move.",
                   _diagnose(attempt, listed, weights, num_samples, W, rank, epoch, seed) if not right else
                   "Draw from your own generator: g = torch.Generator().manual_seed(seed + epoch).")
    if right:
        return
    want = _right_answers(weights, num_samples, W, rank, epoch, seed)[0]
    raise Fail(f"rank {rank} drew {show(listed, 70)}; the shared draw gives it {show(want, 70)}.",
               _diagnose(attempt, listed, weights, num_samples, W, rank, epoch, seed))


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
    weights = torch.tensor([1.0, 2.0, 3.0, 4.0])
    got = attempt.call("weights [1, 2, 3, 4], num_samples=10, world_size=2, rank=0, epoch=3, seed not given",
                       weights, 10, 2, 0, 3)
    if as_numbers(got) not in _right_answers(weights, 10, 2, 0, 3, 0):
        raise Fail(f"called without seed, rank 0 drew {show(got, 60)}; seed defaults to 0, so it should draw "
                   f"{show(_right_answers(weights, 10, 2, 0, 3, 0)[0], 60)} (the generator seeded with 0 + epoch).",
                   "Keep the stub's signature: `seed=0`.")
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
