"""Several seeds' small networks trained at once (chapter 3's runs over seeds): one batched matmul per layer.

A claim counted over five seeds trains five tiny MLPs; each step of one is mostly Python and dispatch, not
arithmetic. ``StackedMLP`` holds S independent Linear-ReLU-Linear networks as (S, ...) tensors, copy s initialised
exactly as ``nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))`` built right after
``torch.manual_seed(seeds[s])``. Its input is (S, B, i), one batch per copy; ``per_copy_loss`` sums each copy's own
mean loss, so each copy's gradient is the gradient of its own loss alone (the copies share no parameter). An
elementwise optimizer (SGD, momentum, Adam) on the stacked tensors is then that optimizer on each copy: the runs
are the separate runs, to the last bits a batched matmul sums in another order
(tests/test_seed_stack.py trains both ways and compares).
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn


class StackedMLP(nn.Module):
    def __init__(self, seeds: Iterable[int], sizes: tuple[int, int, int]):
        super().__init__()
        nets = []
        for seed in seeds:
            torch.manual_seed(seed)
            nets.append(nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2])))
        if not nets:
            raise ValueError("StackedMLP needs at least one seed")
        self.w1 = nn.Parameter(torch.stack([n[0].weight.detach().T for n in nets]).contiguous())    # (S, i, h)
        self.b1 = nn.Parameter(torch.stack([n[0].bias.detach() for n in nets])[:, None].contiguous())  # (S, 1, h)
        self.w2 = nn.Parameter(torch.stack([n[2].weight.detach().T for n in nets]).contiguous())    # (S, h, o)
        self.b2 = nn.Parameter(torch.stack([n[2].bias.detach() for n in nets])[:, None].contiguous())  # (S, 1, o)

    @property
    def copies(self) -> int:
        return self.w1.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(S, B, i) -> (S, B, o): copy s applied to batch s."""
        return torch.baddbmm(self.b2, torch.relu(torch.baddbmm(self.b1, x, self.w1)), self.w2)

    def copy(self, index: int) -> nn.Sequential:
        """Copy `index` as the nn.Sequential it stands for (its current weights)."""
        net = nn.Sequential(nn.Linear(self.w1.shape[1], self.w1.shape[2]), nn.ReLU(),
                            nn.Linear(self.w2.shape[1], self.w2.shape[2]))
        with torch.no_grad():
            net[0].weight.copy_(self.w1[index].T)
            net[0].bias.copy_(self.b1[index, 0])
            net[2].weight.copy_(self.w2[index].T)
            net[2].bias.copy_(self.b2[index, 0])
        return net


def per_copy_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Sum over copies of each copy's mean cross-entropy: logits (S, B, C), labels (S, B)."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none").view(labels.shape).mean(1).sum()
