"""What every corpus loop starts from: small spiral splits, a model, an optimizer, loaders, a fixed RNG."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP


@dataclass
class Setup:
    """The objects a learner's script has built before its loop starts."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: object | None
    train_loader: DataLoader
    val_loader: DataLoader
    loss_fn: nn.Module
    epochs: int


def make_setup(*, n_train: int = 96, n_val: int = 48, batch_size: int = 16, epochs: int = 2, hidden: int = 16,
               dropout: float = 0.0, batchnorm: bool = False, optimizer: str = "sgd", lr: float = 0.05,
               scheduler: Callable | None = None, leak: float = 0.0, softmax_head: bool = False,
               seed: int = 0) -> Setup:
    """Build a fresh, seeded setup; the global RNG is seeded last, so dropout masks repeat run to run."""
    splits = spiral_splits(n_train, n_val, seed=seed, leak=leak)
    torch.manual_seed(seed)
    model = MLP(2, hidden, 3, 2, dropout, batchnorm)
    if softmax_head:
        model = nn.Sequential(model, nn.Softmax(dim=1))
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    elif optimizer == "momentum":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    elif optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr / 10)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr / 10)
    train_loader = DataLoader(splits.train, batch_size=batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(seed))
    val_loader = DataLoader(splits.val, batch_size=batch_size)
    sched = scheduler(opt, len(train_loader), epochs) if scheduler else None
    torch.manual_seed(seed + 1)
    return Setup(model, opt, sched, train_loader, val_loader, nn.CrossEntropyLoss(), epochs)


def regression_setup(seed: int = 0) -> Setup:
    """Seed 003's house-price flavour: three features, a linear target with noise, MSE, an 80/20 split."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(100, 3, generator=g)
    y = x @ torch.tensor([0.5, 0.3, -0.2]) + 0.1 * torch.randn(100, generator=g)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train = DataLoader(TensorDataset(x[:80], y[:80, None]), batch_size=16, shuffle=True,
                       generator=torch.Generator().manual_seed(seed))
    val = DataLoader(TensorDataset(x[80:], y[80:, None]), batch_size=16)
    torch.manual_seed(seed + 1)
    return Setup(model, opt, None, train, val, nn.MSELoss(), 3)


def share(loader, i: int, k: int, n: int, by_k: bool = False) -> float:
    """Chapter 0's weight of micro-batch i (n examples) in windows of k: its share of the window's examples
    (by_k: 1/k, the rule the articles print, wrong for the epoch's short last window)."""
    if by_k:
        return 1 / k
    start = (i - i % k) * loader.batch_size
    return n / min(k * loader.batch_size, len(loader.dataset) - start)
