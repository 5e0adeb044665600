"""Every epoch slower than the last: a recurrent state carried across batches when nothing stops it (chapter 3).

In torch 2.13 a hidden state carried from batch to batch without ``.detach()`` raises at the second backward
(``ch03_loop_errors``). It runs on, silently, when both of torch's checks are bypassed: ``retain_graph=True`` keeps
the old batches' graphs, and an update through ``.data`` (the way code written for torch 0.4 often stepped) changes
the weights without bumping the version counter that would have refused the old graphs. Then every backward runs
through the whole history of the state, back to the first batch. An LSTM (one layer, 2 inputs, 16 units) reads 20
batches of 4 sequences of 5 steps per epoch, 5 epochs, with an L2 loss on its outputs; a hook on each batch's final
hidden state h counts how often a later backward reaches back into that batch, the work that grows. The same loop with
``h, c = h.detach(), c.detach()`` at each batch start is the fix; ``seconds_lines`` shows both runs' seconds per epoch (machine-dependent).
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.chapters.raised import raised

EPOCHS, BATCHES, SEQ = 5, 20, 5


def run(detach: bool, seed: int = 0, epochs: int = EPOCHS, batches: int = BATCHES,
        through_data: bool = True) -> dict[str, list]:
    """Per epoch: how often a backward reached back into an earlier batch (hook calls), the seconds taken, the mean
    loss. `through_data=False` writes the update as p.add_ under torch.no_grad() instead: the version counter then
    sees it, and the run stops at the backward that raises (returned as "error", with the batch it came in)."""
    torch.manual_seed(seed)
    lstm, head = nn.LSTM(2, 16), nn.Linear(16, 2)
    params = [*lstm.parameters(), *head.parameters()]
    generator = torch.Generator().manual_seed(seed)
    state = (torch.zeros(1, 4, 16), torch.zeros(1, 4, 16))
    counted = [0]
    through, seconds, losses = [], [], []
    lstm(torch.zeros(SEQ, 4, 2))[0].sum().backward()     # warm up (the first call's lazy set-up is no epoch's cost)
    for _ in range(epochs):
        counted[0], start, losses_now = 0, time.perf_counter(), []
        for _ in range(batches):
            x = torch.randn(SEQ, 4, 2, generator=generator)
            if detach:
                state = tuple(s.detach() for s in state)
            out, state = lstm(x, state)
            state[0].register_hook(lambda g: counted.__setitem__(0, counted[0] + 1))
            loss = F.mse_loss(head(out), x.roll(1, 0))          # predict the previous step: an L2 loss
            for p in params:
                p.grad = None
            outcome = raised(lambda: loss.backward(retain_graph=not detach), sentences=1)
            if outcome != "no error":
                # torch's words up to the tensor it names: the version numbers after them count every in-place
                # change since the tensor was made, initialisation included, which differs between set-ups
                return {"error": outcome.split(": [")[0], "at batch": len(through) * batches + len(losses_now) + 1}
            with torch.no_grad():
                for p in params:
                    (p.data if through_data else p).add_(p.grad, alpha=-0.05)   # .data: torch 0.4's habit, no version bump
            losses_now.append(loss.item())
        through.append(counted[0])
        seconds.append(time.perf_counter() - start)
        losses.append(sum(losses_now) / batches)
    return {"through": through, "seconds": seconds, "loss": losses}


def slower_lines(carried: dict, cut: dict) -> list[str]:
    """The counted work per epoch, carried and detached (the graph's shape: the same on any seed and machine); then
    the carried loop without .data, refused by the version counter."""
    refused = run(False, epochs=1, through_data=False)
    return [f"state carried, backward(retain_graph=True), weights updated through .data: no error; earlier batches "
            f"each backward reached back into, summed per epoch: {', '.join(f'{n:,}' for n in carried['through'])}",
            f"h, c = h.detach(), c.detach() at each batch start: {', '.join(f'{n:,}' for n in cut['through'])}",
            f"mean L2 loss per epoch within 1% of each other both ways: "
            f"{all(abs(a - b) < 0.01 * b for a, b in zip(carried['loss'], cut['loss']))}",
            f"the carried loop with the update written p.add_ under torch.no_grad() (no .data): stops at batch "
            f"{refused['at batch']}'s backward: {refused['error']}"]


def seconds_lines(carried: dict, cut: dict) -> list[str]:
    """Seconds per epoch, both ways (machine-dependent: shown, not compared)."""
    return [f"{name:9} seconds per epoch: {', '.join(f'{s:.2f}' for s in r['seconds'])}"
            for name, r in (("carried", carried), ("detached", cut))]
