"""Prediction cards ask before they tell (issue 42, review X.1): the prose a learner reads between the previous card's
answer and a card must not state that card's answer.

Read from the chapter sources: for every ``predict(N, "id")`` cell, the markdown since the previous answer box (or
the chapter's start); the card's correct option, from its bank. "States the answer" is measured as a run of the correct
option's content words (four, or all of them for a shorter option) found, in order, in that prose, after
lower-casing and dropping punctuation. It catches an answer restated in its own words, not a paraphrase: the
review's reading (X.1) remains the check for those.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from notebooks import parse_source  # noqa: E402

STOP = set("a an the of to in on at by for with and or is are was be it its this that these those as than then "
           "from into each every one two no not only so".split())
CARD = re.compile(r"predict\((\d+),\s*\"([\w-]+)\"\)")


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9_.]+", text.lower().replace("`", "")) if w not in STOP]


def shingles(text: str, n: int = 4) -> set[tuple[str, ...]]:
    found = words(text)
    return {tuple(found[i:i + n]) for i in range(len(found) - n + 1)}


def answer_runs(answer: str) -> set[tuple[str, ...]]:
    """The runs of the answer's content words that would give it away: four in a row, or all of a shorter one."""
    return shingles(answer, min(4, max(2, len(words(answer)))))


def cards() -> list[tuple[str, str, str]]:
    """(chapter file, card id, the markdown a learner reads just before the card) for every card."""
    found = []
    for src in sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")):
        prose: list[str] = []
        for cell in parse_source(src.read_text(encoding="utf-8")):
            if cell["type"] == "markdown":
                prose.append(cell["source"])
                continue
            match = CARD.search(cell["source"])
            if match:
                found.append((src.name, f"predict-{match.group(2)}", "\n".join(prose)))
                prose = []
            elif "answer(" in cell["source"]:
                prose = []
    return found


def correct_options(chapter_file: str, card: str) -> list[str]:
    bank = json.loads((ROOT / "course_utils" / "infra" / "quizzes" / "predictions" /
                       f"ch{chapter_file[:2]}.json").read_text(encoding="utf-8"))
    question = next(q for q in bank["questions"] if q["id"] == card)
    return [o["text"] for o in question["options"] if o.get("correct")]


def stated(prose: str, answers: list[str]) -> list[tuple[str, ...]]:
    found = set()
    for answer in answers:
        runs = answer_runs(answer)
        seen = shingles(prose, len(next(iter(runs)))) if runs else set()
        found |= runs & seen
    return sorted(found)


ALL = cards()


def test_every_card_is_found_with_its_bank_entry():
    assert len(ALL) >= 20
    for chapter_file, card, _ in ALL:
        assert correct_options(chapter_file, card), f"{chapter_file}: {card} has no correct option"


@pytest.mark.parametrize("chapter_file, card, prose", ALL, ids=[c for _, c, _ in ALL])
def test_the_prose_before_a_card_does_not_state_its_answer(chapter_file, card, prose):
    found = stated(prose, correct_options(chapter_file, card))
    assert not found, f"{chapter_file}: the prose before {card} already says {found}"


def test_the_check_catches_an_answer_told_in_advance():
    told = "The obvious line, `best = model.state_dict()`, restores the last epoch's weights."
    assert stated(told, ["The last epoch's"])                              # a short answer: all its words
    assert stated("so the second batch's backward raises an error", ["The second batch's backward raises an error"])
    assert not stated("Early stopping keeps the weights of the best validation epoch.", ["The last epoch's"])
