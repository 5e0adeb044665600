"""Chapter 6: the LR range test view: pick an optimizer, sweep, read the suggested learning rate."""
from __future__ import annotations

import html
from dataclasses import replace

import ipywidgets as w

from course_utils.chapters.ch06_lr_find import ITERATIONS, LR_FIND, LrSweep, lr_find, sweep_figure
from course_utils.widgets.base import View, error_html, figure_html, figure_png, stale_html
from course_utils.widgets.simulator_layout import OPTIMIZER_LABELS

FIGURE_PX = (630, 270)        # sweep_figure's size at the notebook's 90 dpi: shown 1:1, never stretched


class LrFindView(View):
    """An optimizer menu, a Sweep button, the loss-against-lr figure and the suggestion.

    One truth per view: after the menu changes, the figure and summary of the last sweep are dimmed
    under a line saying which optimizer they show, until Sweep runs the chosen one. The test is
    deterministic, so Sweep on the optimizer already shown has nothing to add: it says so at once
    instead of queueing a repeat of the same sweep.
    """

    def __init__(self, optimizer: str = "adam"):
        self.optimizer = w.Dropdown(options=[(v, k) for k, v in OPTIMIZER_LABELS.items()], value=optimizer,
                                    description="optimizer")
        self.button = w.Button(description="Sweep", icon="search", button_style="primary")
        self.button.on_click(lambda _: self.sweep())
        self.optimizer.observe(lambda _: self._show(), names="value")
        self.figure = w.HTML(layout=w.Layout(width=f"{FIGURE_PX[0] + 10}px", height=f"{FIGURE_PX[1] + 40}px"))
        self.summary = w.HTML(layout=w.Layout(height="66px", overflow="hidden"))
        self.result: LrSweep | None = None
        self.error: str | None = None
        self._figure = ""
        self.widget = w.VBox([
            w.HTML(f"<b>LR range test</b>: up to {ITERATIONS} micro-batches of the spiral "
                   f"({LR_FIND.n_train // LR_FIND.batch_size} make one pass), the learning rate multiplied by the "
                   "same factor at every one, from 1e-05 up until the loss blows up."),
            w.HBox([self.optimizer, self.button]), self.figure, self.summary])

    def _lines(self) -> list[str]:
        """The sweep's summary in the menu's words ("SGD + momentum", not "momentum")."""
        r = self.result
        code, label = r.optimizer, OPTIMIZER_LABELS.get(r.optimizer, r.optimizer)
        return [line.strip().replace(f"({code})", f"({label})", 1) for line in r.text().splitlines()]

    def _show(self) -> None:
        """Figure and summary for the current result, dimmed under a note if the menu names another optimizer."""
        if self.error:
            self.summary.value = error_html(self.error)
            return
        if self.result is None:
            self.summary.value = "<i>Choose an optimizer and press Sweep.</i>"
            return
        body = "<br>".join(html.escape(line) for line in self._lines())
        chosen = self.optimizer.value
        if chosen == self.result.optimizer:
            self.figure.value, self.summary.value = self._figure, body
        else:
            shown, wanted = (OPTIMIZER_LABELS[o] for o in (self.result.optimizer, chosen))
            note = f"This figure is the sweep for {shown}: press Sweep to test {wanted}."
            self.figure.value = stale_html(self._figure, note)
            self.summary.value = f"<div style='opacity:0.3'>{body}</div>"

    def sweep(self) -> LrSweep | None:
        """Run the range test for the chosen optimizer and show it; an error shows as a message."""
        chosen = self.optimizer.value
        if self.result is not None and self.result.optimizer == chosen and not self.error:
            self._show()                      # the same deterministic sweep again: nothing new to show
            return self.result
        self.button.disabled, self.button.description = True, "Sweeping…"
        try:
            self.result = lr_find(replace(LR_FIND, optimizer=chosen))
            self.error = None
            png = figure_png(sweep_figure(self.result, OPTIMIZER_LABELS[chosen]), tight=False)
            self._figure = figure_html(png, alt=f"LR range test, {OPTIMIZER_LABELS[chosen]}")
        except Exception as exc:  # never a traceback in the view
            self.error = f"The sweep failed: {exc}"
        finally:
            self.button.disabled, self.button.description = False, "Sweep"
        self._show()
        return self.result

    def text(self) -> str:
        if self.error:
            return self.error
        return "\n  ".join(self._lines()) if self.result else "LR range test: choose an optimizer and press Sweep"


def lr_range_test(optimizer: str = "adam", run: bool = True) -> LrFindView:
    """Show the LR range test (already swept, so the page opens on a result)."""
    view = LrFindView(optimizer)
    if run:
        view.sweep()
    else:
        view._show()
    return view
