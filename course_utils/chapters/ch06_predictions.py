"""Predict, then see (chapter 6): one-question quizzes a chapter asks *before* the cell that measures the answer.

A chapter's predictions are a question bank like its quiz (``quizzes/predictions/chNN.json``, the same
format and checks as ``course_utils.infra.quiz``), kept apart so the end-of-chapter quiz and its counts are
unchanged. Every id starts with ``predict-``; answers go into the learner's progress file under the
chapter, beside the quiz answers (``ProgressStore.records("predict-")`` lists them).
"""
from __future__ import annotations

from course_utils.infra.quiz import BANK_DIR, Bank, ProgressStore, Question, load_bank

PREDICTIONS_DIR = BANK_DIR / "predictions"
PREFIX = "predict-"


def prediction_bank(chapter: str | int) -> Bank:
    """One chapter's prediction questions (ValueError if an id lacks the ``predict-`` prefix)."""
    bank = load_bank(chapter, PREDICTIONS_DIR)
    wrong = [q.id for q in bank.questions if not q.id.startswith(PREFIX)]
    if wrong:
        raise ValueError(f"prediction ids must start with {PREFIX!r}: {wrong}")
    return bank


def prediction(chapter: str | int, qid: str) -> tuple[Bank, Question]:
    """The bank and the question `qid` of a chapter's predictions (`qid` with or without its prefix)."""
    bank = prediction_bank(chapter)
    return bank, bank.question(qid if qid.startswith(PREFIX) else PREFIX + qid)


def predictions_made(store: ProgressStore, chapter: str | int) -> dict[str, dict]:
    """The learner's saved predictions of one chapter: {question id: {"correct", "attempts", "answer"}}."""
    key = f"{int(chapter):02d}" if str(chapter).isdigit() else str(chapter)
    return store.records(PREFIX).get(key, {})
