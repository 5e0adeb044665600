"""Chapter 7's clipping experiment: one wild batch, the pre-clip gradient norm of every update, SGD and AdamW, seeds.

One batch arrives with its inputs x1000 (a unit mix-up in one shard of data) at a fixed update. The
run logs what the chapter tells the learner to log, the norm that `clip_grad_norm_` returns (the norm
*before* clipping), and the size of every update's step. The same run is made clean, with the spike,
and with the spike clipped, for both optimizers and several seeds; `claims` states what holds on
every seed, and the tests check the same claims.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import torch
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector
from torch.utils.data import DataLoader

from course_utils.engine.data import spiral_splits
from course_utils.engine.models import MLP
from course_utils.infra.notebook import seed_everything
from course_utils.infra.parallel import map_runs

SPIKE_AT, SCALE, MAX_NORM = 30, 1000.0, 2.5   # the wild batch's update, its input scale, the clipping threshold
EPOCHS, BATCH = 6, 32                         # 384 examples: 12 updates per epoch, 72 in all
OPTIMIZERS = {"SGD": "SGD(lr=0.1, momentum=0.9)", "AdamW": "AdamW(lr=0.01)"}
VARIANTS = ("clean", "spike", "spike, clipped", "clean, clipped")


@dataclass(frozen=True)
class SpikeRun:
    """One run: the pre-clip norm and the step size of every update, and the final validation figures."""

    norms: list[float]
    steps: list[float]
    val_loss: float
    val_acc: float
    adam_v_growth: float | None  # AdamW: sqrt of the second-moment sum right after the spike / right before

    @property
    def ordinary_norm(self) -> float:
        """Median pre-clip norm of the updates without the wild batch."""
        return statistics.median(n for i, n in enumerate(self.norms) if i != SPIKE_AT)

    def median_step(self, start: int, stop: int) -> float:
        return statistics.median(self.steps[start:stop])


def _optimizer(name: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if name == "SGD":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if name == "AdamW":
        return torch.optim.AdamW(model.parameters(), lr=0.01)
    raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}, got {name!r}")


def _v_norm(optimizer: torch.optim.Optimizer) -> float:
    return math.sqrt(sum(s["exp_avg_sq"].sum().item() for s in optimizer.state.values() if "exp_avg_sq" in s))


def spike_run(seed: int, optimizer: str, spike: bool, max_norm: float | None, splits=None) -> SpikeRun:
    """Train the spiral MLP for EPOCHS; with `spike`, update SPIKE_AT's batch has its inputs x SCALE (chapter 7)."""
    splits = splits or spiral_splits(384, 128, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, and the same on every machine
    try:
        return _train(seed, optimizer, spike, max_norm, splits)
    finally:
        torch.set_num_threads(threads)


def _train(seed: int, optimizer: str, spike: bool, max_norm: float | None, splits) -> SpikeRun:
    seed_everything(seed)
    model = MLP(hidden=32)
    opt = _optimizer(optimizer, model)
    loader = DataLoader(splits.train, BATCH, shuffle=True, generator=torch.Generator().manual_seed(seed))
    norms, steps, update, v_growth = [], [], 0, None
    for _ in range(EPOCHS):
        for x, y in loader:
            if spike and update == SPIKE_AT:
                x = x * SCALE
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm if max_norm else math.inf)
            before = parameters_to_vector(model.parameters()).detach().clone()
            v_before = _v_norm(opt) if update == SPIKE_AT and optimizer == "AdamW" else None
            opt.step()
            if v_before:
                v_growth = _v_norm(opt) / v_before
            steps.append((parameters_to_vector(model.parameters()).detach() - before).norm().item())
            norms.append(norm.item())
            update += 1
    model.eval()
    x, y = splits.val.tensors
    with torch.no_grad():
        logits = model(x)
    return SpikeRun(norms, steps, F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item(),
                    v_growth)


def spike_study(seeds=range(5)) -> dict[tuple[str, str, int], SpikeRun]:
    """Every optimizer x variant x seed: {(optimizer, variant, seed): run} (chapter 7, and its tests)."""
    splits = spiral_splits(384, 128, seed=0)
    keys = [(name, variant, seed) for name in OPTIMIZERS for variant in VARIANTS for seed in seeds]
    done = map_runs(spike_run, [(seed, name, variant.startswith("spike"),
                                 MAX_NORM if variant.endswith("clipped") else None, splits)
                                for name, variant, seed in keys])
    return dict(zip(keys, done))


def claims(study: dict[tuple[str, str, int], SpikeRun]) -> list[tuple[str, int, int]]:
    """(claim, seeds on which it holds, seeds): what the chapter says about spikes and clipping."""
    seeds = sorted({s for _, _, s in study})
    rows = []

    def claim(text: str, holds) -> None:
        rows.append((text, sum(bool(holds(s)) for s in seeds), len(seeds)))

    def run(name: str, variant: str, seed: int) -> SpikeRun:
        return study[name, variant, seed]

    claim("the wild batch's pre-clip norm is over 100x the median of the others (both optimizers)",
          lambda s: all(run(o, "spike", s).norms[SPIKE_AT] > 100 * run(o, "spike", s).ordinary_norm for o in OPTIMIZERS))
    claim(f"no ordinary update reaches max_norm {MAX_NORM:g}: clipping leaves the clean runs bitwise unchanged",
          lambda s: all(max(run(o, "clean", s).norms) < MAX_NORM and run(o, "clean", s) == run(o, "clean, clipped", s)
                        for o in OPTIMIZERS))
    claim("SGD: the spike's step is over 50x the median step before it",
          lambda s: run("SGD", "spike", s).steps[SPIKE_AT] > 50 * run("SGD", "spike", s).median_step(0, SPIKE_AT))
    claim("SGD: momentum carries it on: the next 10 steps' median is over 10x the median before",
          lambda s: run("SGD", "spike", s).median_step(SPIKE_AT + 1, SPIKE_AT + 11)
          > 10 * run("SGD", "spike", s).median_step(0, SPIKE_AT))
    claim("AdamW: the spike's step is under 2x the median step before it (Adam's step is bounded near lr)",
          lambda s: run("AdamW", "spike", s).steps[SPIKE_AT] < 2 * run("AdamW", "spike", s).median_step(0, SPIKE_AT))
    claim("AdamW: the spike inflates the second-moment estimate: sqrt(sum v) grows over 10x in that update",
          lambda s: run("AdamW", "spike", s).adam_v_growth > 10)
    claim("AdamW: the next 10 steps' median is smaller than the median before (every coordinate is damped)",
          lambda s: run("AdamW", "spike", s).median_step(SPIKE_AT + 1, SPIKE_AT + 11)
          < run("AdamW", "spike", s).median_step(0, SPIKE_AT))
    for name in OPTIMIZERS:
        claim(f"{name}: the spike raises the final validation loss over 1.3x the clean run's",
              lambda s, o=name: run(o, "spike", s).val_loss > 1.3 * run(o, "clean", s).val_loss)
        claim(f"{name}: clipping at {MAX_NORM:g} wins back over half of that damage",
              lambda s, o=name: run(o, "spike", s).val_loss - run(o, "spike, clipped", s).val_loss
              > 0.5 * (run(o, "spike", s).val_loss - run(o, "clean", s).val_loss))
    return rows


def claims_text(rows: list[tuple[str, int, int]]) -> str:
    """One line per claim: on how many seeds it holds."""
    return "\n".join(f"{held}/{n} seeds: {text}" for text, held, n in rows)


def figures_text(study: dict[tuple[str, str, int], SpikeRun]) -> str:
    """The raw figures behind the claims, median [range] over seeds (chaotic runs: not for nbval)."""
    seeds = sorted({s for _, _, s in study})

    def spread(values) -> str:
        values = list(values)
        return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"

    lines = [f"median [range] over seeds {seeds[0]}-{seeds[-1]}"]
    for name in OPTIMIZERS:
        spike = [study[name, "spike", s] for s in seeds]
        lines.append(f"{name}: ordinary norm {spread(r.ordinary_norm for r in spike)}, "
                     f"spike norm {spread(r.norms[SPIKE_AT] for r in spike)}, "
                     f"step at the spike / median step before {spread(r.steps[SPIKE_AT] / r.median_step(0, SPIKE_AT) for r in spike)}")
        lines.append("  final val loss: " + ", ".join(
            f"{variant} {spread(study[name, variant, s].val_loss for s in seeds)}" for variant in VARIANTS[:3]))
        lines.append("  final val accuracy: " + ", ".join(
            f"{variant} {spread(study[name, variant, s].val_acc for s in seeds)}" for variant in VARIANTS[:3]))
    return "\n".join(lines)


def trace_figure(study: dict[tuple[str, str, int], SpikeRun], seed: int = 0):
    """The pre-clip norm of every update, spike marked, and each update's step size (chapter 7)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(8.8, 4.8), sharex=True)
    for column, name in enumerate(OPTIMIZERS):
        top, bottom = axes[0, column], axes[1, column]
        for variant, colour in (("spike", "#c0392b"), ("spike, clipped", "#2471a3"), ("clean", "#7f8c8d")):
            run = study[name, variant, seed]
            updates = range(1, len(run.norms) + 1)
            top.plot(updates, run.norms, color=colour, lw=1.2, label=variant)
            bottom.plot(updates, run.steps, color=colour, lw=1.2, label=variant)
        top.axhline(MAX_NORM, color="#2471a3", ls=":", lw=1)
        top.annotate(f"the wild batch: {study[name, 'spike', seed].norms[SPIKE_AT]:.0f}",
                     (SPIKE_AT + 1, study[name, "spike", seed].norms[SPIKE_AT]), xytext=(8, -4),
                     textcoords="offset points", fontsize=8, color="#c0392b")
        top.set(yscale="log", title=f"{OPTIMIZERS[name]}: pre-clip gradient norm", ylabel="norm (log)")
        bottom.set(yscale="log", title="size of each update's step", xlabel=f"update (seed {seed})",
                   ylabel="||w_new - w_old|| (log)")
        for ax in (top, bottom):
            ax.title.set_fontsize(9)
            ax.tick_params(labelsize=8)
    axes[0, 0].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
