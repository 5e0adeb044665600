"""Several seeds' small networks trained at once (runs over seeds, chapters 3 and 7): one batched matmul per layer.

A claim counted over five seeds trains five tiny MLPs; each step of one is mostly Python and dispatch, not
arithmetic. ``StackedMLP`` holds S independent MLPs (Linear, ReLU, ..., Linear) as (S, ...) tensors, copy s
initialised exactly as the ``nn.Sequential(nn.Linear(i, h), nn.ReLU(), ..., nn.Linear(h, o))`` built right after
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
    """S networks Linear-ReLU-...-Linear of `sizes` (input, hidden..., output), copy s built by the seed seeds[s]."""

    def __init__(self, seeds: Iterable[int], sizes: tuple[int, ...]):
        super().__init__()
        if len(sizes) < 2:
            raise ValueError(f"StackedMLP needs an input and an output size, got {sizes}")
        nets = []
        for seed in seeds:
            torch.manual_seed(seed)
            nets.append(self._sequential(sizes))
        if not nets:
            raise ValueError("StackedMLP needs at least one seed")
        self.sizes = tuple(sizes)
        linears = [[m for m in net if isinstance(m, nn.Linear)] for net in nets]
        self.layers = nn.ParameterList()              # weight (S, in, out), bias (S, 1, out), layer after layer
        for k in range(len(sizes) - 1):
            self.layers.append(torch.stack([ls[k].weight.detach().T for ls in linears]).contiguous())
            self.layers.append(torch.stack([ls[k].bias.detach() for ls in linears])[:, None].contiguous())

    @staticmethod
    def _sequential(sizes: tuple[int, ...]) -> nn.Sequential:
        modules: list[nn.Module] = []
        for k in range(len(sizes) - 1):
            modules += [nn.Linear(sizes[k], sizes[k + 1])] + ([nn.ReLU()] if k < len(sizes) - 2 else [])
        return nn.Sequential(*modules)

    @property
    def copies(self) -> int:
        return self.layers[0].shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(S, B, input) -> (S, B, output): copy s applied to batch s."""
        count = len(self.layers) // 2
        for k in range(count):
            x = torch.baddbmm(self.layers[2 * k + 1], x, self.layers[2 * k])
            if k < count - 1:
                x = torch.relu(x)
        return x

    def copy(self, index: int) -> nn.Sequential:
        """Copy `index` as the nn.Sequential it stands for (its current weights)."""
        net = self._sequential(self.sizes)
        with torch.no_grad():
            for k, linear in enumerate(m for m in net if isinstance(m, nn.Linear)):
                linear.weight.copy_(self.layers[2 * k][index].T)
                linear.bias.copy_(self.layers[2 * k + 1][index, 0])
        return net


def per_copy_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Sum over copies of each copy's mean cross-entropy: logits (S, B, C), labels (S, B)."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none").view(labels.shape).mean(1).sum()
