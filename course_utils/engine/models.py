"""Models of the course: the spiral MLP (chapters 4-8), the chapter-3 tiny linear model, the optimizers."""
from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


class MLP(nn.Module):
    """A multi-layer perceptron with optional BatchNorm and Dropout (chapters 4-8).

    `depth` hidden layers, each Linear -> [BatchNorm1d] -> ReLU -> [Dropout], held in `body`;
    then a Linear `head` to the class scores (logits).
    """

    def __init__(self, in_features: int = 2, hidden: int = 64, out_features: int = 3, depth: int = 2,
                 dropout: float = 0.0, batchnorm: bool = False):
        super().__init__()
        for name, value, minimum in [("in_features", in_features, 1), ("hidden", hidden, 1),
                                     ("out_features", out_features, 1), ("depth", depth, 0)]:
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        if not (0.0 <= dropout < 1.0):
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth):
            layers.append(nn.Linear(width, hidden))
            if batchnorm:
                layers.append(nn.BatchNorm1d(hidden))
            layers.append(nn.ReLU())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class TinyLinear(nn.Linear):
    """Chapter 3's hand-calculation model: Linear(2, 2) with W = [[0.5, -0.3], [0.2, 0.8]] and b = [0, 0]."""

    def __init__(self):
        super().__init__(2, 2)
        with torch.no_grad():
            self.weight.copy_(torch.tensor([[0.5, -0.3], [0.2, 0.8]]))
            self.bias.zero_()


def make_optimizer(name: str, parameters: Iterable[torch.Tensor], *, lr: float, momentum: float = 0.9,
                   weight_decay: float | None = None, fused: bool | None = None) -> torch.optim.Optimizer:
    """SGD, SGD with momentum, Adam or AdamW by name (chapters 5, 6, 8).

    weight_decay=None keeps torch's own default: 0 for SGD and Adam, 0.01 for AdamW (so "adamw" is
    not a second name for "adam"). fused=True: torch's fused kernels (one per step for all parameters; they
    take a ``found_inf`` flag and skip on the device, as the production trainer's guard uses them).
    """
    if weight_decay is None:
        weight_decay = 0.01 if name == "adamw" else 0.0
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=lr, weight_decay=weight_decay, fused=fused)
    if name == "momentum":
        return torch.optim.SGD(parameters, lr=lr, momentum=momentum, weight_decay=weight_decay,
                               fused=fused)
    if name == "adam":
        return torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay, fused=fused)
    if name == "adamw":
        return torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, fused=fused)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
