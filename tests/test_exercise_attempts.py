"""Issue 32: learner attempts written from the statements alone (tests/exercise_attempts/) against their checks.

Every right attempt passes; every wrong one fails, counted, with its mistake named (tests/exercise_attempt_verdicts.py),
except the few the exact statement allows (RIGHT_BY_STATEMENT, each with its reason).
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from course_utils.exercises import EXERCISES
from tests.exercise_attempt_verdicts import RIGHT_BY_STATEMENT, VERDICTS

FOLDER = Path(__file__).parent / "exercise_attempts"


def attempts() -> list[tuple[str, str, tuple]]:
    """(exercise, attempt name, functions) for every right_* and wrong_* in every module of the corpus."""
    found = []
    for path in sorted(FOLDER.glob("*.py")):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"tests.exercise_attempts.{path.stem}")
        for name, value in vars(module).items():
            if name.startswith(("right_", "wrong_")) and (isinstance(value, tuple) or
                                                          getattr(value, "__module__", "") == module.__name__):
                found.append((path.stem, name, value if isinstance(value, tuple) else (value,)))
    return found


ALL = attempts()


def test_the_corpus_covers_every_exercise_with_two_rights_and_five_wrongs():
    names = {exercise for exercise, _, _ in ALL}
    assert names == set(EXERCISES)
    for exercise in names:
        kinds = [name.split("_")[0] for e, name, _ in ALL if e == exercise]
        assert kinds.count("right") >= 2 and kinds.count("wrong") >= 5, exercise
    wrongs = {(e, n) for e, n, _ in ALL if n.startswith("wrong_")}
    named = {(e, n) for e, table in VERDICTS.items() for n in table}
    allowed = {(e, n) for e, table in RIGHT_BY_STATEMENT.items() for n in table}
    assert wrongs == named | allowed and not named & allowed


@pytest.mark.parametrize("exercise,name,functions", [a for a in ALL if a[1].startswith("right_")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_a_right_attempt_passes(exercise, name, functions):
    verdict = EXERCISES[exercise].check(*functions, record=False)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("exercise,name,functions", [a for a in ALL if a[1].startswith("wrong_")],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_a_wrong_attempt_fails_with_its_mistake_named(exercise, name, functions):
    verdict = EXERCISES[exercise].check(*functions, record=False)
    if name in RIGHT_BY_STATEMENT.get(exercise, {}):
        assert verdict.passed, verdict.message
        return
    assert not verdict.passed and verdict.counted, verdict.message
    assert VERDICTS[exercise][name].lower() in verdict.message.lower(), verdict.message
    assert "Traceback" not in verdict.message
