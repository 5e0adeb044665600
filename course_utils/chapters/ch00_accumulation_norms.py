"""Chapter 0: when an accumulated window equals one big batch. Exactly for layers that treat each example on its
own; not with BatchNorm (each micro-batch is normalised with its own statistics); with dropout only on average
(the masks differ)."""
from __future__ import annotations

import torch
from torch import nn

NORMS = ("none", "batchnorm", "layernorm", "groupnorm", "dropout")


def norm_mlp(norm: str, hidden: int = 16) -> nn.Sequential:
    """Linear(2, h) -> [norm] -> ReLU -> Linear(h, 3), in float64, for one of NORMS (chapter 0)."""
    layer = {"none": nn.Identity(), "batchnorm": nn.BatchNorm1d(hidden), "layernorm": nn.LayerNorm(hidden),
             "groupnorm": nn.GroupNorm(4, hidden), "dropout": nn.Dropout(0.5)}[norm]
    return nn.Sequential(nn.Linear(2, hidden), layer, nn.ReLU(), nn.Linear(hidden, 3)).double()


def _gradient(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, micro: int) -> torch.Tensor:
    """All parameters' gradient, the batch split into `micro` equal micro-batches, each mean loss weighted 1/micro."""
    model.zero_grad()
    for x, y in zip(inputs.chunk(micro), targets.chunk(micro)):
        (nn.functional.cross_entropy(model(x), y) / micro).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def accumulation_gap(norm: str, seed: int, n: int = 32, micro: int = 2) -> float:
    """Largest |accumulated - one big batch| over all gradients, relative to the big batch's largest (chapter 0)."""
    g = torch.Generator().manual_seed(seed)
    inputs, targets = torch.randn(n, 2, generator=g, dtype=torch.double), torch.randint(0, 3, (n,), generator=g)
    torch.manual_seed(seed)
    model = norm_mlp(norm).train()
    big = _gradient(model, inputs, targets, 1)
    window = _gradient(model, inputs, targets, micro)
    return float((window - big).abs().max() / big.abs().max())


def dropout_average_gap(seed: int, draws: int, n: int = 32, micro: int = 2) -> float:
    """The same gap with dropout, each side averaged over `draws` fresh masks: how far apart on average (chapter 0)."""
    g = torch.Generator().manual_seed(seed)
    inputs, targets = torch.randn(n, 2, generator=g, dtype=torch.double), torch.randint(0, 3, (n,), generator=g)
    torch.manual_seed(seed)
    model = norm_mlp("dropout").train()
    big = torch.stack([_gradient(model, inputs, targets, 1) for _ in range(draws)]).mean(0)
    window = torch.stack([_gradient(model, inputs, targets, micro) for _ in range(draws)]).mean(0)
    return float((window - big).abs().max() / big.abs().max())
