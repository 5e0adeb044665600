"""Checked exercises (chapters 0-8): write the real code; the course runs it on hidden cases and says what is wrong.

In a notebook, after the cell that defines your function::

    from course_utils.exercises import check
    check("updates_per_epoch")          # finds `updates_per_epoch` among the notebook's names

``EXERCISES[name].check(fn)`` does the same for a function passed in (what other tools and the tests
call). Every check is saved in the learner's progress beside the quizzes and counted in
``course_progress()``. The course's own solutions, for instructors and for the tests, are in
``course_utils/exercises/solutions.py``.
A tool like the trainer and the doctor: the checkers use the engine, infra (the quiz progress) and the
other tools, never a chapter or a view.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

from course_utils.exercises import (ch00_01, ch02, ch02_weighted, ch03, ch04, ch04_ranks, ch05, ch05_snapshot,
                                    ch06, ch07, ch07_token_accum, ch08)
from course_utils.exercises.core import RECORD_PREFIX, Exercise, Verdict
from course_utils.infra.quiz import ProgressStore

EXERCISES: dict[str, Exercise] = {ex.name: ex for module in (ch00_01, ch02, ch02_weighted, ch03, ch04, ch04_ranks,
                                                             ch05, ch05_snapshot, ch06, ch07, ch07_token_accum, ch08)
                                  for ex in module.exercises()}


def check(name: str, *functions: Callable, store: ProgressStore | None = None) -> Verdict:
    """Check exercise `name` with the given function(s), or with the notebook's own names for them (every chapter)."""
    exercise = EXERCISES.get(name)
    if exercise is None:
        close = ", ".join(sorted(n for n in EXERCISES if n.lower()[:4] == str(name).lower()[:4])) or "see EXERCISES"
        return Verdict(False, f"✗ There is no exercise called {name!r} ({close}).", str(name), counted=False)
    if not functions:
        caller = sys._getframe(1).f_globals
        missing = [n for n in exercise.names if n not in caller]
        if missing:
            cells = " and ".join(f"`{n}`" for n in missing)
            return Verdict(False, f"✗ {name}: {cells} {'is' if len(missing) == 1 else 'are'} not defined yet: run the "
                                  "cell above (the one you edit) first, then this one.", name, counted=False)
        functions = tuple(caller[n] for n in exercise.names)
    return exercise.check(*functions, store=store)


def chapter_exercises(chapter: str | int) -> list[Exercise]:
    """The exercises of one chapter, in the order the notebook shows them."""
    key = f"{int(chapter):02d}" if str(chapter).isdigit() else str(chapter)
    return [ex for ex in EXERCISES.values() if ex.chapter == key]


def exercise_progress(store: ProgressStore | None = None) -> list[tuple[str, int, int, int]]:
    """Rows (chapter, solved, attempted, total) for every chapter with exercises (the course progress view)."""
    records = (store or ProgressStore()).records(RECORD_PREFIX)
    rows = []
    for chapter in sorted({ex.chapter for ex in EXERCISES.values()}):
        names = {RECORD_PREFIX + ex.name for ex in EXERCISES.values() if ex.chapter == chapter}
        saved = {k: v for k, v in records.get(chapter, {}).items() if k in names}
        rows.append((chapter, sum(1 for v in saved.values() if v.get("correct")), len(saved), len(names)))
    return rows


__all__ = ["EXERCISES", "Exercise", "Verdict", "check", "chapter_exercises", "exercise_progress"]
