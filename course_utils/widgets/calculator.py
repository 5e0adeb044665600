"""Chapter 0: the training-arithmetic calculator, its timeline and the animate-one-step view."""
from __future__ import annotations

import html

import ipywidgets as w
import matplotlib.pyplot as plt
import torch

from course_utils.arithmetic import TrainingArithmetic, epoch_timeline, is_update_step, training_arithmetic
from course_utils.widgets.base import View, error_html, figure_png, table_html

STAGES = ("pick a batch", "forward", "loss", "backward", "update")
MAX_DRAWN_BATCHES = 2000   # beyond this the zoomed epoch is summarised, not drawn batch by batch
MAX_DATASET = 10_000_000


def timeline_figure(r: TrainingArithmetic, max_epochs: int = 8):
    """Top: the epochs as blocks with their update counts. Bottom: one epoch, batch by batch, updates marked."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.0, 3.4), gridspec_kw={"height_ratios": [1, 1.4]})
    shown = min(r.epochs, max_epochs)
    for e in range(shown):
        top.barh(0, 1, left=e, height=0.6, color="#90caf9" if e % 2 == 0 else "#64b5f6", edgecolor="white")
        top.text(e + 0.5, 0, f"epoch {e + 1}\n{r.updates_per_epoch:,} upd", ha="center", va="center", fontsize=8)
    if r.epochs > shown:
        top.text(shown + 0.1, 0, f"… {r.epochs - shown} more", va="center", fontsize=8)
    top.set_xlim(0, max(shown, 1) + (1.2 if r.epochs > shown else 0))
    top.set_axis_off()
    top.set_title(f"{r.epochs} epochs × {r.iters_per_epoch:,} iterations = {r.total_micro_steps:,} micro-steps, "
                  f"{r.total_weight_updates:,} weight updates", fontsize=9)
    n = r.samples_per_rank
    bottom.set_xlim(0, n * 1.02)
    bottom.set_ylim(-0.2, 1.5)
    bottom.set_yticks([])
    bottom.set_xlabel("examples of one epoch" + (" (one rank)" if r.world_size > 1 else ""))
    rows = epoch_timeline(r) if r.iters_per_epoch <= MAX_DRAWN_BATCHES else []
    if rows:
        bottom.broken_barh([(s, z) for s, z, _, _ in rows], (0, 0.6), facecolors=[("#bbdefb", "#90caf9")[i % 2] for i in range(len(rows))], edgecolor="white", linewidth=0.5)
        ups = [s + z for s, z, u, f in rows if u and not f]
        flush = [s + z for s, z, u, f in rows if f]
        bottom.scatter(ups, [0.85] * len(ups), marker="v", color="#2e7d32", s=18, label="optimizer.step()")
        if flush:
            bottom.scatter(flush, [0.85] * len(flush), marker="v", color="#ef6c00", s=40,
                           label=f"flush: window of {r.last_window_size} < K={r.accum_steps}")
        bottom.legend(loc="upper right", fontsize=7, ncol=2, frameon=False)
    elif r.iters_per_epoch:
        bottom.barh(0.3, r.examples_per_epoch, height=0.6, color="#bbdefb")
        bottom.text(n / 2, 0.3, f"{r.iters_per_epoch:,} batches: too many to draw one by one", ha="center", fontsize=8)
    if r.dropped_per_epoch:
        bottom.barh(0.3, r.dropped_per_epoch, left=n - r.dropped_per_epoch, height=0.6, color="#e0e0e0",
                    hatch="///", edgecolor="#9e9e9e")
        bottom.text(n - r.dropped_per_epoch / 2, 1.2, f"{r.dropped_per_epoch} dropped", ha="center", fontsize=8)
    fig.tight_layout()
    return fig


def step_svg(r: TrainingArithmetic, micro_step: int, stage: int, seed: int = 0) -> str:
    """An SVG of one micro-step at one stage: which examples, what flows, whether the weights change."""
    shown = min(r.samples_per_rank, 60)
    order = torch.randperm(r.samples_per_rank, generator=torch.Generator().manual_seed(seed)).tolist()
    start = micro_step * r.batch_size
    size = r.last_batch_size if micro_step == r.iters_per_epoch - 1 else r.batch_size
    batch = set(order[start:start + size])
    cells = []
    for i in range(shown):
        x, y = 10 + (i % 20) * 14, 10 + (i // 20) * 14
        colour = "#1e88e5" if i in batch and stage >= 0 else "#e0e0e0"
        cells.append(f'<rect x="{x}" y="{y}" width="11" height="11" fill="{colour}"/>')
    more = "" if shown == r.samples_per_rank else f'<text x="10" y="62" font-size="10">(first {shown} of {r.samples_per_rank:,} examples)</text>'
    window_pos = micro_step % r.accum_steps + 1
    updates = is_update_step(micro_step, r.iters_per_epoch, r.accum_steps)
    texts = [
        f"{size} examples drawn (shuffled order, batch {micro_step + 1} of {r.iters_per_epoch:,})",
        f"forward: inputs of shape ({size}, features) → logits ({size}, classes); activations kept for backward",
        "loss: one scalar, the mean over the batch" + (f", divided by the window size" if r.accum_steps > 1 else ""),
        "backward: .grad += ∂loss/∂w for every weight" + (f" (micro-batch {window_pos} of the window)" if r.accum_steps > 1 else ""),
        ("update: optimizer.step() then zero_grad(): the weights change" if updates else
         f"no update yet: gradients accumulate ({window_pos} of K={r.accum_steps})"),
    ]
    boxes = []
    for i, name in enumerate(STAGES):
        active = i == stage
        fill = "#fff3e0" if active else "#fafafa"
        stroke = "#ef6c00" if active else "#bdbdbd"
        boxes.append(f'<rect x="{300 + i * 78}" y="8" width="72" height="30" rx="5" fill="{fill}" stroke="{stroke}"/>'
                     f'<text x="{336 + i * 78}" y="27" font-size="10" text-anchor="middle">{name}</text>')
    return (f'<svg width="700" height="90" xmlns="http://www.w3.org/2000/svg">{"".join(cells)}{more}{"".join(boxes)}'
            f'<text x="300" y="62" font-size="11">{html.escape(texts[stage])}</text></svg>')


class CalculatorView(View):
    """Inputs N, B, E, K, drop_last, W → the counts, the timeline and one animated step."""

    def __init__(self, dataset_size: int = 10_000, batch_size: int = 32, epochs: int = 3, accum_steps: int = 1,
                 drop_last: bool = False, world_size: int = 1):
        style = {"description_width": "150px"}
        lay = w.Layout(width="260px")
        self.dataset_size = w.IntText(dataset_size, description="dataset size N", style=style, layout=lay)
        self.batch_size = w.IntText(batch_size, description="batch size B", style=style, layout=lay)
        self.epochs = w.IntText(epochs, description="epochs E", style=style, layout=lay)
        self.accum_steps = w.IntText(accum_steps, description="accumulation K", style=style, layout=lay)
        self.world_size = w.IntText(world_size, description="world size W", style=style, layout=lay)
        self.drop_last = w.Checkbox(drop_last, description="drop_last", indent=False)
        self.controls = [self.dataset_size, self.batch_size, self.epochs, self.accum_steps, self.world_size,
                         self.drop_last]
        self.numbers = w.HTML()
        self.message = w.HTML()
        self.timeline = w.Image(format="png", layout=w.Layout(width="720px"))
        self.micro_step = w.IntSlider(1, min=1, max=1, description="micro-step", style={"description_width": "80px"})
        self.stage = w.IntSlider(0, min=0, max=len(STAGES) - 1, description="stage", readout=False,
                                 style={"description_width": "80px"})
        self.play = w.Play(value=0, min=0, max=len(STAGES) - 1, interval=900, description="animate one step")
        w.jslink((self.play, "value"), (self.stage, "value"))
        self.step_view = w.HTML()
        self.result: TrainingArithmetic | None = None
        self.error: str | None = None
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        for control in (self.micro_step, self.stage):
            control.observe(lambda _: self.draw_step(), names="value")
        self.widget = w.VBox([
            w.HBox([w.VBox(self.controls), w.VBox([self.message, self.numbers])]),
            self.timeline,
            w.HTML("<b>Animate one step</b> — press ▶ or drag the sliders"),
            w.HBox([self.play, self.stage, self.micro_step]),
            self.step_view,
        ])
        self.update()

    def update(self) -> None:
        """Recompute from the inputs; invalid input shows a message instead of numbers."""
        try:
            n = self.dataset_size.value
            if n > MAX_DATASET:
                raise ValueError(f"dataset_size must be at most {MAX_DATASET:,} in this widget, got {n:,}")
            r = training_arithmetic(n, self.batch_size.value, self.epochs.value, self.accum_steps.value,
                                    drop_last=self.drop_last.value, world_size=self.world_size.value)
        except ValueError as exc:
            self.result, self.error = None, str(exc)
            self.message.value = error_html(str(exc))
            self.numbers.value = ""
            self.timeline.value = b""
            self.step_view.value = ""
            return
        self.result, self.error = r, None
        self.message.value = ""
        self.numbers.value = table_html([(k, f"{v:,}" if not isinstance(v, bool) else v) for k, v in r.rows(False)])
        self.timeline.value = figure_png(timeline_figure(r))
        self.micro_step.max = max(r.iters_per_epoch, 1)
        self.micro_step.disabled = r.iters_per_epoch == 0
        self.draw_step()

    def draw_step(self) -> None:
        r = self.result
        if r is None:
            return
        if r.iters_per_epoch == 0:
            self.step_view.value = error_html("drop_last leaves no complete batch: this epoch has no step at all.")
            return
        self.step_view.value = step_svg(r, min(self.micro_step.value, r.iters_per_epoch) - 1, self.stage.value)

    def text(self) -> str:
        if self.result is None:
            return f"Training-arithmetic calculator: invalid input: {self.error}"
        return "Training-arithmetic calculator\n" + self.result.table()


def calculator(**kwargs) -> CalculatorView:
    """Show the chapter-0 calculator (keyword arguments set the starting inputs)."""
    return CalculatorView(**kwargs)
