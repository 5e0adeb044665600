"""One optimizer for two heads trained in turns on one backbone (chapter 5, exhibit 5): what carries over.

Adam over the backbone and both heads; updates alternate head A, head B, each computing only its own head's
loss. Measured: what zero_grad() changes in the optimizer's state, whether the idle head moves during the
other head's update, each parameter's step count, and that nothing in the state depends on the batch size.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Turns:
    set_to_none: bool
    idle_head_moved: bool          # did head B move during head A's updates?
    steps: dict[str, int]          # Adam's step count per part: backbone, head A, head B
    state_kept_by_zero_grad: bool  # were exp_avg, exp_avg_sq and step equal before and after zero_grad()?
    state_shapes_are_parameters: bool   # every moment shaped like its parameter (nothing per example)


def alternating_heads(set_to_none: bool, updates: int = 6, seed: int = 0) -> Turns:
    """`updates` Adam updates alternating two heads (batch 8 for the first half, 32 for the second)."""
    torch.manual_seed(seed)
    backbone, head_a, head_b = nn.Linear(4, 8), nn.Linear(8, 2), nn.Linear(8, 3)
    parts = {"backbone": backbone, "head A": head_a, "head B": head_b}
    optimizer = torch.optim.Adam([p for m in parts.values() for p in m.parameters()], lr=0.05)
    idle_moved, kept = False, True
    for update in range(updates):
        batch = 8 if update < updates // 2 else 32
        x = torch.randn(batch, 4)
        head, classes = (head_a, 2) if update % 2 == 0 else (head_b, 3)
        before_b = head_b.weight.detach().clone()
        nn.functional.cross_entropy(head(torch.relu(backbone(x))), torch.randint(0, classes, (batch,))).backward()
        optimizer.step()
        if head is head_a:
            idle_moved |= not torch.equal(before_b, head_b.weight)
        saved = {id(p): {k: v.clone() for k, v in s.items()} for p, s in optimizer.state.items()}
        optimizer.zero_grad(set_to_none=set_to_none)
        kept &= all(torch.equal(v, saved[id(p)][k]) for p, s in optimizer.state.items() for k, v in s.items())
    steps = {name: int(optimizer.state[module.weight]["step"]) for name, module in parts.items()}
    shapes = all(s["exp_avg"].shape == p.shape and s["exp_avg_sq"].shape == p.shape
                 for p, s in optimizer.state.items())
    return Turns(set_to_none, idle_moved, steps, kept, shapes)


def turns_lines(updates: int = 6) -> list[str]:
    runs = [alternating_heads(set_to_none, updates) for set_to_none in (True, False)]
    lines = [f"Adam over a backbone and two heads, {updates} updates alternating head A and head B (batch 8, then 32):"]
    for t in runs:
        lines.append(f"  zero_grad(set_to_none={t.set_to_none!s:<5}): head B moved during head A's updates: "
                     f"{t.idle_head_moved!s:<5} | Adam's steps: " + ", ".join(f"{k} {v}" for k, v in t.steps.items()))
    lines.append(f"  zero_grad() left Adam's moments and step counts as they were: "
                 f"{all(t.state_kept_by_zero_grad for t in runs)} | every moment shaped like its parameter, none by "
                 f"batch: {all(t.state_shapes_are_parameters for t in runs)}")
    return lines
