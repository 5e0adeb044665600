"""Which generator decides a loader's order, and which calls draw from torch's global stream (chapter 1).

Two counts a learner can check by hand. First, a ``RandomSampler`` and a ``DataLoader`` given a seeded generator
``G`` in the three ways people write it; each order is matched with the draws that make it (a permutation from
``G``; from a generator seeded by one draw of the global stream; from ``G`` after the iterator's own draw).
Second, an audit: ``torch.manual_seed(0)``, one call, and whether torch's global state moved, counted in 64-bit
draws where it moved by whole ones.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import DataLoader, RandomSampler, random_split

MAX_DRAWS = 4


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _draw(generator: torch.Generator | None = None) -> int:
    """One 64-bit draw, the kind the loader's iterator and an unseeded RandomSampler make."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _order(data: list[int], seed: int, **loader_args) -> list[int]:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return [int(x) for x in DataLoader(data, batch_size=None, **loader_args)]


def sampler_orders(n: int = 5, seed: int = 1) -> list[tuple[str, list[int], str, bool]]:
    """(how G is given, the order the loader yields, the draws that explain it, whether they give that order) for
    G passed to the sampler, to the loader, and to both; the global stream seeded with the same `seed`."""
    data = list(range(n))
    to_sampler = _order(data, seed, sampler=RandomSampler(data, generator=_seeded(seed)))
    to_loader = _order(data, seed, sampler=RandomSampler(data), generator=_seeded(seed))
    shared = _seeded(seed)
    to_both = _order(data, seed, sampler=RandomSampler(data, generator=shared), generator=shared)

    with torch.random.fork_rng():
        torch.manual_seed(seed)                         # the iterator's base seed comes from G: the sampler's
        from_global = torch.randperm(n, generator=_seeded(_draw())).tolist()     # seed is the global first draw
    after_one = _seeded(seed)
    _draw(after_one)                                    # the iterator's base seed, from G
    return [
        ("RandomSampler(data, generator=G)", to_sampler, "torch.randperm(n, generator=G)",
         to_sampler == torch.randperm(n, generator=_seeded(seed)).tolist()),
        ("RandomSampler(data), DataLoader(generator=G)", to_loader,
         "randperm seeded by the global stream's first draw", to_loader == from_global),
        ("RandomSampler(data, generator=G), DataLoader(generator=G)", to_both,
         "randperm from G after the iterator's draw from G", to_both == torch.randperm(n, generator=after_one).tolist()),
    ]


def global_draws(call: Callable[[], object]) -> int | None | str:
    """How far `call` moves torch's global stream after torch.manual_seed(0): 0, a whole number of 64-bit draws,
    or "moved" when it moved by something else (a float fill, say)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        call()
        after = torch.get_rng_state()
        torch.manual_seed(0)
        for count in range(MAX_DRAWS + 1):
            if torch.equal(after, torch.get_rng_state()):
                return count
            _draw()
    return "moved"


def _second_iter_persistent(data: list[int]):
    """A loader with one persistent (forked) worker, iterated once already: the call makes its second iter()."""
    loader = DataLoader(data, num_workers=1, persistent_workers=True, multiprocessing_context="fork")
    with torch.random.fork_rng():              # the first iter()'s draw leaves the caller's stream alone
        list(loader)
    return lambda: iter(loader)


def audit_calls(n: int = 5) -> dict[str, tuple[Callable[[], object], bool]]:
    """The calls the audit runs, each as it would appear in a script, and whether its count of draws is part of
    the lesson (the loader's) or a kernel's detail that is left unprinted (a permutation's, a fill's)."""
    data = list(range(n))
    dropout = torch.nn.Dropout(0.5)
    return {
        "DataLoader(data, shuffle=True), built": (lambda: DataLoader(data, shuffle=True), True),
        "RandomSampler(data), built": (lambda: RandomSampler(data), True),
        "iter(DataLoader(data)): no shuffle, no worker": (lambda: iter(DataLoader(data)), True),
        "iter(DataLoader(data, shuffle=True))": (lambda: iter(DataLoader(data, shuffle=True)), True),
        "next(iter(DataLoader(data, shuffle=True)))": (lambda: next(iter(DataLoader(data, shuffle=True))), True),
        "next(iter(DataLoader(data, shuffle=True, generator=G)))":
            (lambda: next(iter(DataLoader(data, shuffle=True, generator=_seeded(1)))), True),
        "a second iter(), unshuffled persistent_workers loader": (_second_iter_persistent(data), True),
        "random_split(data, [3, 2])": (lambda: random_split(data, [3, 2]), False),
        "random_split(data, [3, 2], generator=G)": (lambda: random_split(data, [3, 2], generator=_seeded(1)), False),
        "nn.Linear(4, 4), built": (lambda: torch.nn.Linear(4, 4), False),
        "nn.Conv2d(1, 2, 3) and nn.Embedding(10, 4), built":
            (lambda: (torch.nn.Conv2d(1, 2, 3), torch.nn.Embedding(10, 4)), False),
        "nn.BatchNorm1d(4) and nn.ReLU(), built": (lambda: (torch.nn.BatchNorm1d(4), torch.nn.ReLU()), False),
        "Dropout, training mode": (lambda: dropout.train()(torch.ones(4)), False),
        "Dropout, eval mode": (lambda: dropout.eval()(torch.ones(4)), False),
    }


def random_draw_lines(n: int = 5, seed: int = 1) -> list[str]:
    """Both counts as chapter 1 prints them."""
    lines = [f"torch.manual_seed({seed}), G = torch.Generator().manual_seed({seed}), data = range({n}):"]
    for how, order, draws, agree in sampler_orders(n, seed):
        lines.append(f"  {how:58} {order}  = {draws}: {agree}")
    lines.append("torch.manual_seed(0), then one call: does torch's global stream move?")
    for name, (call, counted) in audit_calls(n).items():
        moved = global_draws(call)
        said = "no" if moved == 0 else "yes" if moved == "moved" or not counted else \
            f"yes, {moved} draw{'s' if moved > 1 else ''} of 64 bits"
        lines.append(f"  {name:58} {said}")
    return lines
