"""Chapter 7: three random streams, three seeds. A loop draws from torch's stream (initialisation, shuffling,
dropout), and the code it calls may draw from NumPy's global stream or Python's ``random`` (augmentation
libraries, samplers, a helper a library wrote). A seed set for some of them leaves the others at whatever the
process started with, so two runs differ although "everything was seeded". Measured on a tiny run whose
augmentation uses all three streams, seeding every subset of them."""
from __future__ import annotations

import itertools
import random

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

STREAMS = ("torch", "numpy", "random")


def _augment(x: torch.Tensor) -> torch.Tensor:
    """Noise from torch, a scale from NumPy, a flip decided by Python's random: three libraries' habits."""
    x = x + 0.1 * torch.randn_like(x)
    x = x * float(np.random.uniform(0.9, 1.1))
    return -x if random.random() < 0.5 else x


def tiny_run(seeded: tuple[str, ...], entropy: int) -> list[float]:
    """Seed the streams in `seeded` with 0; the others start from `entropy` (another process, another day)."""
    for name, seed_it in (("torch", torch.manual_seed), ("numpy", np.random.seed), ("random", random.seed)):
        seed_it(0 if name in seeded else entropy)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.ones(16, 4), torch.arange(16) % 2
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(_augment(x)), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def seed_stream_lines() -> list[str]:
    """Chapter 7's cell: two runs (other unseeded starting states) for every subset of seeded streams."""
    state = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    lines = []
    try:
        for k in range(len(STREAMS) + 1):
            for seeded in itertools.combinations(STREAMS, k):
                same = tiny_run(seeded, entropy=1) == tiny_run(seeded, entropy=2)
                lines.append(f"seeded: {' + '.join(seeded) or 'nothing':22} two runs identical: {same}")
    finally:
        torch.set_rng_state(state[0])
        np.random.set_state(state[1])
        random.setstate(state[2])
    return lines
