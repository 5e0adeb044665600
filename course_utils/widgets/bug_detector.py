"""Chapter 5: the bug detector: toggle loop bugs, run, compare eight panels with the healthy run."""
from __future__ import annotations

import html

import ipywidgets as w

from course_utils.engine.bugs import BUGS, LOOP_BUGS
from course_utils.chapters.ch05_museum import DETECTOR, Comparison, _fmt, compare, compare_steps
from course_utils.chapters.ch05_museum_figure import comparison_figure
from course_utils.widgets.ahead import RunAhead
from course_utils.widgets.base import View, error_html, figure_png, table_html

NOTE = "<div style='color:#555;min-height:1.6em'>{}</div>"


def clashes(bugs: tuple[str, ...]) -> list[str]:
    """Every pair of ticked bugs that change the same operation, in words (chapter 5)."""
    by_operation: dict[str, list[str]] = {}
    for name in bugs:
        by_operation.setdefault(BUGS[name].operation, []).append(name)
    return [f"{' and '.join(names)} both change {operation}" for operation, names in by_operation.items()
            if len(names) > 1]


class BugDetectorView(View):
    """A checkbox per loop bug (combinations allowed), a Run button, the curves and a signature summary."""

    def __init__(self, config: dict | None = None, bugs: tuple[str, ...] = ()):
        self.config = dict(config or DETECTOR)
        self.boxes = {name: w.Checkbox(name in bugs, description=name, indent=False, tooltip=BUGS[name].title,
                                       layout=w.Layout(width="auto")) for name in LOOP_BUGS}
        for box in self.boxes.values():
            box.observe(lambda _: self._mark_stale(), names="value")
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.run_button.on_click(lambda _: self.run())
        self.message = w.HTML(NOTE.format(""))
        self.plot = w.Image(format="png", layout=w.Layout(width="100%", max_width="900px", min_height="300px"))
        self.summary = w.HTML("<i>Tick one or more bugs and press Run.</i>")
        self.comparison: Comparison | None = None
        self.shown: tuple[str, ...] | None = None
        self.answered: tuple[str, tuple[str, ...]] | None = None   # the last answer without a run, and its ticks
        self.repeats = 0                                                # how many presses in a row got it
        self.error: str | None = None
        self.ahead = RunAhead()   # the ticked combination, trained and drawn while the learner reaches for Run
        settings = ", ".join(f"{k}={v}" for k, v in self.config.items())
        self.widget = w.VBox([
            w.HTML(f"<b>Bug detector</b>: the course's loop, healthy (blue, dashed) vs bugged (red), same seed "
                   f"<small>({html.escape(settings)})</small>"),
            w.GridBox(list(self.boxes.values()),
                      layout=w.Layout(grid_template_columns="repeat(3, minmax(0, 1fr))", width="100%")),
            w.HBox([self.run_button, self.message]), self.plot, self.summary,
        ])

    def selected(self) -> tuple[str, ...]:
        return tuple(name for name, box in self.boxes.items() if box.value)

    def select(self, *names: str) -> None:
        for name, box in self.boxes.items():
            box.value = name in names

    def _figure(self, bugs: tuple[str, ...]) -> bytes:
        return figure_png(comparison_figure(compare(bugs, **self.config)), tight=False)  # sets its own margins

    def _mark_stale(self) -> None:
        bugs = self.selected()
        if bugs != self.shown and not clashes(bugs):
            self.ahead.start(bugs, compare_steps(bugs, **self.config), lambda: self._figure(bugs))
        if self.shown is not None and self.selected() != self.shown:
            ticked = ", ".join(self.selected()) or "no bug"
            self.message.value = NOTE.format(f"Ticked now: {html.escape(ticked)}. The curves below are for the "
                                             "previous ticks: press <b>Run</b>.")
            self.plot.layout.opacity = "0.45"
        elif self.shown is not None:
            self.message.value = NOTE.format("")
            self.plot.layout.opacity = "1"

    def _again(self, answer: str, bugs: tuple[str, ...]) -> str:
        """`answer`, counting the presses of Run that got it for the same ticks: each press changes what the learner
        sees, so the button never looks dead."""
        self.repeats = self.repeats + 1 if self.answered == (answer, bugs) else 1
        self.answered = (answer, bugs)
        return answer + (f" (Run pressed {self.repeats} times on these ticks)" if self.repeats > 1 else "")

    def run(self) -> Comparison | None:
        """Train both runs with the ticked bugs; a clash (two bugs on one operation) shows a message."""
        bugs = self.selected()
        problems = clashes(bugs)
        if problems:
            self.error = "; ".join(problems) + ". Untick one of each pair."
            self.message.value = error_html(self._again(f"These bugs cannot be combined: {self.error}", bugs))
            self.plot.layout.opacity = "0.45"                  # the last result stays, dimmed: no jump
            return None
        if bugs == self.shown:
            self.message.value = NOTE.format(self._again("These ticks are already shown: same seed, same result.", bugs))
            return self.comparison
        self.run_button.disabled, self.run_button.description = True, "Running…"
        self.message.value = NOTE.format("⏳ training the healthy and the bugged run…")
        try:
            png = self.ahead.finish(bugs) or self._figure(bugs)
            comp = compare(bugs, **self.config)                  # cached by now: the same runs as the figure
        except Exception as exc:                                # never let a callback die silently
            self.error = str(exc)
            self.message.value = error_html(f"The run failed: {exc}")
            return None
        finally:
            self.run_button.disabled, self.run_button.description = False, "Run"
        self.comparison, self.error, self.shown, self.answered = comp, None, bugs, None
        self.message.value = NOTE.format("")
        self.plot.value = png
        self.plot.layout.opacity = "1"
        rows = [(label, _fmt(h), _fmt(b), "" if _fmt(h) == _fmt(b) else "differs")
                for label, h, b in comp.signature()]
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
        return "Bug detector\n" + self.comparison.text(only_changed=True)


def bug_detector(*bugs: str, run: bool = True, **config) -> BugDetectorView:
    """Show the detector with `bugs` ticked (and already run, so the page opens on a result)."""
    view = BugDetectorView(config or None, bugs)
    if run:
        view.run()
    return view
