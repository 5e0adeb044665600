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


def _clients_data(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Two clients (Bob and Alice) whose inputs come from different regions of one task."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 1, generator=g)
    xs = [torch.randn(64, 4, generator=g) + shift for shift in (-1.0, 1.0)]
    return [(x, x @ w + 0.1 * torch.randn(64, 1, generator=g)) for x in xs]


def federated_run(seed: int, way: str, rounds: int = 5, steps: int = 10) -> list[float]:
    """Federated averaging by hand: two clients, each its own copy of the model and SGD(momentum=0.9); each round
    every client takes `steps` steps on its data, the weights are averaged, and the average goes back to the
    clients one of three ways: "kept" (load_state_dict into each client, its optimizer kept), "fresh" (the same,
    and a new optimizer each round) or "replaced" (each client replaced by a copy of the averaged model, the old
    optimizer kept). The averaged model's mean loss over both clients' data, at the start and after each round."""
    import copy
    data = _clients_data(seed)
    torch.manual_seed(seed)
    shared = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    clients = [copy.deepcopy(shared) for _ in data]
    optimizers = [torch.optim.SGD(c.parameters(), lr=0.05, momentum=0.9) for c in clients]

    def loss() -> float:
        with torch.no_grad():
            return sum(F.mse_loss(shared(x), y).item() for x, y in data) / len(data)

    losses = [loss()]
    for _ in range(rounds):
        for i, (client, (x, y)) in enumerate(zip(clients, data)):
            if way == "fresh":
                optimizers[i] = torch.optim.SGD(client.parameters(), lr=0.05, momentum=0.9)
            for _ in range(steps):
                optimizers[i].zero_grad()
                F.mse_loss(client(x), y).backward()
                optimizers[i].step()
        states = [c.state_dict() for c in clients]
        shared.load_state_dict({k: sum(s[k] for s in states) / len(states) for k in states[0]})
        if way == "replaced":
            clients = [copy.deepcopy(shared) for _ in data]
        else:
            for client in clients:
                client.load_state_dict(shared.state_dict())
        losses.append(loss())
    return losses


def federated_lines(seeds=range(5), rounds: int = 5) -> list[str]:
    """The three ways over seeds, as chapter 3 prints them."""
    n = len(seeds)
    runs = {way: [federated_run(s, way, rounds) for s in seeds] for way in ("kept", "fresh", "replaced")}
    stuck = sum(all(v == r[1] for v in r[1:]) for r in runs["replaced"])
    fell = {way: sum(r[-1] < r[0] / 5 for r in rs) for way, rs in runs.items()}
    fresh_better = sum(f[-1] < 0.9 * k[-1] for f, k in zip(runs["fresh"], runs["kept"]))
    kept_better = sum(k[-1] < 0.9 * f[-1] for f, k in zip(runs["fresh"], runs["kept"]))
    return [f"two clients, averaged after each of {rounds} rounds of 10 SGD(momentum=0.9) steps, {n} seeds:",
            f"  load_state_dict into each client, optimizers kept:  loss below a fifth of its start on "
            f"{fell['kept']} of {n}",
            f"  the same, a new optimizer every round:              below a fifth on {fell['fresh']} of {n}; "
            f"lower than the kept optimizers' by over 10% on {fresh_better}, higher by over 10% on {kept_better}",
            f"  clients replaced by copies, old optimizers kept:   the loss exactly unchanged after round 1 on "
            f"{stuck} of {n}"]
