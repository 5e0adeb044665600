"""Chapter 1: the Dataset -> Sampler -> BatchSampler -> collate view (which index lands in which batch)."""
from __future__ import annotations

import html

import ipywidgets as w

from course_utils.infra.notebook import MAX_SEED
from course_utils.chapters.ch01_pipeline import EpochTrace, PipelineRecorder
from course_utils.widgets.base import (View, busy_html, error_html, guarded, number_box, parse_whole_number,
                                       stale_html, table_html)

MAX_N = 400
MAX_SHOWN_BATCHES = 12
# Ten light colours, dark text on each (legible); the batch number is printed in every cell, so a repeated
# colour never merges two batches.
PALETTE = ("#bbdefb", "#ffe0b2", "#c8e6c9", "#f8bbd0", "#d1c4e9", "#fff59d", "#b2ebf2", "#ffccbc", "#dcedc8",
           "#cfd8dc")


def pipeline_grid_html(e: EpochTrace, columns: int = 20) -> str:
    """Every example as a cell in the sampler's order: its index, and the batch it lands in (or 'dropped')."""
    where = {i: b for b, batch in enumerate(e.batches) for i in batch}
    cells = []
    for index in e.sampler_order:
        b = where.get(index)
        if b is None:
            style = "background:repeating-linear-gradient(45deg,#eee,#eee 3px,#bdbdbd 3px,#bdbdbd 5px);color:#555"
            label = "dropped"
        else:
            style = f"background:{PALETTE[b % len(PALETTE)]};color:#111"
            label = f"b{b + 1}"
        cells.append(f"<div style='{style};border-radius:3px;text-align:center;line-height:1.05;padding:1px 0'>"
                     f"<div style='font-size:12px'>{index}</div><div style='font-size:9px;color:#444'>{label}</div>"
                     "</div>")
    title = (f"<div style='font-size:13px;margin:4px 0'>Epoch {e.epoch}: the sampler's order, left to right, top "
             "to bottom. Each cell: the example's index and its batch (b1, b2, …); striped = dropped "
             "(drop_last).</div>")
    grid = (f"<div style='display:grid;grid-template-columns:repeat({columns},minmax(0,1fr));gap:2px;"
            f"max-width:860px;font-family:monospace'>{''.join(cells)}</div>")
    return title + grid


class PipelineView(View):
    """Controls N, batch size, shuffle, drop_last, seed; Next epoch shows the next pass of the same loader."""

    def __init__(self, n: int = 100, batch_size: int = 16, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0):
        self.n = number_box(n, "examples N", width="220px", label_width="90px")
        self.batch_size = w.IntSlider(batch_size, min=1, max=64, description="batch size",
                                      style={"description_width": "90px"}, continuous_update=False)
        self.shuffle = w.Checkbox(shuffle, description="shuffle", indent=False)
        self.drop_last = w.Checkbox(drop_last, description="drop_last", indent=False)
        self.seed = number_box(seed, "seed", width="220px", label_width="90px")
        self.next_epoch = w.Button(description="Next epoch", icon="forward",
                                   tooltip="iterate the same DataLoader once more")
        self.controls = [self.n, self.batch_size, self.shuffle, self.drop_last, self.seed]
        self.message = w.HTML(layout=w.Layout(min_height="34px"))
        self.output = w.HTML(layout=w.Layout(min_height="420px"))
        self.recorder: PipelineRecorder | None = None
        self.error: str | None = None
        for control in self.controls:
            control.observe(guarded(self, lambda _: self.update()), names="value")
        self.next_epoch.on_click(guarded(self, lambda _: self.advance()))
        note = w.HTML("<i style='color:#666'>Changing a setting builds a new DataLoader and starts again at "
                      "epoch 1; Next epoch iterates the same one again.</i>")
        self.widget = w.VBox([w.HBox([w.VBox([self.n, self.batch_size, self.seed]),
                                      w.VBox([self.shuffle, self.drop_last, self.next_epoch])]),
                              note, self.message, self.output])
        self.update()

    @property
    def epoch(self) -> int:
        return len(self.recorder.epochs) if self.recorder else 0

    @property
    def trace(self):
        return self.recorder.trace if self.recorder else None

    def update(self) -> None:
        """A new DataLoader from the controls, at epoch 1."""
        try:
            n = parse_whole_number(self.n.value, "examples N", minimum=1, maximum=MAX_N)
            seed = parse_whole_number(self.seed.value, "seed", minimum=0, maximum=MAX_SEED)
        except ValueError as exc:
            self.show_error(str(exc))
            return
        self.message.value = busy_html()
        self.recorder = PipelineRecorder(n, self.batch_size.value, self.shuffle.value, self.drop_last.value, seed)
        self.recorder.next_epoch()
        self.draw()

    def advance(self) -> None:
        """One more pass over the same DataLoader."""
        if self.recorder is None:
            return
        self.message.value = busy_html()
        self.recorder.next_epoch()
        self.draw()

    def draw(self) -> None:
        e = self.recorder.epochs[-1]
        rows = [(f"batch {b + 1}", len(batch), _short(batch), str(shape))
                for b, (batch, shape) in enumerate(zip(e.batches[:MAX_SHOWN_BATCHES], e.collated_shapes))]
        if len(e.batches) > MAX_SHOWN_BATCHES:
            rows.append(("…", "", f"{len(e.batches) - MAX_SHOWN_BATCHES} more batches (all in the grid below)", ""))
        sampler = "RandomSampler" if self.recorder.shuffle else "SequentialSampler"
        head = (f"<div><b>Epoch {self.epoch}</b> · {sampler} → BatchSampler → collate → "
                f"{len(e.batches)} batches" + (f" · <b>skipped:</b> {html.escape(str(sorted(e.skipped)))}"
                                               if e.skipped else "") + "</div>")
        body = head + table_html(rows, ("batch", "size", "indices", "collated")) + pipeline_grid_html(e)
        self.error = None
        self.output.value = body
        self.message.value = ""
        self.next_epoch.disabled = False

    def show_error(self, message: str) -> None:
        self.recorder, self.error = None, message
        self.message.value = error_html(message)
        if "opacity" not in self.output.value:
            self.output.value = stale_html(self.output.value, "last valid settings:")
        self.next_epoch.disabled = True

    def text(self) -> str:
        if self.recorder is None:
            return f"Pipeline view: invalid input: {self.error}"
        t, e = self.recorder, self.recorder.epochs[-1]
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
