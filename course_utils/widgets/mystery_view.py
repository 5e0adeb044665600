"""Chapter 5: the mystery-bug game: curves of a hidden bug, a diagnosis, feedback and the reveal."""
from __future__ import annotations

import html

import ipywidgets as w

from course_utils.bugs import BUGS
from course_utils.museum import MysteryGame, comparison_figure
from course_utils.quiz import ProgressStore
from course_utils.widgets.base import View, figure_png

PLACEHOLDER = "(choose a diagnosis)"


class MysteryView(View):
    """New round → curves only; pick a diagnosis, Check → feedback, the reveal, and progress recorded."""

    def __init__(self, seed: int = 0, store: ProgressStore | None = None):
        self.game = MysteryGame(seed)
        self.store = store
        self.new_button = w.Button(description="New round", icon="refresh")
        self.new_button.on_click(lambda _: self.new_round())
        self.setup = w.HTML()
        self.plot = w.Image(format="png", layout=w.Layout(width="980px"))
        self.choice = w.Dropdown(options=[PLACEHOLDER] + [f"{n}: {BUGS[n].title}" for n in self.game.choices],
                                 description="diagnosis", layout=w.Layout(width="520px"))
        self.check_button = w.Button(description="Check", button_style="primary")
        self.check_button.on_click(lambda _: self.check())
        self.feedback = w.HTML()
        self.grade = None
        self.widget = w.VBox([w.HTML("<b>Mystery bug</b>: one bug is hidden in the red run. Which one?"),
                              self.new_button, self.setup, self.plot,
                              w.HBox([self.choice, self.check_button]), self.feedback])

    def new_round(self, bug: str | None = None) -> None:
        comp = self.game.new_round(bug)
        self.grade = None
        self.choice.value = PLACEHOLDER
        self.feedback.value = ""
        self.setup.value = f"<small>run settings: {html.escape(self.game.setup_text())}</small>"
        self.plot.value = figure_png(comparison_figure(comp, title=f"round {self.game.round}: healthy vs ???"))

    def diagnose(self, bug: str) -> None:
        self.choice.value = f"{bug}: {BUGS[bug].title}"

    def check(self) -> None:
        if self.game.hidden is None:
            self.feedback.value = "<i>Press New round first.</i>"
            return
        if self.choice.value == PLACEHOLDER:
            self.feedback.value = "<i>Choose a diagnosis first.</i>"
            return
        guess = self.choice.value.split(":")[0]
        self.grade = self.game.grade(guess)
        if self.store is None:
            self.store = ProgressStore()
        self.store.record("05", f"mystery-{self.grade.answer}", guess, self.grade.correct)
        colour = "#2e7d32" if self.grade.correct else "#c62828"
        self.feedback.value = (f'<div style="border-left:4px solid {colour};padding:4px 10px">'
                               f"{html.escape(self.grade.message)}</div>")

    def text(self) -> str:
        if self.game.hidden is None:
            return "Mystery bug: press New round"
        lines = [f"Mystery bug, round {self.game.round}: {self.game.setup_text()}"]
        if self.grade is None:
            lines.append("Your diagnosis? (choose from the dropdown and press Check)")
        else:
            lines.append(self.grade.message)
        return "\n".join(lines)


def mystery(seed: int = 0, store: ProgressStore | None = None) -> MysteryView:
    """Start the game with its first round dealt."""
    view = MysteryView(seed, store)
    view.new_round()
    return view
