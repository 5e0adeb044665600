"""Chapter 2: sampling strategies (composition bars), the padding view and the DistributedSampler shard view."""
from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np

from course_utils.data import make_imbalanced, make_sequences
from course_utils.notebook import sig
from course_utils.sampling import (STRATEGIES, Composition, PaddingStats, ShardView, batch_composition,
                                   padding_stats, shard_view)
from course_utils.widgets.base import View, error_html, figure_png, table_html

SHOWN_BATCHES = 20
_STYLE = {"description_width": "110px"}


def composition_figure(results: list[Composition]):
    """One panel per strategy: stacked bars of majority / minority examples in the first batches."""
    fig, axes = plt.subplots(1, len(results), figsize=(9.0, 2.6), sharey=True)
    for ax, c in zip(np.atleast_1d(axes), results):
        counts = np.array(c.counts[:SHOWN_BATCHES])
        xs = np.arange(1, len(counts) + 1)
        ax.bar(xs, counts[:, 0], color="#90caf9", label="class 0 (majority)")
        ax.bar(xs, counts[:, 1], bottom=counts[:, 0], color="#ef6c00", label="class 1 (minority)")
        ax.set_title(f"{c.strategy}: minority share {sig(c.share(), 3)}", fontsize=9)
        ax.set_xlabel("batch")
    np.atleast_1d(axes)[0].set_ylabel("examples")
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


class SamplingView(View):
    """Sequential, shuffled and weighted sampling of the 900/100 dataset: what each batch holds."""

    def __init__(self, batch_size: int = 32, n_batches: int = 30, replacement: bool = True, seed: int = 0):
        self.labels = make_imbalanced().tensors[1]
        self.batch_size = w.IntSlider(batch_size, min=1, max=128, description="batch size", style=_STYLE)
        self.n_batches = w.IntSlider(n_batches, min=1, max=31, description="batches", style=_STYLE)
        self.replacement = w.Checkbox(replacement, description="weighted: replacement", indent=False)
        self.seed = w.IntText(seed, description="seed", style=_STYLE, layout=w.Layout(width="220px"))
        self.resample = w.Button(description="New seed", icon="random")
        self.controls = [self.batch_size, self.n_batches, self.replacement, self.seed]
        self.message, self.table = w.HTML(), w.HTML()
        self.image = w.Image(format="png", layout=w.Layout(width="760px"))
        self.results: list[Composition] = []
        self.error: str | None = None
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        self.resample.on_click(lambda _: setattr(self.seed, "value", self.seed.value + 1))
        self.widget = w.VBox([w.HBox([w.VBox(self.controls[:2]), w.VBox([self.replacement, self.seed, self.resample])]),
                              self.message, self.table, self.image])
        self.update()

    def update(self) -> None:
        try:
            n_max = -(-len(self.labels) // self.batch_size.value)
            n_batches = min(self.n_batches.value, n_max)
            self.results = [batch_composition(self.labels, s, self.batch_size.value, n_batches,
                                              replacement=self.replacement.value, seed=self.seed.value)
                            for s in STRATEGIES]
        except ValueError as exc:
            self.results, self.error = [], str(exc)
            self.message.value, self.table.value, self.image.value = error_html(str(exc)), "", b""
            return
        self.error = None
        self.message.value = (f"<i>{n_batches} batches (one epoch holds at most {n_max})</i>"
                              if n_batches < self.n_batches.value else "")
        self.table.value = table_html([(c.strategy, len(c.counts), c.totals[0], c.totals[1], sig(c.share(), 3),
                                        sig(c.mean_count(), 3), c.distinct) for c in self.results],
                                      ("sampler", "batches", "class 0", "class 1", "minority share",
                                       "minority / batch", "distinct examples"))
        self.image.value = figure_png(composition_figure(self.results))

    def text(self) -> str:
        if not self.results:
            return f"Sampling view: invalid input: {self.error}"
        lines = [f"Sampling view: 900/100 dataset, batch_size={self.batch_size.value}, "
                 f"replacement={self.replacement.value}, seed={self.seed.value}"]
        for c in self.results:
            lines.append(f"  {c.strategy:<10} {len(c.counts)} batches, class counts {c.totals}, minority share "
                         f"{sig(c.share(), 3)}, first batches {c.counts[:3]}")
        return "\n".join(lines)


def padding_figure(stats: PaddingStats, shown: int = 6):
    """The first padded batches as grids: real tokens dark, padding light."""
    masks = stats.masks[:shown]
    fig, axes = plt.subplots(1, len(masks), figsize=(9.0, 2.2), sharey=False)
    for k, (ax, mask) in enumerate(zip(np.atleast_1d(axes), masks)):
        ax.imshow(mask.numpy(), cmap="Blues", vmin=-0.3, vmax=1.2, aspect="auto", interpolation="nearest")
        ax.set_title(f"batch {k + 1}: {tuple(mask.shape)}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    fig.suptitle(f"{'bucketed' if stats.bucketing else 'shuffled'} batches: dark = real token, light = padding; "
                 f"waste {sig(100 * stats.waste, 3)}%", fontsize=9)
    fig.tight_layout()
    return fig


class PaddingView(View):
    """Variable-length sequences through pad_collate: how much of each batch is padding, shuffled vs bucketed."""

    def __init__(self, batch_size: int = 16, bucketing: bool = False, max_len: int = 40, seed: int = 0):
        self.batch_size = w.IntSlider(batch_size, min=1, max=64, description="batch size", style=_STYLE)
        self.max_len = w.IntSlider(max_len, min=3, max=100, description="longest sequence", style=_STYLE)
        self.bucketing = w.Checkbox(bucketing, description="bucket by length", indent=False)
        self.seed = w.IntText(seed, description="seed", style=_STYLE, layout=w.Layout(width="220px"))
        self.controls = [self.batch_size, self.max_len, self.bucketing, self.seed]
        self.numbers = w.HTML()
        self.image = w.Image(format="png", layout=w.Layout(width="760px"))
        self.stats: PaddingStats | None = None
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        self.widget = w.VBox([w.HBox([w.VBox(self.controls[:2]), w.VBox(self.controls[2:])]), self.numbers,
                              self.image])
        self.update()

    def update(self) -> None:
        data = make_sequences(200, 3, self.max_len.value, 50, seed=self.seed.value)
        self.stats = s = padding_stats(data, self.batch_size.value, self.bucketing.value, seed=self.seed.value)
        self.numbers.value = table_html([("batches", len(s.masks)), ("real tokens", s.real_tokens),
                                         ("slots after padding", s.padded_tokens), ("padding", s.pad_tokens),
                                         ("waste", f"{sig(100 * s.waste, 3)}%")])
        self.image.value = figure_png(padding_figure(s))

    def text(self) -> str:
        s = self.stats
        return (f"Padding view: 200 sequences of 3..{self.max_len.value} tokens, batch_size={s.batch_size}, "
                f"{'bucketed' if s.bucketing else 'shuffled'}: {s.real_tokens} real tokens in {s.padded_tokens} slots, "
                f"waste {sig(100 * s.waste, 3)}%")


def shard_figure(view: ShardView):
    """One row per rank: its indices as cells; padding duplicates outlined in red."""
    dup = set(view.duplicates)
    fig, ax = plt.subplots(figsize=(min(8.0, 2.5 + 0.5 * view.per_rank), 0.45 * view.world_size + 0.8))
    for r, shard in enumerate(view.shards):
        for k, index in enumerate(shard):
            ax.add_patch(plt.Rectangle((k, -r), 0.92, 0.85, color=plt.get_cmap("tab10")(r % 10), alpha=0.35))
            if index in dup:
                ax.add_patch(plt.Rectangle((k, -r), 0.92, 0.85, fill=False, ec="#c62828", lw=1.5))
            ax.text(k + 0.46, -r + 0.42, str(index), ha="center", va="center", fontsize=6)
        ax.text(-0.3, -r + 0.42, f"rank {r}", ha="right", va="center", fontsize=8)
    ax.set_xlim(-2.2, max(view.per_rank, 1))
    ax.set_ylim(-view.world_size + 0.8, 1.0)
    ax.set_axis_off()
    ax.set_title(f"epoch {view.epoch}: {view.per_rank} indices per rank; red = seen twice (padding)", fontsize=9)
    fig.tight_layout()
    return fig


class DistributedView(View):
    """DistributedSampler for W ranks: each rank's shard, the padding copies, what set_epoch changes."""

    def __init__(self, n: int = 10, world_size: int = 4, shuffle: bool = True, drop_last: bool = False,
                 epoch: int = 0, call_set_epoch: bool = True, seed: int = 0):
        self.n = w.IntSlider(n, min=1, max=60, description="examples N", style=_STYLE)
        self.world_size = w.IntSlider(world_size, min=1, max=8, description="ranks W", style=_STYLE)
        self.epoch = w.IntSlider(epoch, min=0, max=9, description="epoch", style=_STYLE)
        self.shuffle = w.Checkbox(shuffle, description="shuffle", indent=False)
        self.drop_last = w.Checkbox(drop_last, description="drop_last", indent=False)
        self.call_set_epoch = w.Checkbox(call_set_epoch, description="call set_epoch(epoch)", indent=False)
        self.next_epoch = w.Button(description="Next epoch", icon="forward")
        self.controls = [self.n, self.world_size, self.epoch, self.shuffle, self.drop_last, self.call_set_epoch]
        self.numbers = w.HTML()
        self.image = w.Image(format="png", layout=w.Layout(width="720px"))
        self.view: ShardView | None = None
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        self.next_epoch.on_click(lambda _: setattr(self.epoch, "value", min(self.epoch.value + 1, self.epoch.max)))
        self.widget = w.VBox([w.HBox([w.VBox(self.controls[:3]), w.VBox(self.controls[3:] + [self.next_epoch])]),
                              self.numbers, self.image])
        self.update()

    def update(self) -> None:
        self.view = v = shard_view(self.n.value, self.world_size.value, self.shuffle.value, epoch=self.epoch.value,
                                   drop_last=self.drop_last.value, call_set_epoch=self.call_set_epoch.value)
        self.numbers.value = table_html([("indices per rank", v.per_rank), ("padding copies", v.padding),
                                         ("dropped", v.dropped), ("seen twice", v.duplicates or "none")])
        self.image.value = figure_png(shard_figure(v))

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
