"""Chapter 1: the Dataset -> Sampler -> BatchSampler -> collate view (which index lands in which batch)."""
from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt

from course_utils.pipeline import PipelineTrace, trace_pipeline
from course_utils.widgets.base import View, error_html, figure_png, table_html

MAX_N = 400
MAX_SHOWN_BATCHES = 12


def pipeline_figure(trace: PipelineTrace, epoch: int):
    """Every example as a cell in sampler order, coloured by the batch it lands in; skipped ones hatched."""
    e = trace.epochs[epoch - 1]
    where = {i: b for b, batch in enumerate(e.batches) for i in batch}
    cols = 20
    rows = -(-trace.n // cols)
    fig, ax = plt.subplots(figsize=(8.0, 0.35 * rows + 0.8))
    cmap = plt.get_cmap("tab20")
    for pos, index in enumerate(e.sampler_order):
        r, c = divmod(pos, cols)
        b = where.get(index)
        colour = cmap(b % 20) if b is not None else "#eeeeee"
        ax.add_patch(plt.Rectangle((c, -r), 0.95, 0.9, color=colour, hatch=None if b is not None else "///",
                                   ec="#9e9e9e" if b is None else None))
        ax.text(c + 0.47, -r + 0.45, str(index), ha="center", va="center", fontsize=6)
    ax.set_xlim(0, cols)
    ax.set_ylim(-rows + 0.8, 1.1)
    ax.set_axis_off()
    ax.set_title(f"epoch {epoch}: the sampler's order, left to right; colour = batch; hatched = dropped", fontsize=9)
    fig.tight_layout()
    return fig


class PipelineView(View):
    """Controls N, batch size, shuffle, drop_last, seed; Next epoch shows the next pass of the same loader."""

    def __init__(self, n: int = 100, batch_size: int = 16, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0):
        style = {"description_width": "90px"}
        self.n = w.IntText(n, description="examples N", style=style, layout=w.Layout(width="200px"))
        self.batch_size = w.IntSlider(batch_size, min=1, max=64, description="batch size", style=style)
        self.shuffle = w.Checkbox(shuffle, description="shuffle", indent=False)
        self.drop_last = w.Checkbox(drop_last, description="drop_last", indent=False)
        self.seed = w.IntText(seed, description="seed", style=style, layout=w.Layout(width="200px"))
        self.next_epoch = w.Button(description="Next epoch", icon="forward")
        self.controls = [self.n, self.batch_size, self.shuffle, self.drop_last, self.seed]
        self.message = w.HTML()
        self.stages = w.HTML()
        self.image = w.Image(format="png", layout=w.Layout(width="720px"))
        self.epoch = 1
        self.trace: PipelineTrace | None = None
        self.error: str | None = None
        for control in self.controls:
            control.observe(lambda _: self.update(reset_epoch=True), names="value")
        self.next_epoch.on_click(lambda _: self.advance())
        self.widget = w.VBox([w.HBox([w.VBox(self.controls[:2] + [self.seed]),
                                      w.VBox([self.shuffle, self.drop_last, self.next_epoch])]),
                              self.message, self.stages, self.image])
        self.update(reset_epoch=True)

    def advance(self) -> None:
        """One more pass over the same DataLoader (its generator moves on, so a new order with shuffle)."""
        self.epoch += 1
        self.update(reset_epoch=False)

    def update(self, reset_epoch: bool = False) -> None:
        if reset_epoch:
            self.epoch = 1
        try:
            if self.n.value > MAX_N:
                raise ValueError(f"N must be at most {MAX_N} in this view, got {self.n.value}")
            self.trace = trace_pipeline(self.n.value, self.batch_size.value, self.shuffle.value, self.drop_last.value,
                                        self.seed.value, epochs=self.epoch)
        except ValueError as exc:
            self.trace, self.error = None, str(exc)
            self.message.value = error_html(str(exc))
            self.stages.value, self.image.value = "", b""
            return
        self.error = None
        self.message.value = ""
        e = self.trace.epochs[-1]
        rows = [(f"batch {b + 1}", len(batch), _short(batch), str(shape))
                for b, (batch, shape) in enumerate(zip(e.batches[:MAX_SHOWN_BATCHES], e.collated_shapes))]
        if len(e.batches) > MAX_SHOWN_BATCHES:
            rows.append(("…", "", f"{len(e.batches) - MAX_SHOWN_BATCHES} more batches", ""))
        head = (f"<b>Epoch {self.epoch}</b> · sampler: {'RandomSampler' if self.trace.shuffle else 'SequentialSampler'}"
                f" gives {_short(e.sampler_order, 12)} → BatchSampler → collate → {len(e.batches)} batches"
                + (f" · <b>skipped:</b> {sorted(e.skipped)}" if e.skipped else ""))
        self.stages.value = head + table_html(rows, ("batch", "size", "indices", "collated tensor"))
        self.image.value = figure_png(pipeline_figure(self.trace, self.epoch))

    def text(self) -> str:
        if self.trace is None:
            return f"Pipeline view: invalid input: {self.error}"
        t, e = self.trace, self.trace.epochs[-1]
        lines = [f"Pipeline view: N={t.n}, batch_size={t.batch_size}, shuffle={t.shuffle}, drop_last={t.drop_last}, "
                 f"seed={t.seed}, epoch {self.epoch}",
                 f"{len(e.batches)} batches, sizes {[len(b) for b in e.batches]}"]
        lines += [f"  batch {b + 1}: {batch}" for b, batch in enumerate(e.batches[:MAX_SHOWN_BATCHES])]
        if len(e.batches) > MAX_SHOWN_BATCHES:
            lines.append(f"  … {len(e.batches) - MAX_SHOWN_BATCHES} more batches")
        lines.append(f"skipped this epoch: {sorted(e.skipped)}")
        return "\n".join(lines)


def _short(indices: list[int], keep: int = 16) -> str:
    return str(indices) if len(indices) <= keep else str(indices[:keep])[:-1] + ", …]"


def pipeline_view(**kwargs) -> PipelineView:
    """Show the chapter-1 pipeline view (keyword arguments set the starting controls)."""
    return PipelineView(**kwargs)
