"""Chapter 3: an optimizer built again starts with no state. Two places learners rebuild one: every epoch, to
set a new learning rate (an old transfer-learning recipe), and right after loading a checkpoint's optimizer
state. The new optimizer holds the same parameters, but its momentum buffers (SGD) or moments and step counts
(Adam) are empty, so the next update is not the one the old optimizer would have made."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def _data(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 4, generator=g)
    return x, x @ torch.randn(4, 1, generator=g)


def sgd_epochs(seed: int, rebuild: bool, epochs: int = 3, steps: int = 10) -> list[float]:
    """SGD(momentum=0.9) with its lr decayed by 0.5 each epoch, either by writing param_groups or by building a new
    SGD; the size of each epoch's first update relative to the last update of the epoch before."""
    x, y = _data(seed)
    torch.manual_seed(seed)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    ratios, last = [], None
    for epoch in range(epochs):
        lr = 0.02 * 0.5 ** epoch
        if rebuild:
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        else:
            for group in opt.param_groups:
                group["lr"] = lr
        for step in range(steps):
            before = model.weight.detach().clone()
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
            size = (model.weight.detach() - before).norm().item()
            if step == 0 and last is not None:
                ratios.append(size / last)
            last = size
    return ratios


def rebuilt_lines(seeds=range(3)) -> list[str]:
    n = len(seeds)
    kept = [sgd_epochs(s, False) for s in seeds]
    rebuilt = [sgd_epochs(s, True) for s in seeds]
    lines = [f"SGD(momentum=0.9), lr halved each epoch; the first update of epochs 2 and 3 against the epoch's last "
             f"before it, {n} seeds:",
             f"  lr written into param_groups: at least 0.3 of it (momentum carried, lr halved) on "
             f"{sum(min(r) >= 0.3 for r in kept)} of {n}",
             f"  a new optim.SGD each epoch: below 0.2 of it (momentum restarted from 0) on "
             f"{sum(max(r) < 0.2 for r in rebuilt)} of {n}"]
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    adam = torch.optim.Adam(model.parameters(), lr=0.01)
    F.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    adam.step()
    saved = adam.state_dict()
    loaded = torch.optim.Adam(model.parameters(), lr=0.01)
    loaded.load_state_dict(saved)
    again = torch.optim.Adam(model.parameters(), lr=0.01)     # built once more after loading: what it holds
    lines.append(f"Adam: parameters with state after load_state_dict: {len(loaded.state)}; in an Adam built again "
                 f"after that: {len(again.state)} (its moments and step counts start from nothing)")
    return lines
