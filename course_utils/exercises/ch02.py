"""Exercises of chapter 2: a padding collate with its mask, class-balanced weights, a DistributedSampler shard."""
from __future__ import annotations

import math

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DistributedSampler

from course_utils.exercises.core import Attempt, Exercise
from course_utils.exercises.search import search
from course_utils.exercises.words import Fail, as_numbers, kind, need_tensor, need_tuple, number, show


# --- pad_collate -------------------------------------------------------------------------------------------

def _batch(lengths: list[int], seed: int) -> list[tuple[torch.Tensor, int]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(1, 50, (n,), generator=g), int(torch.randint(0, 2, (), generator=g))) for n in lengths]


def _pad_case(attempt: Attempt, lengths: list[int], seed: int, tensor_labels: bool = False) -> None:
    batch = _batch(lengths, seed)
    B, T = len(batch), max(lengths)
    given = [(tokens.clone(), torch.tensor(label) if tensor_labels else label) for tokens, label in batch]
    got = attempt.call(f"a batch of {B} sequence{'s' * (B > 1)} of lengths {lengths}"
                       + (", labels as 0-d int64 tensors (as a Dataset often returns them)" if tensor_labels else ""),
                       given)
    if isinstance(got, dict):
        raise Fail(f"your function returned a dict with keys {show(list(got))}; this exercise asks for the tuple "
                   "(input_ids, mask, labels).", "Unlike the chapter's my_pad_collate, return a tuple: "
                   "`return input_ids, mask, labels`.")
    if isinstance(got, list) and len(got) == 3:
        raise Fail("your function returned a list; the task asks for the tuple (input_ids, mask, labels), as a "
                   "collate function returns it.", "`return input_ids, mask, labels` makes the tuple.")
    ids, mask, labels = need_tuple(got, 3, "your function", "input_ids, mask, labels")
    changed = next((i for i, ((mine, _), (yours, _)) in enumerate(zip(batch, given))
                    if mine.shape != yours.shape or not torch.equal(mine, yours)), None)
    if changed is not None:
        raise Fail(f"after your function, example {changed}'s tokens are {given[changed][0].tolist()}; they were "
                   f"{batch[changed][0].tolist()}: your function changed the examples it was given, which are the "
                   "dataset's own tensors.", "Build the padded batch in a new tensor; leave the examples as they are.")
    ids = need_tensor(ids, "input_ids", shape=(B, T), meaning=f" (batch, longest sequence)")
    if ids.dtype != torch.long:
        need_tensor(ids, "input_ids", dtype=torch.long)
    want_ids = pad_sequence([t for t, _ in batch], batch_first=True, padding_value=0)
    if not torch.equal(ids, want_ids):
        row = next(r for r in range(B) if not torch.equal(ids[r], want_ids[r]))
        n = lengths[row]
        left = torch.equal(ids[row, T - n:], batch[row][0]) and n < T
        if left:
            hint = "Right padding: the real tokens come first, then the 0s."
        elif torch.equal(ids[row, :n], batch[row][0]):
            hint = "The padding value is 0 (the id no real token uses)."
        else:
            hint = "Copy each sequence into the start of its row."
        raise Fail(f"row {row} of input_ids is {ids[row].tolist()}; it should be {want_ids[row].tolist()}.", hint)
    mask = need_tensor(mask, "mask", shape=(B, T))
    if mask.dtype != torch.bool:
        need_tensor(mask, "mask", dtype=torch.bool)
    want_mask = torch.arange(T).expand(B, T) < torch.tensor(lengths).unsqueeze(1)
    if not torch.equal(mask, want_mask):
        inverted = torch.equal(mask, ~want_mask)
        row = next(r for r in range(B) if not torch.equal(mask[r], want_mask[r]))
        raise Fail(f"row {row} of the mask is {mask[row].tolist()}; it should be {want_mask[row].tolist()}"
                   + (" (yours is True on the padding)." if inverted else "."),
                   "The mask is True where a real token is, False on padding.")
    labels = need_tensor(labels, "labels", shape=(B,))
    if labels.dtype != torch.long:
        need_tensor(labels, "labels", dtype=torch.long)
    want_labels = torch.tensor([label for _, label in batch])
    if not torch.equal(labels, want_labels):
        raise Fail(f"labels are {labels.tolist()}; they should be {want_labels.tolist()}, in the batch's order.",
                   "One label per example, in the order of the batch.")


def check_pad_collate(attempt: Attempt) -> str:
    """The oracle: torch's pad_sequence (batch_first, padding 0) and a mask built from the lengths."""
    edge = [([4, 1, 2], 0), ([1], 1), ([4, 4], 2), ([2, 5, 5, 1], 3), ([1, 1, 1], 4)]
    for lengths, seed in edge:
        _pad_case(attempt, lengths, seed)
    _pad_case(attempt, [3, 1, 2], 5, tensor_labels=True)
    from hypothesis import strategies as st
    tried = search(st.tuples(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(0, 1000)),
                   lambda case: _pad_case(attempt, *case), examples=60)
    return (f"{len(edge) + tried + 1} batches agree with torch's pad_sequence and a mask from the lengths: sequences "
            "of length 1, a batch of one, equal lengths, the longest first or last, labels as ints and as tensors.")


# --- class_balanced_weights ---------------------------------------------------------------------------------

def _weights_case(attempt: Attempt, labels: list[int]) -> None:
    absent = sorted(set(range(max(labels) + 1)) - set(labels))
    try:
        got = attempt.call(f"labels {labels}" + (f" (class {absent[0]} absent)" if absent else ""), torch.tensor(labels))
    except Fail as failure:
        if absent and "IndexError" in failure.problem:
            raise Fail(failure.problem, f"Class {absent[0]} has no example here: counts from torch.unique have one "
                                        "entry per class present, so a label cannot index them; torch.bincount "
                                        "keeps a 0 for every absent class.") from None
        raise
    listed = None if isinstance(got, torch.Tensor) else as_numbers(got)
    if listed is not None:          # a list or a NumPy array: WeightedRandomSampler takes those too
        got = torch.tensor(listed, dtype=torch.double)
    n = len(labels)
    counts = torch.bincount(torch.tensor(labels))
    present = [c for c in range(len(counts)) if counts[c] > 0]
    if isinstance(got, torch.Tensor) and got.dim() == 1 and len(got) == len(counts) != n:
        raise Fail(f"your function returned {len(got)} weights, one per class; WeightedRandomSampler needs one "
                   f"weight per example ({n}).", "Give every example the weight of its class.")
    weights = need_tensor(got, "the weights", shape=(n,), meaning=" (one weight per example)").double()
    bad = int((~torch.isfinite(weights)).sum())
    if bad:
        raise Fail(f"{bad} of your {n} weights are NaN or infinite ({show(weights)}): WeightedRandomSampler refuses "
                   "them.", "A count of 0 in a denominator? Only the classes present need a weight.")
    if (weights < 0).any():
        raise Fail(f"{int((weights < 0).sum())} of your {n} weights are negative ({show(weights)}): "
                   "WeightedRandomSampler refuses them.", "A weight is a relative probability: >= 0.")
    if weights.sum() <= 0:
        raise Fail(("your only weight is 0" if n == 1 else f"all your {n} weights are 0") + ": WeightedRandomSampler "
                   "cannot draw anything.",
                   "Each class's examples together should carry the same total weight, more than 0.")
    for c in present:
        mine = weights[torch.tensor(labels) == c]
        if not torch.allclose(mine, mine[0].expand_as(mine), rtol=1e-9):
            raise Fail(f"examples of class {c} get different weights ({show(mine)}).",
                       "An example's weight depends only on its class.")
    shares = {c: float(weights[torch.tensor(labels) == c].sum() / weights.sum()) for c in present}
    even = 1 / len(present)
    worst = max(present, key=lambda c: abs(shares[c] - even))
    if abs(shares[worst] - even) > 1e-6:
        listed = ", ".join(f"class {c}: {number(shares[c])}" for c in present)
        favoured = max(present, key=lambda c: shares[c])
        hint = ("The more examples a class has, the smaller each one's weight must be."
                if counts[favoured] == counts[present].max() else
                "Each class's examples together should carry the same total weight.")
        raise Fail(f"WeightedRandomSampler would draw the classes in shares {listed}; balanced is {number(even)} each "
                   f"(counts: {', '.join(f'class {c}: {int(counts[c])}' for c in present)}).", hint)


def check_class_balanced_weights(attempt: Attempt) -> str:
    """The oracle: the class shares WeightedRandomSampler draws in expectation (weights / their sum), all equal."""
    edge = [[0, 0, 0, 1], [1, 0, 1, 1, 1, 0, 1], [0, 0, 2, 2, 2], [2], [0] * 9 + [1], [1, 2, 0, 2, 1, 2]]
    for labels in edge:
        _weights_case(attempt, labels)
    from hypothesis import strategies as st
    tried = search(st.lists(st.integers(0, 4), min_size=1, max_size=40), lambda lab: _weights_case(attempt, lab),
                   examples=80)
    return (f"{len(edge) + tried} label lists: one weight per example, the same within a class, and every class "
            "drawn equally often by WeightedRandomSampler in expectation (a missing class, one class, one example).")


# --- shard_indices ------------------------------------------------------------------------------------------

def _shard_case(attempt: Attempt, n: int, world_size: int, rank: int) -> None:
    got = attempt.call(f"n={n}, world_size={world_size}, rank={rank}", n, world_size, rank)
    listed = as_numbers(list(got) if isinstance(got, range) else got)
    if listed is None or not all(isinstance(i, int) for i in listed):
        raise Fail(f"your function returned {kind(got)} ({show(got)}), not a list of indices.",
                   "Return a list of whole numbers.")
    want = list(DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False))
    got = listed
    if got == want:
        return
    per_rank = math.ceil(n / world_size)
    wraps = per_rank * world_size - n > n       # more padding than examples: the list is repeated whole, again
    if len(got) != len(want):
        if len(got) > len(want):
            hint = "Each rank gets ceil(n / world_size) indices, no more."
        elif wraps:
            hint = (f"The padding needed ({per_rank * world_size - n}) is more than n ({n}): the sampler repeats "
                    "the whole list from its start as many times as needed, not just its first indices once.")
        else:
            hint = "Every rank gets the same number of indices: the sampler pads by repeating the first indices."
        raise Fail(f"your rank {rank} gets {len(got)} indices {show(got, 60)}; every rank should get {per_rank} "
                   f"(ceil({n} / {world_size})).", hint)
    contiguous = got == list(range(rank * per_rank, min(n, (rank + 1) * per_rank)))
    real = len(range(rank, n, world_size))      # this rank's entries that are real examples; the rest is padding
    dealt = got[:real] == want[:real] and real < len(want)
    hint = ("DistributedSampler deals indices out like cards: rank r takes every world_size-th index, starting at r."
            if not dealt and (contiguous or sorted(got) != got or got[:1] != want[:1]) else
            "The padding repeats the whole list from its start, as many times as needed." if wraps else
            "The padding repeats the dataset's first indices, in order.")
    raise Fail(f"rank {rank} gets {got}; DistributedSampler gives it {want}.", hint)


def check_shard_indices(attempt: Attempt) -> str:
    """The oracle: torch's own DistributedSampler(shuffle=False), rank by rank."""
    edge = [(10, 4, 0), (10, 4, 3), (10, 2, 1), (3, 4, 3), (8, 4, 1), (1, 3, 2), (7, 3, 2)]
    for case in edge:
        _shard_case(attempt, *case)
    from hypothesis import strategies as st
    cases = st.tuples(st.integers(1, 200), st.integers(1, 9)).flatmap(
        lambda nw: st.tuples(st.just(nw[0]), st.just(nw[1]), st.integers(0, nw[1] - 1)))
    tried = search(cases, lambda case: _shard_case(attempt, *case), examples=120)
    return (f"{len(edge) + tried} (n, world_size, rank) cases agree with torch's DistributedSampler: padding by "
            "repeating the first indices, more ranks than examples, n divisible or not.")


def exercises() -> list[Exercise]:
    """Chapter 2."""
    return [
        Exercise("pad_collate", "02", "a padding collate function with its mask",
                 "pad_collate(batch) -> (input_ids LongTensor[B, T], mask BoolTensor[B, T], labels LongTensor[B])",
                 check_pad_collate, arity=(1,), oracle="torch.nn.utils.rnn.pad_sequence and the lengths"),
        Exercise("class_balanced_weights", "02", "per-example weights that balance the classes",
                 "class_balanced_weights(labels: LongTensor[N]) -> Tensor[N]", check_class_balanced_weights,
                 arity=(1,), oracle="WeightedRandomSampler's expected class shares"),
        Exercise("shard_indices", "02", "the indices one rank of DistributedSampler sees",
                 "shard_indices(n, world_size, rank) -> list[int]", check_shard_indices, arity=(3,),
                 oracle="torch.utils.data.DistributedSampler(shuffle=False)"),
    ]
