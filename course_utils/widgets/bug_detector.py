"""Chapter 5: the bug detector: toggle loop bugs, run, compare four curves with the healthy run."""
from __future__ import annotations

import html

import ipywidgets as w

from course_utils.bugs import BUGS, LOOP_BUGS
from course_utils.museum import DETECTOR, Comparison, compare, comparison_figure
from course_utils.widgets.base import View, error_html, figure_png, table_html


class BugDetectorView(View):
    """A checkbox per loop bug (combinations allowed), a Run button, the curves and a signature summary."""

    def __init__(self, config: dict | None = None, bugs: tuple[str, ...] = ()):
        self.config = dict(config or DETECTOR)
        self.boxes = {name: w.Checkbox(name in bugs, description=f"{name}: {BUGS[name].title}", indent=False,
                                       layout=w.Layout(width="420px")) for name in LOOP_BUGS}
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.run_button.on_click(lambda _: self.run())
        self.message = w.HTML()
        self.plot = w.Image(format="png", layout=w.Layout(width="980px"))
        self.summary = w.HTML("<i>Tick one or more bugs and press Run.</i>")
        self.comparison: Comparison | None = None
        self.error: str | None = None
        settings = ", ".join(f"{k}={v}" for k, v in self.config.items())
        self.widget = w.VBox([
            w.HTML(f"<b>Bug detector</b>: the course's loop, healthy vs bugged, same seed ({html.escape(settings)})"),
            w.GridBox(list(self.boxes.values()), layout=w.Layout(grid_template_columns="repeat(2, 430px)")),
            self.run_button, self.message, self.plot, self.summary,
        ])

    def selected(self) -> tuple[str, ...]:
        return tuple(name for name, box in self.boxes.items() if box.value)

    def select(self, *names: str) -> None:
        for name, box in self.boxes.items():
            box.value = name in names

    def run(self) -> Comparison | None:
        """Train both runs with the ticked bugs; a clash (two bugs on one operation) shows a message."""
        bugs = self.selected()
        try:
            comp = compare(bugs, **self.config)
        except ValueError as exc:
            self.comparison, self.error = None, str(exc)
            self.message.value = error_html(f"These bugs cannot be combined: {exc}")
            self.plot.value = b""
            self.summary.value = ""
            return None
        self.comparison, self.error = comp, None
        self.message.value = ""
        self.plot.value = figure_png(comparison_figure(comp))
        rows = [(label, _f(h), _f(b), "" if h == b else "differs") for label, h, b in comp.signature()]
        fixes = "".join(f"<li><b>{html.escape(n)}</b>: {html.escape(BUGS[n].fix)}</li>" for n in bugs)
        self.summary.value = (f"<b>Signature of {html.escape(' + '.join(bugs) or 'no bug')}</b>"
                              + table_html(rows, ["quantity", "healthy", "bugged", ""])
                              + (f"<ul>{fixes}</ul>" if fixes else "<p>No bug ticked: both runs are the same.</p>"))
        return comp

    def text(self) -> str:
        if self.error:
            return f"Bug detector: these bugs cannot be combined: {self.error}"
        if self.comparison is None:
            return "Bug detector: tick bugs and press Run"
        return "Bug detector\n" + self.comparison.text()


def _f(x) -> str:
    from course_utils.museum import _fmt
    return _fmt(x)


def bug_detector(*bugs: str, run: bool = True, **config) -> BugDetectorView:
    """Show the detector with `bugs` ticked (and already run, so the page opens on a result)."""
    view = BugDetectorView(config or None, bugs)
    if run:
        view.run()
    return view
