"""Chapter 6: the LR range test view: pick an optimizer, sweep, read the suggested learning rate."""
from __future__ import annotations

import html
from dataclasses import replace

import ipywidgets as w

from course_utils.lr_find import LR_FIND, LrSweep, lr_find, sweep_figure
from course_utils.widgets.base import View, error_html, figure_png
from course_utils.widgets.simulator import OPTIMIZER_LABELS


class LrFindView(View):
    """An optimizer menu, a Sweep button, the loss-against-lr figure and the suggestion."""

    def __init__(self, optimizer: str = "adam"):
        self.optimizer = w.Dropdown(options=[(v, k) for k, v in OPTIMIZER_LABELS.items()], value=optimizer,
                                    description="optimizer")
        self.button = w.Button(description="Sweep", icon="search", button_style="primary")
        self.button.on_click(lambda _: self.sweep())
        self.figure = w.Image(format="png", layout=w.Layout(width="640px", height="275px"))
        self.summary = w.HTML(layout=w.Layout(min_height="60px"))
        self.result: LrSweep | None = None
        self.error: str | None = None
        self.widget = w.VBox([
            w.HTML("<b>LR range test</b>: one pass over the spiral, the learning rate multiplied by the same "
                   "factor at every micro-batch, from 1e-05 up until the loss blows up."),
            w.HBox([self.optimizer, self.button]), self.figure, self.summary])

    def sweep(self) -> LrSweep | None:
        """Run the range test for the chosen optimizer and show it; an error shows as a message."""
        self.button.disabled, self.button.description = True, "Sweeping…"
        try:
            self.result = lr_find(replace(LR_FIND, optimizer=self.optimizer.value))
            self.error = None
            self.figure.value = figure_png(sweep_figure(self.result))
            self.summary.value = "<br>".join(html.escape(line.strip()) for line in self.result.text().splitlines())
        except Exception as exc:  # never a traceback in the view
            self.error = f"The sweep failed: {exc}"
            self.summary.value = error_html(self.error)
        finally:
            self.button.disabled, self.button.description = False, "Sweep"
        return self.result

    def text(self) -> str:
        if self.error:
            return self.error
        return self.result.text() if self.result else "LR range test: choose an optimizer and press Sweep"


def lr_range_test(optimizer: str = "adam", run: bool = True) -> LrFindView:
    """Show the LR range test (already swept, so the page opens on a result)."""
    view = LrFindView(optimizer)
    if run:
        view.sweep()
    return view
