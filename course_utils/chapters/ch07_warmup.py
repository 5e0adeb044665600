"""Chapter 7: why warmup, and for how long, measured on Adam's own step sizes (seeds 0-4).

Adam divides each gradient by the root of its running square. At the first update both running averages
hold one gradient, so the ratio is +-1: every weight with a gradient moves by the full learning rate,
whatever its gradient's size. The averages then fill with history and the steps shrink. Warmup scales the
rate down while Adam's statistics are this uninformed; the measured settling time says how long that is.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from course_utils.chapters.over_seeds import SEEDS
from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.infra.notebook import one_thread
from course_utils.infra.parallel import in_groups, map_runs


@dataclass(frozen=True)
class AdamSteps:
    """One Adam run's step sizes: per update, the mean |Δw| / lr and the share of weights that moved by lr."""

    mean_step: tuple[float, ...]
    full_share: tuple[float, ...]
    first_with_gradient: float   # share of the weights whose gradient at update 1 exceeded 1e-6 in size

    def settled_after(self, fraction: float = 0.25) -> int | None:
        """The first update (1-based) whose mean step is below `fraction` of the first update's."""
        first = self.mean_step[0]
        return next((u + 1 for u, s in enumerate(self.mean_step) if s < fraction * first), None)


def adam_steps(seed: int, lr: float = 0.01, updates: int = 80, batch_size: int = 32) -> AdamSteps:
    """Train the course's MLP with Adam (no warmup) and record how far each update moves the weights."""
    with one_thread():
        torch.manual_seed(seed)
        x, y = spiral_splits(600, 300, seed=seed).train.tensors
        model = MLP()
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        order = torch.Generator().manual_seed(seed)
        mean_step, full_share, with_gradient = [], [], None
        for _ in range(updates):
            idx = torch.randint(0, len(x), (batch_size,), generator=order)
            before = [p.detach().clone() for p in model.parameters()]
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            if with_gradient is None:
                with_gradient = float(torch.cat([(p.grad.abs() > 1e-6).flatten() for p in model.parameters()]).float().mean())
            optimizer.step()
            moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)]).abs() / lr
            mean_step.append(float(moved.mean()))
            full_share.append(float((moved > 0.99).float().mean()))
    return AdamSteps(tuple(mean_step), tuple(full_share), with_gradient)


@dataclass(frozen=True)
class Warmup:
    """Adam's step sizes over several seeds: the claims chapter 7 draws about warmup."""

    runs: tuple[AdamSteps, ...]

    def claims(self) -> dict[str, bool]:
        firsts = [r.full_share[0] for r in self.runs]
        settled = [r.settled_after() for r in self.runs]
        return {"at update 1, over half the weights move by the full lr": min(firsts) > 0.5,
                "at update 1, every weight with a gradient above 1e-6 moves by the full lr": all(
                    abs(r.full_share[0] - r.first_with_gradient) < 1e-9 for r in self.runs),
                "by update 10, under 2% do": all(r.full_share[9] < 0.02 for r in self.runs),
                "update 1 is the largest mean step of the run": all(
                    r.mean_step[0] == max(r.mean_step) for r in self.runs),
                "the mean step falls below a quarter of update 1s within 10 to 80 updates": all(
                    s is not None and 10 <= s <= 80 for s in settled)}

    def text(self) -> str:
        firsts = [r.full_share[0] for r in self.runs]
        c = self.claims()
        return "\n".join([
            f"Adam, lr 0.01, no warmup, {len(self.runs)} seeds:",
            f"  update 1: weights moved by the full lr: {min(firsts):.0%} to {max(firsts):.0%}; every weight whose "
            f"gradient exceeds 1e-6, on every seed: {c['at update 1, every weight with a gradient above 1e-6 moves by the full lr']}",
            f"  update 10: under 2% move by the full lr, on every seed: {c['by update 10, under 2% do']}",
            f"  update 1 is the largest mean step of the run, on every seed: "
            f"{c['update 1 is the largest mean step of the run']}",
            f"  the mean step falls below a quarter of update 1's within 10 to 80 updates, on every seed: "
            f"{c['the mean step falls below a quarter of update 1s within 10 to 80 updates']}"])


def warmup(seeds=SEEDS) -> Warmup:
    """Chapter 7: Adam's step sizes without warmup, on every seed."""
    return Warmup(tuple(map_runs(adam_steps, [(s,) for s in seeds])))


@dataclass(frozen=True)
class WarmupRun:
    """One Adam run with a linear warmup over `warmup` updates (0: none): its early and its final losses."""

    warmup: int
    early_max: float          # the largest training batch loss of the first 20 updates
    final_val: float          # validation loss after the last update


def warmup_run(seed: int, warmup: int, lr: float = 0.3, updates: int = 200, batch_size: int = 32) -> WarmupRun:
    """Adam at a high rate on the course's MLP, the rate ramped linearly over the first `warmup` updates."""
    with one_thread():
        torch.manual_seed(seed)
        splits = spiral_splits(600, 300, seed=seed)
        (x, y), (vx, vy) = splits.train.tensors, splits.val.tensors
        model = MLP()
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        ramp = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: min(1.0, (u + 1) / warmup) if warmup else 1.0)
        order = torch.Generator().manual_seed(seed)
        losses = []
        for _ in range(updates):
            idx = torch.randint(0, len(x), (batch_size,), generator=order)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            ramp.step()
            losses.append(loss.detach())
        with torch.no_grad():
            final = torch.nn.functional.cross_entropy(model(vx), vy).item()
    return WarmupRun(warmup, max(torch.stack(losses[:20]).tolist()), final)


def warmup_effect(seeds=SEEDS, warmups=(10, 40), lr: float = 0.3) -> list[str]:
    """Chapter 7: what a warmup changes at lr 0.3, counted on `seeds` (the early blow-up, the final loss)."""
    n = len(seeds)
    done = map_runs(warmup_run, [(s, w, lr) for w in (0, *warmups) for s in seeds])
    runs = dict(zip((0, *warmups), in_groups(done, n)))
    lines = [f"Adam at lr {lr:g}, 200 updates of 32, {n} seeds; largest batch loss of the first 20 updates:",
             f"  no warmup:              above 10 on {sum(r.early_max > 10 for r in runs[0])} of {n}"]
    lines += [f"  warmup of {w:>2} updates:   below 3 on {sum(r.early_max < 3 for r in runs[w])} of {n}" for w in warmups]
    lines.append("final validation loss lower than without warmup on every seed:")
    lines += [f"  warmup of {w:>2} updates:   {all(a.final_val < b.final_val for a, b in zip(runs[w], runs[0]))}"
              for w in warmups]
    return lines
