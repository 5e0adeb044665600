"""Chapter 4: a trained BatchNorm CNN evaluated one image at a time, with and without ``model.eval()``.

In train mode BatchNorm2d normalises each channel with the statistics of the batch it is given; for a batch of one
image those are that image's own mean and variance over its pixels, so whatever an image says through its overall
level in a channel (brightness, a colour cast, the strength of a feature map) is subtracted away. Every such
forward also moves the running statistics towards that one image. Measured on a small CNN trained on synthetic
8x8 images whose class is carried by the level of one channel."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

SEEDS = (0, 1, 2)


def _images(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Class 0-3: channel c of 4 carries a bright level (class c), plus noise."""
    y = torch.randint(0, 4, (n,), generator=g)
    x = 0.5 * torch.randn(n, 4, 8, 8, generator=g)
    x[torch.arange(n), y] += 1.0
    return x, y


def cnn() -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))


@dataclass(frozen=True)
class SingleImage:
    eval_mode: float            # accuracy, model.eval(), batches of 1
    train_mode_one: float       # accuracy, train mode, batches of 1
    train_mode_full: float      # accuracy, train mode, one batch of the whole test set


def single_image(seed: int, steps: int = 80) -> SingleImage:
    g = torch.Generator().manual_seed(seed)
    x, y = _images(512, g)
    tx, ty = _images(120, g)
    torch.manual_seed(seed)
    model = cnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(x), (32,), generator=g)
        optimizer.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        optimizer.step()

    def accuracy(train: bool, batch: int) -> float:
        model.train(train)
        with torch.no_grad():
            predicted = torch.cat([model(part).argmax(1) for part in tx.split(batch)])
        return (predicted == ty).float().mean().item()

    evaluated = accuracy(False, 1)
    whole = accuracy(True, len(tx))
    return SingleImage(evaluated, accuracy(True, 1), whole)


def single_image_lines(seeds=SEEDS) -> list[str]:
    runs = [single_image(s) for s in seeds]
    n = len(runs)
    return [f"small BatchNorm CNN trained on 4 classes (chance 0.25), test images evaluated three ways, {n} seeds:",
            f"  model.eval():               accuracy above 0.9 on {sum(r.eval_mode > 0.9 for r in runs)} of {n}",
            f"  train mode, batches of 1:   accuracy below 0.5 on {sum(r.train_mode_one < 0.5 for r in runs)} of {n}",
            f"  train mode, one batch of 120: accuracy above 0.9 on "
            f"{sum(r.train_mode_full > 0.9 for r in runs)} of {n}"]


def ghost_batch_lines(rows: int = 101, virtual: int = 10) -> list[str]:
    """Ghost batch norm: a batch cut into ceil(rows / virtual) chunks, BatchNorm1d (train mode) on each. `chunk`
    fills every chunk but the last, which can be left with one row; `tensor_split` spreads the remainder."""
    x = torch.randn(rows, 4, generator=torch.Generator().manual_seed(0))
    pieces = math.ceil(rows / virtual)
    norm = nn.BatchNorm1d(4)
    lines = []
    for name, parts in (("x.chunk", x.chunk(pieces)), ("torch.tensor_split", torch.tensor_split(x, pieces))):
        sizes = [len(p) for p in parts]
        try:
            for part in parts:
                norm(part)
            outcome = "every chunk normalised"
        except ValueError as error:
            outcome = f"ValueError: {error}"
        lines.append(f"{rows} rows in {pieces} chunks by {name}: sizes {min(sizes)} to {max(sizes)}, last "
                     f"{sizes[-1]}; {outcome}")
    for size in (virtual, 128):
        first = next(n for n in range(2, 40_000) if _lone_last(n, size))
        lines.append(f"virtual batches of {size}: the smallest batch whose chunks end in a lone row has {first:,} rows")
    return lines


def _lone_last(rows: int, virtual: int) -> bool:
    """Does x.chunk(ceil(rows / virtual)) of `rows` rows end in a chunk of one row? (chunk cuts pieces of
    ceil(rows / pieces) rows, which can be fewer than `virtual`.)"""
    return len(torch.arange(rows).chunk(math.ceil(rows / virtual))[-1]) == 1
