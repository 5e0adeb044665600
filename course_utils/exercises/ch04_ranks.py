"""Exercise 4.3: a validation metric over W ranks without DistributedSampler's padding copies, checked against
the engine's rule on shards laid out by torch's own DistributedSampler."""
from __future__ import annotations

import math

import torch
from torch.utils.data import DistributedSampler

from course_utils.engine.rank_shards import metric_without_padding
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.search import search
from course_utils.exercises.words import Fail, need_float, need_tuple, number


def _shards(n: int, W: int, seed: int, shuffle: bool, tied: bool):
    """Per-example losses and hits for n examples, dealt to W ranks by a real DistributedSampler."""
    g = torch.Generator().manual_seed(seed)
    losses = torch.rand(n, generator=g, dtype=torch.float64).float() * 3
    if tied:                                    # distinct examples with the same loss (a confident model's zeros)
        losses[::2] = 0.6931472
    hits = torch.rand(n, generator=g) < 0.6
    idx = [torch.tensor(list(DistributedSampler(range(n), num_replicas=W, rank=r, shuffle=shuffle, seed=seed)))
           for r in range(W)]
    return [losses[i].clone() for i in idx], [hits[i].clone() for i in idx]


def _naive(losses, correct, per_rank_means: bool, skip_padding: bool, n: int) -> tuple[float, float]:
    """What the usual wrong recipes return, to name the mistake."""
    W = len(losses)
    keeps = [torch.tensor([r + j * W < n if skip_padding else True for j in range(len(losses[r]))])
             for r in range(W)]
    if per_rank_means:
        parts = [(float(l[k].double().mean()), float(c[k].double().mean())) for l, c, k in zip(losses, correct, keeps)
                 if k.any()]
        return sum(p[0] for p in parts) / len(parts), sum(p[1] for p in parts) / len(parts)
    total = sum(int(k.sum()) for k in keeps)
    return (sum(float(l[k].double().sum()) for l, k in zip(losses, keeps)) / total,
            sum(int(c[k].sum()) for c, k in zip(correct, keeps)) / total)


def _close(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return math.isclose(a[0], b[0], rel_tol=1e-5, abs_tol=1e-7) and math.isclose(a[1], b[1], rel_tol=1e-9, abs_tol=1e-12)


def _case(attempt: Attempt, n: int, W: int, seed: int, shuffle: bool = False, tied: bool = False) -> None:
    losses, correct = _shards(n, W, seed, shuffle, tied)
    per_rank = math.ceil(n / W)
    pad = W * per_rank - n
    what = (f"n={n} examples on world_size={W} ranks ({per_rank} entries each, {pad} of them padding copies"
            f"{', shuffled' if shuffle else ''}{', several examples with the same loss' if tied else ''})")
    before = [t.clone() for t in losses] + [t.clone() for t in correct]
    got = attempt.call(what, losses, correct, n)
    if any(not torch.equal(a, b) or a.dtype != b.dtype for a, b in zip(losses + correct, before)):
        raise Fail("your function changed the tensors it was given.", "Read them; build new tensors for your sums.")
    loss, acc = need_tuple(got, 2, "your function", "mean_loss, accuracy")
    mine = (need_float(loss, "the mean loss you returned is"), need_float(acc, "the accuracy you returned is"))
    want = metric_without_padding(losses, correct, n)
    if _close(mine, want):
        return
    shown = f"(loss {number(mine[0])}, accuracy {number(mine[1])}); over the {n} examples it is " \
            f"(loss {number(want[0])}, accuracy {number(want[1])})"
    if pad and _close(mine, _naive(losses, correct, False, False, n)):
        raise Fail(f"you returned {shown}: you counted the {pad} padding copies too.",
                   "Rank r's j-th entry sits at slot r + j·world_size of the sampler's layout; the slots from n on are "
                   "copies. Leave them out.")
    if any(_close(mine, _naive(losses, correct, True, skip, n)) for skip in (True, False)):
        raise Fail(f"you returned {shown}: that is an average of the ranks' averages.",
                   "Ranks hold different numbers of real examples: add up the losses, the hits and the counts over "
                   "all ranks first, then divide once.")
    raise Fail(f"you returned {shown}.",
               "Keep rank r's entry j exactly when r + j·world_size < n, sum losses and hits over those, divide by "
               "their count.")


def check_rank_metrics(attempt: Attempt) -> str:
    """The oracle: engine.rank_shards.metric_without_padding on shards from torch's DistributedSampler."""
    edge = [(12, 4, 0), (10, 4, 1), (100, 8, 2), (1, 3, 3), (5, 1, 4), (7, 3, 5), (3, 8, 6)]
    for n, W, seed in edge:
        _case(attempt, n, W, seed)
    _case(attempt, 22, 4, 7, shuffle=True)
    _case(attempt, 13, 4, 8, tied=True)
    from hypothesis import strategies as st
    tried = search(st.tuples(st.integers(1, 80), st.integers(1, 9), st.integers(0, 1000), st.booleans()),
                   lambda c: _case(attempt, c[0], c[1], c[2], shuffle=c[3]), examples=40)
    return (f"{len(edge) + 2 + tried} layouts of torch's DistributedSampler: the padding copies left out and every "
            "example counted once (n divisible or not, fewer examples than ranks, one rank, shuffled shards, distinct "
            "examples with equal losses), the tensors left as they were.")


def exercises() -> list[Exercise]:
    """Chapter 4, exercise 4.3."""
    return [Exercise("rank_metrics", "04", "a metric over ranks without the padding copies",
                     "rank_metrics(losses, correct, n) -> (mean_loss, accuracy)", check_rank_metrics, arity=(3,),
                     time_limit=20.0,
                     oracle="engine.rank_shards.metric_without_padding on real DistributedSampler shards")]
