"""Chapter 6: a prediction card, one question asked before the cell that measures its answer.

It reuses the quiz's card (``quiz_view.QuestionCard``: input, Check, Show answer, feedback, saved
progress) with a heading of its own; the answer is saved with the learner's quiz progress.
"""
from __future__ import annotations

import html

from course_utils.chapters.ch06_predictions import prediction
from course_utils.infra.quiz import ProgressStore, option_order
from course_utils.widgets.base import View
from course_utils.widgets.quiz_view import QuestionCard

HEADING = "Predict before you run the next cell"


class PredictView(View):
    """One prediction question as a quiz card, headed 'Predict before you run the next cell'."""

    def __init__(self, chapter: str | int, qid: str, store: ProgressStore | None = None):
        self.bank, self.question = prediction(chapter, qid)
        self.card = QuestionCard(self.bank.chapter, 1, self.question, store or ProgressStore())
        kind = {"single": "one answer", "multi": "select all that apply", "numeric": "a number"}[self.question.kind]
        self.card.widget.children[0].value = (
            f"<b>{HEADING}:</b> {html.escape(self.question.prompt)} <i style='color:#666'>({kind})</i>")
        self.widget = self.card.widget

    def text(self) -> str:
        q = self.question
        lines = [f"{HEADING}: {q.prompt}"]
        order = option_order(self.bank.chapter, q)
        lines += [f"    {'abcdefghij'[k]}) {q.options[i].text}" for k, i in enumerate(order)]
        lines.append("(answer in JupyterLab: your prediction is kept with your quiz progress)")
        return "\n".join(lines)


def predict(chapter: str | int, qid: str, store: ProgressStore | None = None) -> PredictView:
    """Show one prediction question of a chapter: ``predict(6, "adam-lr-one")`` before experiment 1."""
    return PredictView(chapter, qid, store)
