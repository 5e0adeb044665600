"""Chapter 0: the training-arithmetic calculator, its timeline and the animate-one-step view."""
from __future__ import annotations

import html

import ipywidgets as w
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, MaxNLocator

from course_utils.engine.arithmetic import (TrainingArithmetic, accumulation_window, epoch_timeline, is_update_step,
                                     training_arithmetic)
from course_utils.widgets.base import (View, busy_html, error_html, guarded, number_box,
                                       parse_whole_number, stale_html, table_html)

STAGES = ("pick a batch", "forward", "loss", "backward", "update")
MAX_DRAWN_BATCHES = 2000   # beyond this the zoomed epoch is summarised, not drawn batch by batch
MAX_DATASET = 10_000_000


def plural(count: int, word: str) -> str:
    """'1 example', '2 examples', '10,000 examples' (every label the views print)."""
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _integer_axis(ax) -> None:
    """Whole-number ticks with thousands commas and no offset ("1e7") notation."""
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{int(round(x)):,}"))


def timeline_figure(r: TrainingArithmetic, max_epochs: int = 8):
    """Top: the epochs as blocks with their update counts. Bottom: one epoch, batch by batch, updates marked."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.0, 3.4), gridspec_kw={"height_ratios": [1, 1.4]})
    shown = min(r.epochs, max_epochs)
    for e in range(shown):
        top.barh(0, 1, left=e, height=0.6, color="#90caf9" if e % 2 == 0 else "#64b5f6", edgecolor="white")
        top.text(e + 0.5, 0, f"epoch {e + 1}\n{r.updates_per_epoch:,} upd", ha="center", va="center", fontsize=8)
    if r.epochs > shown:
        top.text(shown + 0.1, 0, f"… {r.epochs - shown:,} more", va="center", fontsize=8)
    top.set_xlim(0, max(shown, 1) + (1.6 if r.epochs > shown else 0))
    top.set_axis_off()
    top.set_title(f"{plural(r.epochs, 'epoch')} × {plural(r.iters_per_epoch, 'iteration')} = "
                  f"{plural(r.total_micro_steps, 'micro-step')}, {plural(r.total_weight_updates, 'weight update')}",
                  fontsize=9)
    n = r.samples_per_rank
    bottom.set_xlim(0, max(n, 1) * 1.02)
    bottom.set_ylim(-0.2, 1.6)
    bottom.set_yticks([])
    _integer_axis(bottom)
    bottom.set_xlabel("examples of one epoch" + (" (one rank)" if r.world_size > 1 else ""))
    rows = epoch_timeline(r) if r.iters_per_epoch <= MAX_DRAWN_BATCHES else []
    if rows:
        bottom.broken_barh([(s, z) for s, z, _, _ in rows], (0, 0.6),
                           facecolors=[("#bbdefb", "#90caf9")[i % 2] for i in range(len(rows))],
                           edgecolor="white", linewidth=0.5)
        ups = [s + z for s, z, u, f in rows if u and not f]
        flush = [s + z for s, z, u, f in rows if f]
        bottom.scatter(ups, [0.85] * len(ups), marker="v", color="#2e7d32", s=18, label="optimizer.step()")
        if flush:
            bottom.scatter(flush, [0.85] * len(flush), marker="v", color="#ef6c00", s=40,
                           label=f"flush: window of {r.last_window_size} < K={r.accum_steps}")
        bottom.legend(loc="upper left", fontsize=8, ncol=2, frameon=False)
    elif r.iters_per_epoch:
        bottom.barh(0.3, r.examples_per_epoch, height=0.6, color="#bbdefb")
        bottom.text(n / 2, 1.2, f"{r.iters_per_epoch:,} batches: too many to draw one by one", ha="center",
                    fontsize=8)
    if r.dropped_per_epoch:
        width = max(r.dropped_per_epoch, n * 0.012)    # never an invisible sliver
        bottom.barh(0.3, width, left=n - width, height=0.6, color="#e0e0e0", hatch="///", edgecolor="#757575")
        scale = "" if width == r.dropped_per_epoch else " (drawn wider)"
        bottom.text(n, -0.12, f"{r.dropped_per_epoch:,} dropped{scale}", ha="right", va="top", fontsize=8,
                    color="#616161")
    if not r.iters_per_epoch:
        bottom.text(n / 2, 1.0, "drop_last leaves no complete batch: no step at all", ha="center", fontsize=9,
                    color="#8a1c1c")
    fig.tight_layout()
    return fig


def _ticks(total: int, count: int = 5) -> list[int]:
    """Round whole-number tick positions from 0 to `total`."""
    if total <= 0:
        return [0]
    raw = total / count
    magnitude = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return list(range(0, total + 1, max(int(step), 1)))


def timeline_svg(r: TrainingArithmetic, max_epochs: int = 8, width: int = 760) -> str:
    """The calculator's timeline as SVG (drawn in milliseconds; the same picture as timeline_figure)."""
    parts, left, plot = [], 10, width - 20
    shown = min(r.epochs, max_epochs)
    block = plot / (shown + (1.4 if r.epochs > shown else 0))
    title = (f"{plural(r.epochs, 'epoch')} × {plural(r.iters_per_epoch, 'iteration')} = "
             f"{plural(r.total_micro_steps, 'micro-step')}, {plural(r.total_weight_updates, 'weight update')}")
    parts.append(f'<text x="{width / 2}" y="16" font-size="13" text-anchor="middle">{html.escape(title)}</text>')
    per_epoch = plural(r.updates_per_epoch, "update")
    fits = len(per_epoch) * 6.5 < block - 6          # else said once, under the blocks
    for e in range(shown):
        x = left + e * block
        parts.append(f'<rect x="{x:.1f}" y="26" width="{block - 2:.1f}" height="34" '
                     f'fill="{"#90caf9" if e % 2 == 0 else "#64b5f6"}"/>'
                     f'<text x="{x + block / 2:.1f}" y="{41 if fits else 47}" font-size="12" text-anchor="middle">'
                     f'epoch {e + 1}</text>'
                     + (f'<text x="{x + block / 2:.1f}" y="55" font-size="11" text-anchor="middle">{per_epoch}</text>'
                        if fits else ""))
    if r.epochs > shown:
        parts.append(f'<text x="{left + shown * block + 6:.1f}" y="47" font-size="12">… {r.epochs - shown:,} more</text>')
    if not fits:
        parts.append(f'<text x="{left}" y="74" font-size="11">each epoch: {per_epoch}</text>')
    n = max(r.samples_per_rank, 1)
    y0, bar_h = 104, 26

    def x(examples: float) -> float:
        return left + plot * examples / n

    rows = epoch_timeline(r) if r.iters_per_epoch <= MAX_DRAWN_BATCHES else []
    if rows:
        for i, (start, size, _, _) in enumerate(rows):
            parts.append(f'<rect x="{x(start):.2f}" y="{y0}" width="{max(x(start + size) - x(start) - 0.3, 0.4):.2f}" '
                         f'height="{bar_h}" fill="{("#bbdefb", "#90caf9")[i % 2]}"/>')
        for start, size, update, flush in rows:
            if update:
                cx, colour, s = x(start + size), "#ef6c00" if flush else "#2e7d32", 6 if flush else 4
                parts.append(f'<path d="M{cx - s:.1f},{y0 - 12 - s} L{cx + s:.1f},{y0 - 12 - s} L{cx:.1f},{y0 - 12}Z" '
                             f'fill="{colour}"/>')
    elif r.iters_per_epoch:
        parts.append(f'<rect x="{left}" y="{y0}" width="{x(r.examples_per_epoch) - left:.1f}" height="{bar_h}" '
                     f'fill="#bbdefb"/><text x="{width / 2}" y="{y0 + 17}" font-size="12" text-anchor="middle">'
                     f'{r.iters_per_epoch:,} batches: too many to draw one by one</text>')
    else:
        parts.append(f'<text x="{width / 2}" y="{y0 + 17}" font-size="12" text-anchor="middle" fill="#8a1c1c">'
                     'drop_last leaves no complete batch: no step at all</text>')
    if r.dropped_per_epoch:
        w_drop = max(x(r.dropped_per_epoch) - left, 6)   # never an invisible sliver
        parts.append(f'<rect x="{left + plot - w_drop:.1f}" y="{y0}" width="{w_drop:.1f}" height="{bar_h}" '
                     f'fill="url(#hatch)" stroke="#757575"/>')
        wider = " (drawn wider)" if w_drop > x(r.dropped_per_epoch) - left + 0.01 else ""
        parts.append(f'<text x="{left + plot}" y="{y0 + bar_h + 30}" font-size="11" text-anchor="end" fill="#616161">'
                     f'{r.dropped_per_epoch:,} dropped{wider}</text>')
    ticks = _ticks(r.samples_per_rank)
    for t in ticks:
        anchor = "end" if t == ticks[-1] and t > 0 else ("start" if t == 0 else "middle")
        parts.append(f'<line x1="{x(t):.1f}" y1="{y0 + bar_h}" x2="{x(t):.1f}" y2="{y0 + bar_h + 4}" stroke="#555"/>'
                     f'<text x="{x(t):.1f}" y="{y0 + bar_h + 16}" font-size="11" text-anchor="{anchor}">{t:,}</text>')
    axis = "examples of one epoch" + (" (one rank)" if r.world_size > 1 else "")
    legend = (('<span style="color:#2e7d32">▼</span> optimizer.step()' if rows else "")
              + (f' <span style="color:#ef6c00">▼</span> flush: window of {r.last_window_size} &lt; K={r.accum_steps}'
                 if rows and r.last_window_size < r.accum_steps else "")
              + (' <span style="color:#9e9e9e">▨</span> dropped (drop_last)' if r.dropped_per_epoch else ""))
    hatch = ('<defs><pattern id="hatch" width="5" height="5" patternUnits="userSpaceOnUse" '
             'patternTransform="rotate(45)"><rect width="5" height="5" fill="#e0e0e0"/>'
             '<line x1="0" y1="0" x2="0" y2="5" stroke="#9e9e9e" stroke-width="2"/></pattern></defs>')
    return (f'<svg viewBox="0 0 {width} 178" width="{width}" height="178" style="max-width:100%" '
            f'xmlns="http://www.w3.org/2000/svg">{hatch}{"".join(parts)}'
            f'<text x="{width / 2}" y="{y0 + bar_h + 32}" font-size="11" text-anchor="middle">{axis}</text></svg>'
            f'<div style="font-size:12px">{legend}</div>')


def step_html(r: TrainingArithmetic, micro_step: int, stage: int) -> str:
    """One micro-step at one stage: where the batch sits in the epoch, what flows, whether the weights change.

    O(1) in the dataset size: the epoch is drawn as one bar (consumed / this batch / its window / still to come).
    """
    size = r.last_batch_size if micro_step == r.iters_per_epoch - 1 else r.batch_size
    start = micro_step * r.batch_size
    window = accumulation_window(micro_step, r.iters_per_epoch, r.accum_steps)
    window_start = window.start * r.batch_size
    total = max(r.samples_per_rank, 1)
    updates = is_update_step(micro_step, r.iters_per_epoch, r.accum_steps)
    position = micro_step % r.accum_steps + 1

    def x(examples: int) -> float:
        return 10 + 560 * examples / total

    bar = (f'<rect x="10" y="52" width="560" height="16" fill="#eeeeee"/>'
           f'<rect x="{x(0):.1f}" y="52" width="{x(window_start) - 10:.1f}" height="16" fill="#c5cae9"/>'
           f'<rect x="{x(window_start):.1f}" y="52" width="{max(x(start) - x(window_start), 0):.1f}" height="16" '
           f'fill="#ffe0b2"/>'
           f'<rect x="{x(start):.1f}" y="50" width="{max(x(start + size) - x(start), 3):.1f}" height="20" '
           f'fill="#1e88e5"/>')
    boxes = []
    for i, name in enumerate(STAGES):
        active = i == stage
        boxes.append(f'<rect x="{10 + i * 112}" y="6" width="104" height="30" rx="5" '
                     f'fill="{"#fff3e0" if active else "#fafafa"}" stroke="{"#ef6c00" if active else "#bdbdbd"}"/>'
                     f'<text x="{62 + i * 112}" y="26" font-size="12" text-anchor="middle">{name}</text>')
    texts = [
        f"{plural(size, 'example')} drawn: batch {micro_step + 1:,} of {r.iters_per_epoch:,}, examples "
        f"{start + 1:,}–{start + size:,} of the epoch's shuffled order ({total:,} per epoch"
        + (", one rank" if r.world_size > 1 else "") + ")",
        f"forward: inputs of shape ({size:,}, features) → logits ({size:,}, classes); the activations are kept "
        "for backward",
        "loss: one number, the mean over the batch" + (", weighted by this micro-batch's share of the window's "
                                                       "examples" if r.accum_steps > 1 else ""),
        "backward: .grad += ∂loss/∂w for every weight" + (f" (micro-batch {position} of {len(window)} in this "
                                                         "window)" if r.accum_steps > 1 else ""),
        ("update: optimizer.step() then zero_grad(): the weights change" if updates else
         f"no update yet: gradients accumulate ({position} of K={r.accum_steps})"),
    ]
    legend = ("<span style='color:#1e88e5'>■</span> this batch "
              "<span style='color:#ffa726'>■</span> earlier batches of its window "
              "<span style='color:#9fa8da'>■</span> earlier windows <span style='color:#bdbdbd'>■</span> still to come")
    return (f'<div style="min-height:118px;max-width:580px">'
            f'<svg viewBox="0 0 580 74" width="580" height="74" xmlns="http://www.w3.org/2000/svg">{"".join(boxes)}'
            f'{bar}</svg><div style="font-size:11px;color:#555">{legend}</div>'
            f'<div style="font-size:13px;margin-top:4px">{html.escape(texts[stage])}</div></div>')


FIELDS = (("dataset_size", "dataset size N"), ("batch_size", "batch size B"), ("epochs", "epochs E"),
          ("accum_steps", "accumulation K"), ("world_size", "world size W"))


class CalculatorView(View):
    """Inputs N, B, E, K, drop_last, W → the counts, the timeline and one animated step."""

    def __init__(self, dataset_size: int = 10_000, batch_size: int = 32, epochs: int = 3, accum_steps: int = 1,
                 drop_last: bool = False, world_size: int = 1):
        values = dict(dataset_size=dataset_size, batch_size=batch_size, epochs=epochs, accum_steps=accum_steps,
                      world_size=world_size)
        for name, label in FIELDS:   # the same box the learner types in takes the starting values
            setattr(self, name, number_box(values[name], label, width="280px"))
        self.drop_last = w.Checkbox(drop_last, description="drop_last", indent=False)
        self.controls = [self.dataset_size, self.batch_size, self.epochs, self.accum_steps, self.world_size,
                         self.drop_last]
        self.numbers = w.HTML(layout=w.Layout(min_height="330px"))
        self.message = w.HTML(layout=w.Layout(min_height="34px"))
        self.timeline = w.HTML(layout=w.Layout(min_height="190px"))
        self.micro_step = w.IntSlider(1, min=1, max=1, description="micro-step", style={"description_width": "80px"})
        self.stage = w.IntSlider(0, min=0, max=len(STAGES) - 1, description="stage", readout=False,
                                 style={"description_width": "80px"})
        self.play = w.Play(value=0, min=0, max=len(STAGES) - 1, interval=900, description="animate one step")
        w.jslink((self.play, "value"), (self.stage, "value"))
        self.step_view = w.HTML(layout=w.Layout(min_height="120px"))
        self.result: TrainingArithmetic | None = None
        self.error: str | None = None
        for control in self.controls:
            control.observe(guarded(self, lambda _: self.update()), names="value")
        for control in (self.micro_step, self.stage):
            control.observe(guarded(self, lambda _: self.draw_step()), names="value")
        self.widget = w.VBox([
            w.HBox([w.VBox(self.controls + [self.message], layout=w.Layout(width="300px")), self.numbers]),
            self.timeline,
            w.HTML("<b>Animate one step</b> — press ▶ or drag the sliders"),
            w.HBox([self.play, self.stage, self.micro_step]),
            self.step_view,
        ])
        self.update()

    def read_inputs(self) -> dict:
        """The boxes' contents as whole numbers; a ValueError in the words on screen otherwise."""
        values = {}
        for name, label in FIELDS:
            values[name] = parse_whole_number(getattr(self, name).value, label, minimum=1,
                                              maximum=MAX_DATASET if name == "dataset_size" else None)
        return values

    def update(self) -> None:
        """Recompute from the inputs; invalid input keeps the last figure (dimmed) under a message."""
        try:
            values = self.read_inputs()
        except ValueError as exc:
            self.show_error(str(exc))
            return
        self.message.value = busy_html("drawing the timeline")
        r = training_arithmetic(drop_last=self.drop_last.value, **values)
        svg = timeline_svg(r)
        table = table_html([(k, f"{v:,}" if not isinstance(v, bool) else v) for k, v in r.rows(False)])
        self.result, self.error = r, None
        self.message.value = ""
        self.numbers.value = table
        self.timeline.value = svg
        for control in (self.micro_step, self.stage, self.play):
            control.disabled = r.iters_per_epoch == 0
        self.micro_step.max = max(r.iters_per_epoch, 1)
        self.draw_step()

    def show_error(self, message: str) -> None:
        """An input the calculator cannot use: say which box and why; dim the last result, disable the sliders."""
        self.result, self.error = None, message
        self.message.value = error_html(message)
        if "opacity" not in self.numbers.value:
            self.numbers.value = stale_html(self.numbers.value, "last valid input:")
            self.timeline.value = stale_html(self.timeline.value, "timeline of the last valid input:")
            self.step_view.value = stale_html(self.step_view.value, "fix the input above to animate a step")
        for control in (self.micro_step, self.stage, self.play):
            control.disabled = True

    def draw_step(self) -> None:
        r = self.result
        if r is None:
            return
        if r.iters_per_epoch == 0:
            self.step_view.value = error_html("drop_last leaves no complete batch: this epoch has no step at all.")
            return
        self.step_view.value = step_html(r, min(self.micro_step.value, r.iters_per_epoch) - 1, self.stage.value)

    def text(self) -> str:
        if self.result is None:
            return f"Training-arithmetic calculator: invalid input: {self.error}"
        r = self.result
        return (f"Training-arithmetic calculator: N={r.dataset_size:,}, B={r.batch_size:,}, E={r.epochs:,}, "
                f"K={r.accum_steps:,}, W={r.world_size:,}, drop_last={r.drop_last}\n"
                f"  {plural(r.iters_per_epoch, 'iteration')} per epoch, {plural(r.updates_per_epoch, 'update')} per "
                f"epoch (with flush), {plural(r.total_weight_updates, 'update')} in all, "
                f"{plural(r.total_examples_seen, 'example')} seen" + (" per rank" if r.world_size > 1 else ""))


def calculator(**kwargs) -> CalculatorView:
    """Show the chapter-0 calculator (keyword arguments set the starting inputs)."""
    return CalculatorView(**kwargs)
