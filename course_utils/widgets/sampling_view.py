"""Chapter 2: sampling strategies (composition bars), the padding view and the DistributedSampler shard view."""
from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np

from course_utils.engine.data import make_imbalanced, make_sequences
from matplotlib.ticker import MaxNLocator

from course_utils.infra.notebook import MAX_SEED, sig
from course_utils.chapters.ch02_sampling import (STRATEGIES, Composition, PaddingStats, ShardView, batch_composition,
                                   padding_stats, shard_view)
from course_utils.widgets.base import (View, busy_html, error_html, guarded, number_box,
                                       parse_whole_number, stale_html, table_html)

_STYLE = {"description_width": "110px"}


def composition_figure(results: list[Composition]):
    """One panel per strategy: stacked bars of majority / minority examples in every batch drawn."""
    fig, axes = plt.subplots(1, len(results), figsize=(9.0, 2.9), sharey=True)
    for ax, c in zip(np.atleast_1d(axes), results):
        counts = np.array(c.counts)
        xs = np.arange(1, len(counts) + 1)
        ax.bar(xs, counts[:, 0], color="#90caf9", label="class 0 (majority)", width=0.85)
        ax.bar(xs, counts[:, 1], bottom=counts[:, 0], color="#ef6c00", label="class 1 (minority)", width=0.85)
        ax.set_title(f"{c.strategy}: minority share {sig(c.share(), 3)}", fontsize=10)
        ax.set_xlabel(f"batch (all {len(counts)})")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        ax.set_xlim(0.4, len(counts) + 0.6)
    np.atleast_1d(axes)[0].set_ylabel("examples")
    np.atleast_1d(axes)[0].yaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=9, frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


MAJOR, MINOR = "#90caf9", "#ef6c00"


def composition_svg(results: list[Composition], panel_w: int = 270, panel_h: int = 170) -> str:
    """The same figure as composition_figure, as SVG: crisp at any width and drawn in microseconds."""
    top = max(max(sum(c) for c in r.counts) for r in results)
    panels = []
    for p, r in enumerate(results):
        x0, n = p * (panel_w + 14), len(r.counts)
        plot_w, plot_h, left, base = panel_w - 34, panel_h - 52, x0 + 30, panel_h - 24
        bar = plot_w / n
        parts = [f'<text x="{x0 + panel_w / 2}" y="14" font-size="12" text-anchor="middle">{r.strategy}: '
                 f'minority share {sig(r.share(), 3)}</text>',
                 f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#999"/>',
                 f'<text x="{left - 4}" y="{base}" font-size="10" text-anchor="end">0</text>',
                 f'<text x="{left - 4}" y="{base - plot_h + 8}" font-size="10" text-anchor="end">{top}</text>']
        for b, (major, minor) in enumerate(r.counts):
            x = left + b * bar
            h0, h1 = plot_h * major / top, plot_h * minor / top
            parts.append(f'<rect x="{x:.1f}" y="{base - h0:.1f}" width="{max(bar * 0.85, 0.8):.1f}" '
                         f'height="{h0:.1f}" fill="{MAJOR}"/>')
            if minor:
                parts.append(f'<rect x="{x:.1f}" y="{base - h0 - h1:.1f}" width="{max(bar * 0.85, 0.8):.1f}" '
                             f'height="{h1:.1f}" fill="{MINOR}"/>')
        parts.append(f'<text x="{left}" y="{base + 14}" font-size="10">1</text>'
                     f'<text x="{left + plot_w}" y="{base + 14}" font-size="10" text-anchor="end">{n}</text>'
                     f'<text x="{left + plot_w / 2}" y="{base + 14}" font-size="10" text-anchor="middle">'
                     f'batch (all {n})</text>')
        panels.append("".join(parts))
    width = len(results) * (panel_w + 14)
    legend = (f"<div style='font-size:12px'><span style='color:{MAJOR}'>■</span> class 0 (majority) "
              f"<span style='color:{MINOR}'>■</span> class 1 (minority) · bar height = examples in that batch</div>")
    return (legend + f'<svg viewBox="0 0 {width} {panel_h}" width="{width}" height="{panel_h}" '
            f'style="max-width:100%" xmlns="http://www.w3.org/2000/svg">{"".join(panels)}</svg>')


def padding_svg(stats: PaddingStats, shown: int = 6, panel_w: int = 130, panel_h: int = 150) -> str:
    """The first padded batches on one length scale, as SVG: a row per sequence, dark = real, light = padding."""
    masks = stats.masks[:shown]
    longest = max(m.shape[1] for m in masks)
    panels = []
    for k, mask in enumerate(masks):
        x0 = k * (panel_w + 10)
        rows, length = mask.shape
        row_h = (panel_h - 40) / rows
        parts = [f'<text x="{x0}" y="12" font-size="11">batch {k + 1}: ({rows}, {length})</text>',
                 f'<rect x="{x0}" y="20" width="{panel_w}" height="{panel_h - 40}" fill="none" stroke="#eee"/>']
        real = mask.sum(dim=1).tolist()
        for r, n_real in enumerate(real):
            y = 20 + r * row_h
            real_w = panel_w * n_real / longest
            pad_w = panel_w * (length - n_real) / longest
            parts.append(f'<rect x="{x0}" y="{y:.1f}" width="{real_w:.1f}" height="{max(row_h - 0.5, 0.5):.1f}" '
                         f'fill="#1565c0"/>')
            if pad_w:
                parts.append(f'<rect x="{x0 + real_w:.1f}" y="{y:.1f}" width="{pad_w:.1f}" '
                             f'height="{max(row_h - 0.5, 0.5):.1f}" fill="#bbdefb"/>')
        parts.append(f'<text x="{x0}" y="{panel_h - 6}" font-size="10">0</text>'
                     f'<text x="{x0 + panel_w}" y="{panel_h - 6}" font-size="10" text-anchor="end">{longest} tokens'
                     "</text>")
        panels.append("".join(parts))
    width = len(masks) * (panel_w + 10)
    what = "bucketed" if stats.bucketing else "shuffled"
    title = (f"<div style='font-size:12px'>first {len(masks)} of {len(stats.masks)} {what} batches, all on one "
             f"length scale: <span style='color:#1565c0'>■</span> real token <span style='color:#90caf9'>■</span> "
             f"padding · waste {sig(100 * stats.waste, 3)}%</div>")
    return (title + f'<svg viewBox="0 0 {width} {panel_h}" width="{width}" height="{panel_h}" style="max-width:100%" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(panels)}</svg>')


def _seed_box(seed: int) -> w.Text:
    return number_box(seed, "seed", width="240px", label_width="110px")


class SamplingView(View):
    """Sequential, shuffled and weighted sampling of the 900/100 dataset: what each batch holds."""

    def __init__(self, batch_size: int = 32, n_batches: int = 30, replacement: bool = True, seed: int = 0):
        self.labels = make_imbalanced().tensors[1]
        self.batch_size = w.IntSlider(batch_size, min=1, max=128, description="batch size", style=_STYLE,
                                      continuous_update=False)
        self.n_batches = w.IntSlider(n_batches, min=1, max=40, description="batches", style=_STYLE,
                                     continuous_update=False)
        self.replacement = w.Checkbox(replacement, description="weighted: replacement", indent=False)
        self.seed = _seed_box(seed)
        self.resample = w.Button(description="New seed", icon="random")
        self.controls = [self.batch_size, self.n_batches, self.replacement, self.seed]
        self.message = w.HTML(layout=w.Layout(min_height="34px"))
        self.output = w.HTML(layout=w.Layout(min_height="420px"))
        self.results: list[Composition] = []
        self.error: str | None = None
        self.last_seed = seed
        for control in self.controls:
            control.observe(guarded(self, lambda _: self.update()), names="value")
        self.resample.on_click(guarded(self, lambda _: self.new_seed()))
        self.widget = w.VBox([w.HBox([w.VBox(self.controls[:2]), w.VBox([self.replacement, self.seed, self.resample])]),
                              self.message, self.output])
        self.update()

    def new_seed(self) -> None:
        """The next seed after the last one that worked (wrapping at the largest seed)."""
        self.seed.value = str((self.last_seed + 1) % (MAX_SEED + 1))

    def update(self) -> None:
        try:
            seed = parse_whole_number(self.seed.value, "seed", minimum=0, maximum=MAX_SEED)
        except ValueError as exc:
            self.show_error(str(exc))
            return
        self.message.value = busy_html("drawing new batches")
        n_max = -(-len(self.labels) // self.batch_size.value)
        n_batches = min(self.n_batches.value, n_max)
        results = [batch_composition(self.labels, s, self.batch_size.value, n_batches,
                                     replacement=self.replacement.value, seed=seed) for s in STRATEGIES]
        table = table_html([(c.strategy, len(c.counts), c.totals[0], c.totals[1], sig(c.share(), 3),
                             sig(c.mean_count(), 3), c.distinct) for c in results],
                           ("sampler", "batches", "class 0", "class 1", "minority share",
                            "minority / batch", "distinct examples"))
        figure = composition_svg(results)
        note = (f"<i>{n_batches} batches: one epoch at batch size {self.batch_size.value} holds at most {n_max}, "
                "so the sequential and shuffled samplers stop there.</i>" if n_batches < self.n_batches.value else "")
        # table, titles and figure come from the same draw and arrive as one update
        self.results, self.error, self.last_seed = results, None, seed
        self.output.value = note + table + figure
        self.message.value = ""

    def show_error(self, message: str) -> None:
        self.results, self.error = [], message
        self.message.value = error_html(message + " (New seed starts again from the last seed that worked)")
        if "opacity" not in self.output.value:
            self.output.value = stale_html(self.output.value, "last valid seed:")

    def text(self) -> str:
        if not self.results:
            return f"Sampling view: invalid input: {self.error}"
        lines = [f"Sampling view: 900/100 dataset, batch_size={self.batch_size.value}, "
                 f"replacement={self.replacement.value}, seed={self.last_seed}"]
        for c in self.results:
            lines.append(f"  {c.strategy:<10} {len(c.counts)} batches, class counts {c.totals}, minority share "
                         f"{sig(c.share(), 3)}, first batches {c.counts[:3]}")
        return "\n".join(lines)


def padding_figure(stats: PaddingStats, shown: int = 6):
    """The first padded batches as grids on one length scale: real tokens dark, padding light."""
    masks = stats.masks[:shown]
    longest = max(m.shape[1] for m in masks)
    fig, axes = plt.subplots(1, len(masks), figsize=(9.0, 2.6), sharey=False)
    for k, (ax, mask) in enumerate(zip(np.atleast_1d(axes), masks)):
        ax.imshow(mask.numpy(), cmap="Blues", vmin=-0.3, vmax=1.2, aspect="auto", interpolation="nearest",
                  extent=(0, mask.shape[1], mask.shape[0], 0))
        ax.set_xlim(0, longest)      # one length scale: a short batch looks short
        ax.set_title(f"batch {k + 1}: {tuple(mask.shape)}", fontsize=9)
        ax.set_yticks([])
        ax.set_xticks([0, longest])
        ax.tick_params(labelsize=8)
        ax.grid(False)
    what = "bucketed" if stats.bucketing else "shuffled"
    fig.suptitle(f"first {len(masks)} of {len(stats.masks)} {what} batches (x = tokens, same scale); "
                 f"dark = real, light = padding; waste {sig(100 * stats.waste, 3)}%", fontsize=10)
    fig.tight_layout()
    return fig


class PaddingView(View):
    """Variable-length sequences through pad_collate: how much of each batch is padding, shuffled vs bucketed."""

    def __init__(self, batch_size: int = 16, bucketing: bool = False, max_len: int = 40, seed: int = 0):
        self.batch_size = w.IntSlider(batch_size, min=1, max=64, description="batch size", style=_STYLE,
                                      continuous_update=False)
        self.max_len = w.IntSlider(max_len, min=3, max=100, description="longest sequence", style=_STYLE,
                                   continuous_update=False)
        self.bucketing = w.Checkbox(bucketing, description="bucket by length", indent=False)
        self.seed = _seed_box(seed)
        self.controls = [self.batch_size, self.max_len, self.bucketing, self.seed]
        self.message = w.HTML(layout=w.Layout(min_height="34px"))
        self.output = w.HTML(layout=w.Layout(min_height="330px"))
        self.stats: PaddingStats | None = None
        self.error: str | None = None
        for control in self.controls:
            control.observe(guarded(self, lambda _: self.update()), names="value")
        self.widget = w.VBox([w.HBox([w.VBox(self.controls[:2]), w.VBox(self.controls[2:])]), self.message,
                              self.output])
        self.update()

    def update(self) -> None:
        try:
            seed = parse_whole_number(self.seed.value, "seed", minimum=0, maximum=MAX_SEED)
        except ValueError as exc:
            self.show_error(str(exc))
            return
        self.message.value = busy_html()
        data = make_sequences(200, 3, self.max_len.value, 50, seed=seed)
        s = padding_stats(data, self.batch_size.value, self.bucketing.value, seed=seed)
        table = table_html([("batches", len(s.masks)), ("real tokens", s.real_tokens),
                            ("slots after padding", s.padded_tokens), ("padding", s.pad_tokens),
                            ("waste", f"{sig(100 * s.waste, 3)}%")])
        figure = padding_svg(s)
        self.stats, self.error, self.seed_used = s, None, seed
        self.output.value = table + figure
        self.message.value = ""

    def show_error(self, message: str) -> None:
        self.stats, self.error = None, message
        self.message.value = error_html(message)
        if "opacity" not in self.output.value:
            self.output.value = stale_html(self.output.value, "last valid seed:")

    def text(self) -> str:
        s = self.stats
        if s is None:
            return f"Padding view: invalid input: {self.error}"
        return (f"Padding view: 200 sequences of 3..{self.max_len.value} tokens, batch_size={s.batch_size}, "
                f"{'bucketed' if s.bucketing else 'shuffled'}: {s.real_tokens} real tokens in {s.padded_tokens} slots, "
                f"waste {sig(100 * s.waste, 3)}%")


def padding_positions(view: ShardView) -> set[tuple[int, int]]:
    """(rank, slot) cells that hold a padding copy: DistributedSampler pads its index list at the END, then
    deals position p to rank p % W, slot p // W; positions >= N are the copies (drop_last=False)."""
    if view.drop_last:
        return set()
    return {(p % view.world_size, p // view.world_size)
            for p in range(view.n, view.per_rank * view.world_size)}


def shard_html(view: ShardView) -> str:
    """One row per rank: its indices as cells; padding copies outlined in red (exactly `padding` of them)."""
    copies = padding_positions(view)
    colours = ("#bbdefb", "#ffe0b2", "#c8e6c9", "#f8bbd0", "#d1c4e9", "#fff59d", "#b2ebf2", "#ffccbc")
    rows = []
    for r, shard in enumerate(view.shards):
        cells = "".join(
            f"<span style='display:inline-block;min-width:26px;margin:1px;padding:2px 3px;text-align:center;"
            f"border-radius:3px;background:{colours[r % len(colours)]};"
            f"{'outline:2px solid #c62828;' if (r, k) in copies else ''}'>{index}</span>"
            for k, index in enumerate(shard))
        rows.append(f"<div style='white-space:normal'><b style='display:inline-block;width:56px'>rank {r}</b>"
                    f"{cells or '<i>no indices</i>'}</div>")
    title = (f"<div style='font-size:13px;margin:4px 0'>epoch {view.epoch}: "
             f"{view.per_rank} {'index' if view.per_rank == 1 else 'indices'} per rank; red outline = a padding "
             f"copy ({view.padding}), an index some rank already has</div>")
    return title + "<div style='font-family:monospace;font-size:12px;max-width:860px'>" + "".join(rows) + "</div>"


class DistributedView(View):
    """DistributedSampler for W ranks: each rank's shard, the padding copies, what set_epoch changes."""

    def __init__(self, n: int = 10, world_size: int = 4, shuffle: bool = True, drop_last: bool = False,
                 epoch: int = 0, call_set_epoch: bool = True, seed: int = 0):
        self.n = w.IntSlider(n, min=1, max=60, description="examples N", style=_STYLE)
        self.world_size = w.IntSlider(world_size, min=1, max=8, description="ranks W", style=_STYLE)
        self.epoch = w.IntSlider(epoch, min=0, max=20, description="epoch", style=_STYLE)
        self.shuffle = w.Checkbox(shuffle, description="shuffle", indent=False)
        self.drop_last = w.Checkbox(drop_last, description="drop_last", indent=False)
        self.call_set_epoch = w.Checkbox(call_set_epoch, description="call set_epoch(epoch)", indent=False)
        self.next_epoch = w.Button(description="Next epoch", icon="forward")
        self.controls = [self.n, self.world_size, self.epoch, self.shuffle, self.drop_last, self.call_set_epoch]
        self.message = w.HTML(layout=w.Layout(min_height="34px"))
        self.output = w.HTML(layout=w.Layout(min_height="260px"))
        self.seed = seed
        self.view: ShardView | None = None
        for control in self.controls:
            control.observe(guarded(self, lambda _: self.update()), names="value")
        self.next_epoch.on_click(guarded(self, lambda _: setattr(self.epoch, "value",
                                                                  min(self.epoch.value + 1, self.epoch.max))))
        self.widget = w.VBox([w.HBox([w.VBox(self.controls[:3]), w.VBox(self.controls[3:] + [self.next_epoch])]),
                              self.message, self.output])
        self.update()

    def update(self) -> None:
        v = shard_view(self.n.value, self.world_size.value, self.shuffle.value, seed=self.seed,
                       epoch=self.epoch.value, drop_last=self.drop_last.value, call_set_epoch=self.call_set_epoch.value)
        table = table_html([("indices per rank", v.per_rank), ("padding copies", v.padding),
                            ("dropped", v.dropped), ("indices on two ranks", ", ".join(map(str, v.duplicates)) or "none")])
        self.view = v
        self.output.value = table + shard_html(v)
        at_end = self.epoch.value >= self.epoch.max
        self.next_epoch.disabled = at_end
        self.message.value = (f"<i>epoch {self.epoch.max} is the last one this view shows</i>" if at_end else "")

    def show_error(self, message: str) -> None:
        self.message.value = error_html(message)

    def text(self) -> str:
        v = self.view
        lines = [f"DistributedSampler view: N={v.n}, W={v.world_size}, shuffle={v.shuffle}, drop_last={v.drop_last}, "
                 f"epoch={v.epoch}, set_epoch called={self.call_set_epoch.value}"]
        lines += [f"  rank {r}: {shard}" for r, shard in enumerate(v.shards)]
        lines.append(f"padding copies {v.padding}, dropped {v.dropped}, seen twice {v.duplicates}")
        return "\n".join(lines)


def sampling_strategies(**kwargs) -> SamplingView:
    """Show chapter 2's sampling-strategies view."""
    return SamplingView(**kwargs)


def padding(**kwargs) -> PaddingView:
    """Show chapter 2's padding view."""
    return PaddingView(**kwargs)


def distributed(**kwargs) -> DistributedView:
    """Show chapter 2's DistributedSampler view."""
    return DistributedView(**kwargs)
