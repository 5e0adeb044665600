"""Chapter 3: what one training step allocates, and when. A model's gradients appear at its first backward and
Adam's two moments at its first step, so a run's memory steps up after iteration 1 and then stays level;
``zero_grad()`` (set_to_none) frees the gradients between steps. Counted in bytes of the tensors themselves, the
same on any machine (an accelerator's allocator adds its own caching on top)."""
from __future__ import annotations

import torch
from torch import nn


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def step_memory(width: int = 256) -> tuple[int, list[tuple[str, int, int]]]:
    """The weights' bytes, and at each point of two iterations the bytes held in .grad and in Adam's state."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    params = list(model.parameters())
    x, y = torch.randn(32, width), torch.randint(0, 10, (32,))
    points = []

    def note(when: str) -> None:
        points.append((when, _bytes(p.grad for p in params),
                       _bytes(v for s in optimizer.state.values() for v in s.values())))
    note("built")
    for i in (1, 2):
        optimizer.zero_grad()
        note(f"iteration {i}, after zero_grad()")
        nn.functional.cross_entropy(model(x), y).backward()
        note(f"iteration {i}, after backward()")
        optimizer.step()
        note(f"iteration {i}, after step()")
    return _bytes(params), points


def step_memory_lines(width: int = 256) -> list[str]:
    weights, points = step_memory(width)
    return [f"weights: {weights / 1024:.0f} KiB"] + [
        f"{when:<34} gradients {grads / 1024:>4.0f} KiB | Adam's state {state / 1024:>4.0f} KiB"
        for when, grads, state in points]
