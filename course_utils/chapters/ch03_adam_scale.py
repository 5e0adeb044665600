"""Chapter 3: what Adam's update ignores and what it does not, run: a constant factor on the loss (Adam and AdamW
cancel it; SGD, clipping, Adam's L2 decay and a factor near eps do not), and Adam's weight_decay as a penalty in the
loss (the same as decay / 2 * sum(w**2))."""
from __future__ import annotations

import torch
from torch import nn

LOSS_FACTOR_OPTIMIZERS = {
    "Adam": lambda params: torch.optim.Adam(params, lr=0.01),
    "SGD": lambda params: torch.optim.SGD(params, lr=0.01),
    "Adam + clip_grad_norm_(5.0)": lambda params: torch.optim.Adam(params, lr=0.01),
    "Adam(weight_decay=0.1)": lambda params: torch.optim.Adam(params, lr=0.01, weight_decay=0.1),
    "AdamW(weight_decay=0.1)": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1),
}


def _regression(seed: int) -> tuple[torch.Tensor, torch.Tensor, nn.Module]:
    """A small regression problem and a fresh MLP for it (the constant-factor and weight-decay runs)."""
    torch.manual_seed(seed)
    x = torch.randn(64, 4)
    y = x @ torch.randn(4, 1) + 0.1 * torch.randn(64, 1)
    return x, y, nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))


def _weights(net: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in net.parameters()])


def _weights_after(optimizer: str, factor: float, seed: int, steps: int) -> torch.Tensor:
    """Every weight of a small regression MLP after `steps` full-batch steps on `factor` x its MSE loss."""
    x, y, net = _regression(seed)
    opt = LOSS_FACTOR_OPTIMIZERS[optimizer](net.parameters())
    for _ in range(steps):
        opt.zero_grad()
        (factor * nn.functional.mse_loss(net(x), y)).backward()
        if "clip" in optimizer:
            nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
    return _weights(net)


def decay_in_the_loss_gaps(decay: float = 0.1, seeds: range = range(3), steps: int = 20) -> dict[str, list[float]]:
    """Adam(weight_decay=decay) against plain Adam on the loss plus a penalty on every weight, seed by seed: the
    largest weight difference after `steps` steps, relative to the largest weight (chapter 3)."""
    def run(seed: int, weight_decay: float, penalty: float, decoupled: bool = False) -> torch.Tensor:
        x, y, net = _regression(seed)
        kind = torch.optim.AdamW if decoupled else torch.optim.Adam
        opt = kind(net.parameters(), lr=0.01, weight_decay=weight_decay)
        for _ in range(steps):
            opt.zero_grad()
            loss = nn.functional.mse_loss(net(x), y)
            if penalty:
                loss = loss + penalty * sum(p.pow(2).sum() for p in net.parameters())
            loss.backward()
            opt.step()
        return _weights(net)
    cases = {f"{decay / 2:g} * sum of w**2 in the loss (decay / 2)": dict(weight_decay=0.0, penalty=decay / 2),
             f"{decay:g} * sum of w**2 in the loss (the 1/2 left out)": dict(weight_decay=0.0, penalty=decay),
             f"AdamW(weight_decay={decay:g}) instead": dict(weight_decay=decay, penalty=0.0, decoupled=True)}
    gaps: dict[str, list[float]] = {case: [] for case in cases}
    for seed in seeds:
        reference = run(seed, decay, 0.0)
        for case, settings in cases.items():
            gaps[case].append(((reference - run(seed, **settings)).abs().max() / reference.abs().max()).item())
    return gaps


def loss_factor_gaps(factors: tuple[float, ...], seeds: range, steps: int = 20) -> dict[str, dict[float, list[float]]]:
    """Per optimizer and factor c, seed by seed: how far the weights after training on c x loss end from those after
    training on the loss itself, relative to the largest weight (NaN where the run diverged)."""
    gaps: dict[str, dict[float, list[float]]] = {}
    for optimizer in LOSS_FACTOR_OPTIMIZERS:
        gaps[optimizer] = {c: [] for c in factors}
        for seed in seeds:
            plain = _weights_after(optimizer, 1.0, seed, steps)
            for c in factors:
                scaled = _weights_after(optimizer, c, seed, steps)
                gaps[optimizer][c].append(((plain - scaled).abs().max() / plain.abs().max()).item())
    return gaps


def adamw_decay_per_step(lr: float, decay: float = 0.1, steps: int = 4, schedule: bool = False) -> list[float]:
    """AdamW on a weight of 1.0 whose gradient is always 0, so only the decay moves it: each step's factor
    w_new / w_old (chapter 3). With `schedule`, a cosine schedule over `steps` updates lowers the rate each step.
    In float64, so that the printed factors carry no float32 rounding (which moves from one CPU to another)."""
    w = torch.nn.Parameter(torch.ones(1, dtype=torch.float64))
    opt = torch.optim.AdamW([w], lr=lr, weight_decay=decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if schedule else None
    factors = []
    for _ in range(steps):
        before = w.item()
        w.grad = torch.zeros_like(w)
        opt.step()
        factors.append(w.item() / before)
        if sched:
            sched.step()
    return factors
