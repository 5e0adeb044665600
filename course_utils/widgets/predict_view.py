"""Predict, then see (every chapter): a prediction card, and the measurement it hides until you predict.

``predict(chapter, qid)`` shows one prediction question as a quiz card (``quiz_view.QuestionCard``: input,
Check, Show answer, feedback, saved progress) with a heading of its own; the answer is saved with the
learner's quiz progress. ``with answer(chapter, qid):`` around the measuring cell's prints keeps what they
print out of sight until that card is answered, so Run All does not give the answer away:

    predict(7, "fp16-overflow")          # one cell: the card

    with answer(7, "fp16-overflow"):     # the next cell: the measurement, printed inside the block
        print(overflow.text())

How it works, and why not an ``ipywidgets.Output``: the block captures what is printed and displays it as
an ``AnswerView``, a display output with three forms.
- JupyterLab, live or reopened with the widget state saved: the widget, a blank screen of the text's
  height ("hidden until you check your prediction above") with a button to show it anyway; it opens by
  itself when the card is checked or shown, or at once if the saved progress already holds a prediction.
  The widget's synced state never holds the text, so the notebook's saved widget state does not either.
- text/plain: exactly the printed text. nbval compares it, so the measurement stays checked.
- text/html: the text inside a closed ``<details>``, for an untrusted notebook and for GitHub.
Prints inside an ``Output`` widget would not do: nbclient (the notebook build) files them in the widget's
state, not in the cell's outputs, while nbval reads them as the cell's stdout, so the two disagree.
Only prints are hidden: a figure or view displayed inside the block shows as usual.
"""
from __future__ import annotations

import contextlib
import html
import io
import sys
from collections.abc import Iterator

import ipywidgets as w

from course_utils.chapters.ch06_predictions import prediction, predictions_made
from course_utils.infra.quiz import ProgressStore, option_order
from course_utils.widgets.base import View, guarded
from course_utils.widgets.quiz_view import QuestionCard

HEADING = "Predict before you run the next cell"
HIDDEN = "Hidden until you check your prediction above (or press Show the measurement)."
SUMMARY = "The measurement: open it after you have made your prediction above"

_waiting: dict[tuple[str, str], list[AnswerView]] = {}   # (chapter, question id) -> answer views still closed


def _key(chapter: str | int, qid: str) -> tuple[str, str]:
    bank, question = prediction(chapter, qid)
    return bank.chapter, question.id


def _open_answers(key: tuple[str, str]) -> None:
    for view in _waiting.pop(key, []):
        view.open()


class PredictView(View):
    """One prediction question as a quiz card, headed 'Predict before you run the next cell'."""

    def __init__(self, chapter: str | int, qid: str, store: ProgressStore | None = None):
        self.bank, self.question = prediction(chapter, qid)
        self.store = store or ProgressStore()
        self.card = QuestionCard(self.bank.chapter, 1, self.question, self.store)
        kind = {"single": "one answer", "multi": "select all that apply", "numeric": "a number"}[self.question.kind]
        self.card.widget.children[0].value = (
            f"<b>{HEADING}:</b> {html.escape(self.question.prompt)} <i style='color:#666'>({kind})</i>")
        key = (self.bank.chapter, self.question.id)
        # Registered after the card's own handlers, so they run after the answer is checked and saved.
        self.card.check_button.on_click(guarded(self.card, lambda _: self._opened_if_predicted(key)))
        self.card.reveal_button.on_click(guarded(self.card, lambda _: _open_answers(key)))
        self.widget = self.card.widget

    def _opened_if_predicted(self, key: tuple[str, str]) -> None:
        if self.question.id in predictions_made(self.store, self.bank.chapter):   # a counted attempt was saved
            _open_answers(key)

    def text(self) -> str:
        q = self.question
        lines = [f"{HEADING}: {q.prompt}"]
        order = option_order(self.bank.chapter, q)
        lines += [f"    {'abcdefghij'[k]}) {q.options[i].text}" for k, i in enumerate(order)]
        lines.append("(answer in JupyterLab: your prediction is kept with your quiz progress)")
        return "\n".join(lines)


def predict(chapter: str | int, qid: str, store: ProgressStore | None = None) -> PredictView:
    """Show one prediction question of a chapter (every chapter): ``predict(6, "adam-lr-one")`` before experiment 1."""
    return PredictView(chapter, qid, store)


class AnswerView(View):
    """A measurement's printed text, kept out of sight until its prediction card is answered (every chapter)."""

    def __init__(self, chapter: str | int, qid: str, printed: str, store: ProgressStore | None = None):
        self.key = _key(chapter, qid)
        self.printed = printed
        self.lines = printed.rstrip("\n").split("\n")
        self.screen = w.HTML()
        self.button = w.Button(description="Show the measurement", icon="eye",
                               tooltip="Show it without predicting first", layout=w.Layout(width="auto"))
        self.button.on_click(guarded(self, lambda _: self.open()))
        self.widget = w.VBox([self.screen, self.button])
        self.is_open = False
        self._close()
        if self.key[1] in predictions_made(store or ProgressStore(quiet=True), self.key[0]):
            self.open()                                        # predicted earlier (saved progress)
        else:
            _waiting.setdefault(self.key, []).append(self)

    def _pre(self, body: str) -> str:
        # The same <pre>, the same number of lines, open or closed: opening moves nothing below it.
        return f"<pre style='margin:2px 0;padding:4px 8px;background:#fafafa;border:1px solid #eee'>{body}</pre>"

    def _close(self) -> None:
        # Every line as wide as the text's (spaces), the first one saying why: the same box, wrapped or scrolled.
        rest = len(self.lines[0]) - len(HIDDEN)
        blank = "".join("\n" + " " * len(line) for line in self.lines[1:])
        self.screen.value = self._pre(f"<i style='color:#777'>{html.escape(HIDDEN)}</i>{' ' * max(rest, 0)}{blank}")

    def open(self) -> None:
        """Show the measured text (the card was answered, or the learner asked)."""
        self.is_open = True
        self.screen.value = self._pre(html.escape("\n".join(self.lines)))
        self.button.description, self.button.disabled = "Shown", True
        waiting = _waiting.get(self.key, [])
        if self in waiting:
            waiting.remove(self)

    def show_error(self, message: str) -> None:
        self.screen.value = self._pre(html.escape(message))

    def text(self) -> str:
        return self.printed

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        data["text/plain"] = self.printed.rstrip("\n")
        data["text/html"] = (f"<details><summary>{html.escape(SUMMARY)}</summary>"
                             f"<pre>{html.escape(self.printed.rstrip(chr(10)))}</pre></details>")
        return data


@contextlib.contextmanager
def answer(chapter: str | int, qid: str, store: ProgressStore | None = None) -> Iterator[None]:
    """Hide what the block prints until the card ``predict(chapter, qid)`` is answered (every chapter).

    Use it in the cell after the card: ``with answer(6, "adam-lr-one"): print(lr_one.text())``. The text
    is displayed as an AnswerView (see the module's docstring): closed in JupyterLab until the card is
    checked, the same text for nbval. An unknown question raises KeyError before the block runs. If the
    block raises, what it printed so far is printed as usual and the exception goes on.
    """
    from IPython.display import display

    _key(chapter, qid)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    except BaseException:
        sys.stdout.write(buffer.getvalue())
        raise
    display(AnswerView(chapter, qid, buffer.getvalue(), store))
