"""Chapter 3: what gradient checkpointing reruns. The block's forward runs again during backward, so a BatchNorm
inside it updates its running statistics twice per step (both `use_reentrant` forms), which is a larger momentum;
dropout draws the same masks again because the RNG state is saved (`preserve_rng_state=True`, the default)."""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def _block(momentum: float | None = 0.1, dropout: float = 0.0) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8, momentum=momentum), nn.Dropout(dropout), nn.Linear(8, 4))


def _steps(block: nn.Module, how: str, steps: int = 5, preserve: bool = True) -> nn.Module:
    """`steps` forward/backward passes on fixed batches: plain, or checkpointed (`reentrant` or `non-reentrant`)."""
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(16, 4, generator=g).requires_grad_()   # as a block inside a network receives it
        torch.manual_seed(2)                               # the dropout masks, the same in every run
        out = block(x) if how == "plain" else checkpoint(block, x, use_reentrant=how == "reentrant",
                                                         preserve_rng_state=preserve)
        out.pow(2).sum().backward()
    return block


def batchnorm_lines(momentum: float = 0.1) -> list[str]:
    """Running statistics after 5 steps with the block checkpointed, against plain runs at other momentums."""
    twice = 1 - (1 - momentum) ** 2                       # one batch's statistics applied twice
    compensated = 1 - math.sqrt(1 - momentum)             # the momentum whose double update is `momentum`
    plain = {m: _steps(_block(m), "plain")[1] for m in (momentum, twice)}
    lines = []
    for how in ("reentrant", "non-reentrant"):
        bn = _steps(_block(momentum), how)[1]
        lines.append(f"checkpointed ({how}), momentum {momentum}: num_batches_tracked {bn.num_batches_tracked.item()} "
                     f"after 5 steps (plain: {plain[momentum].num_batches_tracked.item()}); running mean equal to a "
                     f"plain run's at momentum {momentum}: {torch.allclose(bn.running_mean, plain[momentum].running_mean)}"
                     f", at {twice:.2f}: {torch.allclose(bn.running_mean, plain[twice].running_mean)}")
    fixed = _steps(_block(compensated), "non-reentrant")[1]
    lines.append(f"checkpointed with momentum 1 - sqrt(1 - {momentum}) = {compensated:.4f}: running mean and variance "
                 f"equal to the plain run's at {momentum}: "
                 f"{torch.allclose(fixed.running_mean, plain[momentum].running_mean) and torch.allclose(fixed.running_var, plain[momentum].running_var)}")
    cumulative = {how: _steps(_block(None), how)[1] for how in ("plain", "non-reentrant")}
    lines.append("momentum=None (a cumulative average): checkpointed running mean equal to the plain run's: "
                 f"{torch.allclose(cumulative['plain'].running_mean, cumulative['non-reentrant'].running_mean)}")
    return lines


def dropout_lines() -> list[str]:
    """Dropout 0.5 inside the checkpointed block: gradients against the plain run's, with the RNG state preserved
    and not; and the weight gradient of a block whose input does not require grad, non-reentrant."""
    plain = _steps(_block(dropout=0.5), "plain", steps=1)
    lines = []
    for preserve in (True, False):
        ckpt = _steps(_block(dropout=0.5), "non-reentrant", steps=1, preserve=preserve)
        same = all(torch.allclose(a.grad, b.grad) for a, b in zip(plain.parameters(), ckpt.parameters()))
        lines.append(f"dropout 0.5, preserve_rng_state={preserve}: gradients equal to the plain run's: {same}")
    block = _block()
    checkpoint(block, torch.randn(16, 4), use_reentrant=False).sum().backward()
    lines.append(f"use_reentrant=False, input without requires_grad: block's weight.grad filled: "
                 f"{block[0].weight.grad is not None}")
    return lines
