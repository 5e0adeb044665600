"""Exercise 4.3: a validation metric over W ranks without DistributedSampler's padding copies, checked against
the engine's rule on shards laid out by torch's own DistributedSampler."""
from __future__ import annotations

import math

import torch
from torch.utils.data import DistributedSampler

from course_utils.engine.rank_shards import metric_without_padding
from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.search import search
from course_utils.exercises.words import (ACCURACY_HINT, Fail, accuracy_close, float32_rounded, need_float, need_tuple,
                                          pair)


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


def _kept(losses, correct, keeps) -> tuple[float, float, int]:
    """Loss sum, hits and count over the entries each `keeps[r]` (bool mask or index tensor) picks."""
    return (sum(float(l.double()[k].sum()) for l, k in zip(losses, keeps)),
            sum(int(c[k].sum()) for c, k in zip(correct, keeps)), sum(int(c[k].numel()) for c, k in zip(correct, keeps)))


def _slips(losses, correct, n: int) -> list[tuple[tuple[float, float], str, str]]:
    """What the usual wrong recipes return: (loss, accuracy), the words naming the mistake, its hint."""
    W, per_rank = len(losses), len(losses[0])
    slot = [torch.arange(per_rank) * W + r for r in range(W)]
    real = [s < n for s in slot]
    found = []

    def ratio(keeps, divisor: int | None = None) -> tuple[float, float]:
        loss, hits, count = _kept(losses, correct, keeps)
        count = divisor or count
        return (loss / count, hits / count) if count else (math.nan, math.nan)

    means = [(float(l.double()[k].mean()), float(c[k].double().mean())) for l, c, k in zip(losses, correct, real)
             if k.any()]
    if W * per_rank > n:
        found.append((ratio([torch.ones(per_rank, dtype=torch.bool)] * W),
                      f"you counted the {W * per_rank - n} padding copies too",
                      "Rank r's j-th entry sits at slot r + j·world_size of the sampler's layout; the slots from n on "
                      "are copies. Leave them out."))
    found.append(((sum(m[0] for m in means) / len(means), sum(m[1] for m in means) / len(means)),
                  "that is an average of the ranks' averages",
                  "Ranks hold different numbers of real examples: add up the losses, the hits and the counts over "
                  "all ranks first, then divide once."))
    loss_all, hits_all = torch.cat(losses).double(), torch.cat(correct)
    found.append(((float(loss_all[:n].mean()), float(hits_all[:n].double().mean())),
                  "the first n entries rank after rank are not the n examples",
                  "The sampler deals the examples out in turn: rank r holds slots r, r + world_size, ... Rank 0's "
                  "entries are not examples 0, 1, 2, ..."))
    but_last = ratio([torch.arange(per_rank) < per_rank - 1] * W)
    if n % W:
        found.append((but_last, "you left out every rank's last entry, real ones too",
                      f"Only the ranks r with r ≥ n % world_size (here {n % W}) hold a copy in their last entry; the "
                      "ranks below hold a real example there."))
    else:
        found.append((but_last, f"you left out every rank's last entry, but world_size divides n={n}: there is no "
                      "copy at all", "When n % world_size is 0, every entry is a real example."))
    found.append((ratio([s <= n for s in slot]), "you kept slot n too (`<=` where `<` is meant): it is a copy",
                  "The n examples sit at slots 0 .. n − 1; keep rank r's entry j exactly when r + j·world_size < n."))
    if per_rank >= 2:           # (with one entry per rank, index 1 does not exist: no such slip to name)
        found.append((ratio([k.long() for k in real], sum(int(k.sum()) for k in real)),
                      "a mask of 0s and 1s used as an index picks entries 0 and 1, not the real ones",
                      "Make the mask bool (dtype=torch.bool, or `slot < n`), or multiply by it."))
    found.append((ratio(real, W * per_rank), f"you divided by all {W * per_rank} entries, not by the {n} examples",
                  "Divide the sums of the real entries by their count, n."))
    return found


def _close(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return math.isclose(a[0], b[0], rel_tol=1e-5, abs_tol=1e-7) and accuracy_close(a[1], b[1])   # the accuracy rule


_PROBES = [(10, 4, 1), (12, 4, 0), (7, 3, 5), (13, 5, 2), (9, 2, 3)]


def _singled_out(attempt: Attempt, mine: tuple[float, float], losses, correct, n: int) -> tuple[str, str]:
    """(words, hint) of the one wrong recipe the answer fits; where several fit, the learner's function is probed on
    a few more layouts (ch00_01._singled_out's rule); ('', '') where none or several remain."""
    fits = {(words, hint) for value, words, hint in _slips(losses, correct, n) if _close(mine, value)}
    if len({hint for _, hint in fits}) > 1:
        for probe_n, probe_W, seed in _PROBES:
            probe_losses, probe_correct = _shards(probe_n, probe_W, seed, False, False)
            try:
                answer = tuple(float(v) for v in attempt.fn(probe_losses, probe_correct, probe_n))
            except Exception:  # noqa: BLE001 - a probe that raises is no evidence
                fits = set()
                break
            fits = {(w, h) for w, h in fits if any(h == hint and _close(answer, value) for value, _, hint
                                                   in _slips(probe_losses, probe_correct, probe_n))}
    if len({hint for _, hint in fits}) == 1:
        return sorted(fits)[0]
    return "", ""      # no recipe singles out the cause: no hint


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
    loss_pair, acc_pair = pair(mine[0], want[0]), pair(mine[1], want[1])
    shown = (f"(loss {loss_pair[0]}, accuracy {acc_pair[0]}); over the {n} examples it is "
             f"(loss {loss_pair[1]}, accuracy {acc_pair[1]})")
    if math.isclose(mine[0], want[0], rel_tol=1e-5, abs_tol=1e-7) and float32_rounded(mine[1], want[1]):
        raise Fail(f"you returned {shown}: your accuracy is the fraction rounded to float32; the course's rule compares "
                   "accuracies to within 1e-9.", ACCURACY_HINT)
    words, hint = _singled_out(attempt, mine, losses, correct, n)
    raise Fail(f"you returned {shown}" + (f": {words}." if words else "."), hint)


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
