"""Chapter 5: the mystery-bug game: curves of a hidden bug, one diagnosis per round, the reveal."""
from __future__ import annotations

import html

import ipywidgets as w

from course_utils.engine.bugs import BUGS
from course_utils.chapters.ch05_museum import compare, compare_steps
from course_utils.chapters.ch05_museum_figure import comparison_figure
from course_utils.chapters.ch05_mystery import MysteryGame
from course_utils.infra.quiz import ProgressStore
from course_utils.widgets.ahead import RunAhead
from course_utils.widgets.base import View, error_html, figure_png

PLACEHOLDER = "(choose a diagnosis)"


class MysteryView(View):
    """New round → curves only; pick a diagnosis, Check → feedback and the reveal (once), progress recorded."""

    def __init__(self, seed: int = 0, store: ProgressStore | None = None, config: dict | None = None):
        self.game = MysteryGame(seed, config=config)
        self.store = store
        self.new_button = w.Button(description="New round", icon="refresh")
        self.new_button.on_click(lambda _: self.new_round())
        self.status = w.HTML("<div style='min-height:1.6em'></div>")
        self.setup = w.HTML(f"<small>{html.escape(self.game.setup_text())}</small>")
        self.plot = w.Image(format="png", layout=w.Layout(width="100%", max_width="900px", min_height="300px"))
        self.choice = w.Dropdown(options=[PLACEHOLDER] + [f"{n}: {BUGS[n].title}" for n in self.game.choices],
                                 description="diagnosis", layout=w.Layout(width="520px"))
        self.check_button = w.Button(description="Check", button_style="primary")
        self.check_button.on_click(lambda _: self.check())
        self.feedback = w.HTML()
        self.grade = None
        self.ahead = RunAhead()   # the next round, trained and drawn while this one is read
        self.widget = w.VBox([w.HTML("<b>Mystery bug</b>: one bug is hidden in the red run. Which one?"),
                              w.HBox([self.new_button, self.status]), self.setup, self.plot,
                              w.HBox([self.choice, self.check_button]), self.feedback])

    def new_round(self, bug: str | None = None) -> None:
        """Deal the next hidden bug (busy state while its run trains; the old figure stays until then)."""
        self.new_button.disabled, self.check_button.disabled = True, True
        self.status.value = "<div style='min-height:1.6em;color:#555'>⏳ training the round's run…</div>"
        try:
            ready = self.ahead.finish(self.game.peek() if bug is None else bug)
            comp = self.game.new_round(bug)
            png = ready if ready is not None else self._figure(comp)
        except Exception as exc:                                  # never let a callback die silently
            self.status.value = error_html(f"Could not deal a round: {exc}")
            self.new_button.disabled = False
            return
        self.new_button.disabled = False
        self.grade = None
        self.choice.disabled, self.check_button.disabled = False, False
        self.choice.value = PLACEHOLDER
        self.feedback.value = ""
        self.status.value = f"<div style='min-height:1.6em;color:#555'>round {self.game.round}</div>"
        self.plot.value = png
        self._prefetch()

    def _prefetch(self) -> None:
        """In a kernel, train the next round's run and draw its figure ahead (widgets/ahead.py)."""
        upcoming, number = self.game.peek(), self.game.round + 1
        self.ahead.start(upcoming, compare_steps((upcoming,), **self.game.config),
                         lambda: self._figure(compare((upcoming,), **self.game.config), number))

    def _figure(self, comp, round_number: int | None = None) -> bytes:
        """The round's eight panels as PNG (the figure sets its own margins: no tight-bbox pass)."""
        number = self.game.round if round_number is None else round_number
        return figure_png(comparison_figure(comp, title=f"round {number}: healthy vs ???"), tight=False)

    def diagnose(self, bug: str) -> None:
        self.choice.value = f"{bug}: {BUGS[bug].title}"

    def check(self) -> None:
        """Grade the chosen diagnosis once; after the reveal only New round counts."""
        if self.game.hidden is None:
            self.feedback.value = "<i>Press New round first.</i>"
            return
        if self.game.revealed:
            self.feedback.value += "<i>This round is already revealed: press New round.</i>"
            return
        if self.choice.value == PLACEHOLDER:
            self.feedback.value = "<i>Choose a diagnosis first.</i>"
            return
        guess = self.choice.value.split(":")[0]
        self.grade = self.game.grade(guess)
        self.choice.disabled, self.check_button.disabled = True, True
        try:
            if self.store is None:
                self.store = ProgressStore(quiet=True)            # a damaged file is said here, not as a warning
            seen = len(self.store.warnings_seen)
            self.store.record("05", f"mystery-{self.grade.answer}", guess, self.grade.correct)
            saved = f" ({self.store.warnings_seen[-1]})" if len(self.store.warnings_seen) > seen else ""
        except Exception as exc:                                  # a full disk must not cost the reveal
            saved = f" (your answer could not be saved: {exc})"
        colour = "#2e7d32" if self.grade.correct else "#c62828"
        self.feedback.value = (f'<div style="border-left:4px solid {colour};padding:4px 10px">'
                               f"{html.escape(self.grade.message + saved)}<br><i>Press New round for the next "
                               "bug.</i></div>")

    def text(self) -> str:
        if self.game.hidden is None:
            return "Mystery bug: press New round"
        lines = [f"Mystery bug, round {self.game.round}: {self.game.setup_text()}"]
        if self.grade is None:
            lines.append("Your diagnosis? (choose from the dropdown and press Check)")
        else:
            lines.append(self.grade.message)
        return "\n".join(lines)


def mystery(seed: int = 0, store: ProgressStore | None = None, config: dict | None = None) -> MysteryView:
    """Start the game with its first round dealt (config: the shared run; museum.MYSTERY by default)."""
    view = MysteryView(seed, store, config)
    view.new_round()
    return view
