"""Issue 40 item 1: every sentence of every exercise statement is in the statement -> check table
(course_utils/exercises/rules.py), verbatim, either as a rule naming the check that enforces it or as an aside
with its reason; every named check exists in the exercise's module; and every rule's counter-example
(tests/exercise_rule_counterexamples.py: the course's solution broken in exactly that sentence) is rejected by
the exercise's checker, the Fail passing through the named check, with the rule's phrase in the message."""
from __future__ import annotations

import sys
import traceback
import types
from pathlib import Path

import pytest
import torch

from course_utils.exercises import EXERCISES, core
from course_utils.exercises.core import Attempt
from course_utils.exercises.limits import time_limit
from course_utils.exercises.rules import ASIDES, RULES, sentences
from course_utils.exercises.solutions import SOLUTIONS
from course_utils.exercises.words import Fail
from tests.exercise_rule_counterexamples import COUNTER

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import mutate_exercises as M  # noqa: E402  (tools/mutate_exercises.py: mutant ids)

REASONS = {"input", "permission", "motivation", "aside", "instruction"}
# Exercises whose table is not written yet: named here, never skipped silently (none since issue 40 item 1 closed).
PENDING: set[str] = set()


def statement(name: str) -> str:
    """The exercise's statement: the markdown cell from its '### Exercise' heading (not included) to its stub."""
    chapter = EXERCISES[name].chapter
    source = next((ROOT / "notebooks" / "src").glob(f"{chapter}_*.py")).read_text()
    end = source.index(f'check("{name}")')
    cell = source[source.rindex("### Exercise", 0, end):end].split("\n# %%")[0]
    return " ".join(line.removeprefix("#").strip() for line in cell.splitlines()[1:]).strip()


def test_every_sentence_of_every_statement_is_in_the_table():
    assert set(RULES) == set(ASIDES) == set(EXERCISES) - PENDING
    problems = []
    for name in RULES:
        said = sentences(statement(name))
        ruled = {sentence for _, sentence, _, _ in RULES[name]}
        for sentence in said:
            if sentence not in ruled and sentence not in ASIDES[name]:
                problems.append(f"{name}: no check for the sentence {sentence!r}")
        for sentence in ruled | set(ASIDES[name]):
            if sentence not in said:
                problems.append(f"{name}: the table holds a sentence the statement no longer says: {sentence!r}")
        problems += [f"{name}: {s!r} is both a rule and an aside" for s in ruled & set(ASIDES[name])]
        problems += [f"{name}: aside reason {r!r} is not one of {sorted(REASONS)}" for r in ASIDES[name].values()
                     if r not in REASONS]
    assert not problems, "\n".join(problems)


def test_the_pending_exercises_are_named_and_their_statements_still_split():
    assert PENDING <= set(EXERCISES) and not PENDING & set(RULES)
    assert all(len(sentences(statement(name))) >= 3 for name in PENDING)


def _resolve(module: types.ModuleType, check: str) -> bool:
    outer, _, inner = check.partition(".")
    fn = getattr(module, outer, None)
    if not callable(fn):
        return False
    return not inner or any(isinstance(c, types.CodeType) and c.co_name == inner for c in fn.__code__.co_consts)


def test_every_named_check_exists_and_every_rule_has_one_counter_example():
    problems = []
    for name, rules in RULES.items():
        module = sys.modules[EXERCISES[name].checker.__module__]
        labels = [label for label, *_ in rules]
        if len(set(labels)) != len(labels):
            problems.append(f"{name}: labels repeat")
        for label, _, check, phrase in rules:
            if not _resolve(module, check):
                problems.append(f"{name}.{label}: no check {check!r} in {module.__name__}")
            if not phrase.strip():
                problems.append(f"{name}.{label}: no phrase")
        if set(COUNTER.get(name, {})) != set(labels):
            problems.append(f"{name}: counter-examples {sorted(COUNTER.get(name, {}))} vs rules {sorted(labels)}")
    assert not problems, "\n".join(problems)


def _functions(name: str, spec: object) -> tuple:
    solution = SOLUTIONS[name]
    if isinstance(spec, str):
        mutant = next((m for m in M.exercise_mutants(name) if m.id == spec), None)
        assert mutant is not None, f"{name}: no mutant {spec!r} (tools/mutate_exercises.py --list {name})"
        functions = list(solution)
        functions[mutant.position] = M.compile_mutant(mutant, solution[mutant.position])
        return tuple(functions)
    return spec if isinstance(spec, tuple) else (spec,)


def _failure(name: str, functions: tuple) -> tuple[list[str], str]:
    """Run the exercise's checker as Exercise.check does; the functions of its module the Fail passed through
    (its traceback and the exceptions it was raised while handling) and the verdict's message."""
    exercise = EXERCISES[name]
    module = exercise.checker.__module__
    core._warm_torch()
    attempt = Attempt(exercise, functions)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]), time_limit(exercise.time_limit) as deadline:
            attempt.deadline = deadline
            exercise.checker(attempt)
    except Fail as failure:
        names, error = [], failure
        while error is not None:
            names += [frame.f_code.co_name for frame, _ in traceback.walk_tb(error.__traceback__)
                      if frame.f_globals.get("__name__") == module]
            error = error.__context__
        return names, exercise._failed(failure, attempt).message
    finally:
        torch.set_num_threads(threads)
    return [], "passed"


CASES = [(name, rule) for name, rules in RULES.items() for rule in rules]


@pytest.mark.parametrize("name,rule", CASES, ids=[f"{n}.{r[0]}" for n, r in CASES])
def test_each_rule_s_counter_example_is_rejected_by_its_check(name, rule):
    label, sentence, check, phrase = rule
    names, message = _failure(name, _functions(name, COUNTER[name][label]))
    assert message != "passed", f"{name}: no check enforces {sentence!r} (counter-example {label!r} passes)"
    assert check.rpartition(".")[2] in names, (check, names, message)
    assert phrase.lower() in message.lower(), (phrase, message)
