"""Chapter 4: a categorical column at prediction time, with categories the training set never had.

An embedding has one row per index it was built with. The category-to-index map is fitted on the training set
(like normalisation's constants); a category outside it needs an index the map reserves for "unknown", or
nn.Embedding raises IndexError in torch's own words (on the CPU). The reserved row is a vector like any other: with
Adam and no weight decay, as here, it moves only when a training row uses it. Left unused, it keeps its random start,
which is what every unseen category then gets;
mapping the training set's rare categories to it (seen fewer than RARE times) trains it on them.
Data: 40 categories, each with its own effect on y (drawn with mean 0, standard deviation 1), plus 2x and noise;
categories 0-29 in training (category c in 1 + c % 8 rows, so some are rare), 30-39 only at prediction. A model of
one embedding value per index plus a linear term in x, Adam, 120 full-batch steps, seeds 0 to 4.
"""
from __future__ import annotations

import torch
from torch import nn

SEEN, NEW, RARE = 30, 10, 3


def _data(seed: int) -> tuple[torch.Tensor, ...]:
    """Training rows (categories 0-29, category c repeated 1 + c % 8 times, so some are rare) and new rows
    (categories 30-39, 4 each), with their effects."""
    g = torch.Generator().manual_seed(seed)
    effect = torch.randn(SEEN + NEW, generator=g)
    ids = torch.cat([torch.full((1 + c % 8,), c) for c in range(SEEN)])
    new_ids = torch.arange(SEEN, SEEN + NEW).repeat_interleave(4)

    def rows(cats):
        x = torch.randn(len(cats), generator=g)
        return cats, x, effect[cats] + 2 * x + 0.1 * torch.randn(len(cats), generator=g)
    return (*rows(ids), *rows(new_ids))


class Model(nn.Module):
    def __init__(self, rows: int):
        super().__init__()
        self.embedding = nn.Embedding(rows, 1)
        self.linear = nn.Linear(1, 1)

    def forward(self, index, x):
        return self.embedding(index)[:, 0] + self.linear(x[:, None])[:, 0]


def fit(seed: int, rare_to_unknown: bool, steps: int = 120, decay: float = 0.0) -> dict[str, float]:
    """Index 0 is 'unknown'; seen categories get 1 + their rank. Adam, or AdamW at weight decay `decay`. Returns the
    unknown row's move (and whether it ended nearer 0) and the error on new rows (all mapped to 0)."""
    ids, x, y, new_ids, new_x, new_y = _data(seed)
    counts = torch.bincount(ids, minlength=SEEN)
    index = ids + 1
    if rare_to_unknown:
        index = torch.where(counts[ids] < RARE, torch.zeros_like(index), index)
    torch.manual_seed(seed)
    model = Model(SEEN + 1)
    start = model.embedding.weight[0].detach().clone()
    optimizer = (torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=decay) if decay
                 else torch.optim.Adam(model.parameters(), lr=0.1))
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(index, x), y).backward()
        optimizer.step()
    with torch.no_grad():
        error = nn.functional.mse_loss(model(torch.zeros_like(new_ids), new_x), new_y).item()
    end = model.embedding.weight[0].detach()
    return {"moved": not torch.equal(end, start), "nearer 0": bool(end.abs().sum() < start.abs().sum()),
            "error": error, "rare rows": int((counts[ids] < RARE).sum())}


def unseen_lines(seeds=range(5)) -> list[str]:
    model = Model(SEEN)
    try:
        model(torch.tensor([SEEN]), torch.zeros(1))
        refused = "no error"
    except IndexError as exc:
        refused = f"IndexError: {exc}"
    plain = [fit(s, False) for s in seeds]
    trained = [fit(s, True) for s in seeds]
    decayed = [fit(s, False, decay=0.01) for s in seeds]
    n = len(plain)
    return [f"a vocabulary of the {SEEN} training categories, category {SEEN} at prediction: {refused}",
            f"index 0 reserved for unknown, no training row uses it: the row moved in training on "
            f"{sum(r['moved'] for r in plain)} of {n} seeds (every new category gets its random start)",
            f"the same with AdamW's weight decay (0.01): moved on {sum(r['moved'] for r in decayed)} of {n}, nearer 0 "
            f"on {sum(r['nearer 0'] for r in decayed)} of {n} (decay, not data, moves it)",
            f"training categories seen fewer than {RARE} times mapped to it ({trained[0]['rare rows']} training rows): "
            f"moved on {sum(r['moved'] for r in trained)} of {n}",
            f"error on the new categories' rows lower with the trained unknown row on "
            f"{sum(t['error'] < p['error'] for t, p in zip(trained, plain))} of {n} seeds"]
