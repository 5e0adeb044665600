"""Chapter 7: weights *stored* in bf16 stop moving where an update is smaller than the spacing of bf16 numbers.

bf16 keeps 8 significant bits: next to 1.0 its numbers are 0.0078 apart above and 0.0039 below, so a weight at 1.0
(every LayerNorm or RMSNorm weight at the start) changes only by an update above about 0.002; anything smaller
rounds back to exactly 1.0. Adam moves each weight by about the learning rate per update, so at a fine-tuning
rate of 1e-4 the norm weights never move, while weights near 0 (where bf16's spacing is fine) do. Under autocast
the weights stay float32 (a master copy) and every update lands. Measured on a small Linear-LayerNorm-ReLU-Linear
model trained with AdamW on the CPU.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Moved:
    """After training: how many weights of each kind differ from where they started."""

    norm: int            # LayerNorm weights that left 1.0
    norm_total: int
    linear: int          # Linear weights (both layers) that changed
    linear_total: int
    first_loss: float
    last_loss: float


def train_moved(seed: int, lr: float = 1e-4, stored: torch.dtype = torch.bfloat16, updates: int = 50) -> Moved:
    """AdamW for `updates` full-batch updates; weights stored in `stored` (bf16: model.to(bf16); float32: bf16
    autocast around the forward, as mixed precision runs it)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 16, generator=g)
    y = (x[:, :4] @ torch.randn(4, 4, generator=g)).argmax(1)       # labels a linear teacher gives
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.ReLU(), nn.Linear(64, 4)).to(stored)
    start = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if stored == torch.float32 else contextlib.nullcontext()
    losses = []
    for _ in range(updates):
        optimizer.zero_grad()
        with autocast:
            loss = F.cross_entropy(model(x.to(stored)).float(), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    moved = [int((p.detach() != s).sum()) for p, s in zip(model.parameters(), start)]
    norm = model[1].weight
    return Moved(int((norm.detach() != 1).sum()), norm.numel(), moved[0] + moved[4], start[0].numel() + start[4].numel(),
                 losses[0], losses[-1])


def spacing_lines() -> list[str]:
    """bf16's and fp16's spacing next to 1.0, and an update of 1e-4 applied to a weight at 1.0 in each dtype."""
    lines = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        one = torch.tensor(1.0, dtype=dtype)
        below = torch.nextafter(one, torch.tensor(0.0, dtype=dtype)).item()
        lines.append(f"{str(dtype).replace('torch.', ''):9} next to 1.0: {below:.8g} below, "
                     f"{torch.nextafter(one, torch.tensor(2.0, dtype=dtype)).item():.8g} above; "
                     f"1.0 - 1e-4 stored as {(one - 1e-4).item():.8g}")
    return lines


def bf16_weight_lines(seeds=SEEDS, updates: int = 50) -> list[str]:
    """Chapter 7's cell: counted over `seeds`, which weights moved, by storage dtype and learning rate."""
    lines = spacing_lines()
    runs = {}
    for stored, lrs in ((torch.bfloat16, (1e-4, 1e-3, 1e-2)), (torch.float32, (1e-4,))):
        for lr in lrs:
            runs[stored, lr] = rs = [train_moved(s, lr, stored, updates) for s in seeds]
            what = "weights in bf16,              " if stored == torch.bfloat16 else "float32 weights, bf16 autocast,"
            lines.append(f"{what} AdamW lr {lr:g}: LayerNorm weights moved: "
                         f"{_band([r.norm / r.norm_total for r in rs])}; Linear weights moved: "
                         f"{_band([r.linear / r.linear_total for r in rs])}")
    fell = sum(m.first_loss - m.last_loss > 2 * (b.first_loss - b.last_loss)
               for m, b in zip(runs[torch.float32, 1e-4], runs[torch.bfloat16, 1e-4]))
    lines.append(f"lr 1e-4, {updates} updates: the loss fell more than twice as far with float32 weights as with bf16 "
                 f"weights on {fell} of {len(seeds)} seeds")
    return lines


def _band(shares: list[float]) -> str:
    """A coarse, host-independent reading of the share of weights that moved on every seed."""
    if all(s == 1 for s in shares):
        return "all, on every seed"
    if all(s == 0 for s in shares):
        return "none, on every seed"
    for low, words in ((0.9, "more than 90%"), (0.5, "more than half"), (0.1, "more than 10%")):
        if all(s > low for s in shares):
            return f"{words}, on every seed"
    return "under 10% on some seed"
