"""Chapter 4: which way dropout moves a loss. torch's dropout scales the kept values by 1/(1 - p) while training,
so evaluation passes values through unchanged; is the eval-mode loss then higher or lower than the train-mode one?

With the dropout straight before the last Linear layer, the eval-mode logits are exactly the average of the
train-mode logits over all masks, and cross-entropy is convex in the logits, so the eval-mode loss is at most the
train-mode loss averaged over masks (Jensen's inequality). With a dropout deeper in (before another ReLU) no such
bound holds in general; it is measured here instead, on the same batches and weights."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.infra.parallel import map_runs

MASKS = 100        # train-mode passes averaged per measurement


@dataclass(frozen=True)
class DropoutGap:
    """One seed's model, measured on the same 300 training examples in both modes (chapter 4)."""

    zeroed: float                     # fraction of the first dropout's outputs that are 0, over the masks
    kept_scale: float                 # a kept value divided by its input (1 / (1 - p))
    eval_loss: tuple[float, float]    # eval-mode loss at initialisation, after training
    train_loss: tuple[float, float]   # train-mode loss averaged over MASKS masks, the same two moments


def dropout_gap(seed: int, p: float = 0.7, depth: int = 1, updates: int = 200) -> DropoutGap:
    """The spiral MLP with `depth` hidden layers, each followed by Dropout(p), measured before and after training."""
    data = spiral_splits(300, 300, seed=seed).train
    x, y = data.tensors
    torch.manual_seed(seed)
    model = MLP(hidden=64, depth=depth, dropout=p)
    drop = next(m for m in model.modules() if isinstance(m, nn.Dropout))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def losses() -> tuple[float, float]:
        with torch.no_grad():
            model.eval()
            evaluated = F.cross_entropy(model(x), y).item()
            model.train()
            trained = sum(F.cross_entropy(model(x), y).item() for _ in range(MASKS)) / MASKS
        return evaluated, trained

    start = losses()
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(updates):
        idx = torch.randint(len(x), (32,), generator=g)
        optimizer.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        optimizer.step()
    end = losses()

    with torch.no_grad():
        h = torch.ones(1000, 64)
        out = torch.stack([drop(h) for _ in range(MASKS)])
    kept = out[out != 0]
    return DropoutGap((out == 0).float().mean().item(), kept.mean().item(), (start[0], end[0]), (start[1], end[1]))


def dropout_gap_lines(p: float = 0.7, seeds=range(5), updates: int = 200) -> list[str]:
    """Chapter 4's cell: dropout's scale, and the eval-mode loss against the train-mode loss, counted over seeds."""
    n = len(seeds)
    runs = map_runs(dropout_gap, [(s, p, depth, updates) for depth in (1, 2) for s in seeds])
    straight, deeper = runs[:n], runs[n:]
    first = straight[0]
    lines = [f"Dropout(p={p}) in train mode: {first.zeroed:.2f} of the values zeroed, each kept one multiplied by "
             f"{first.kept_scale:.3f} = 1/(1 - {p}); in eval mode every value passes unchanged"]

    def below(rs, moment):
        return sum(r.eval_loss[moment] < r.train_loss[moment] for r in rs)

    def above(rs, factor):
        return sum(r.train_loss[1] > factor * r.eval_loss[1] for r in rs)

    for name, rs in (("dropout straight before the last Linear", straight),
                     ("dropout after each of two hidden layers", deeper)):
        lines.append(f"{name}: eval-mode loss below the train-mode loss (mean of {MASKS} masks), same batch and "
                     f"weights: at initialisation {below(rs, 0)} of {n} seeds, after {updates} updates "
                     f"{below(rs, 1)} of {n}")
    lines.append(f"after {updates} updates, train-mode loss more than 1.1 times the eval-mode loss: "
                 f"{above(straight, 1.1)} of {n} seeds (one dropout), {above(deeper, 1.1)} of {n} (two); more than 3 times: "
                 f"{above(straight + deeper, 3)} of {2 * n}")
    return lines
