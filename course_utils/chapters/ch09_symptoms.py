"""The symptom index (chapter 9 and the README): what you see -> why -> where the course shows it.

Generated from ``learner_questions.json``, the course's corpus of real questions learners ask about their
training loops: each question (a paraphrase, its public sources, a topic) points at the ``answers-<anchor>``
tag of the notebook cell whose run answers it, or says why it is out of the course's scope. Each anchor
carries the symptom a learner sees, the reason, and the chapter and section that show it (kept true by
``tests/test_learner_questions.py``; ``python tools/learner_questions.py sync`` refreshes the sections and
the README's copy of the index).

Each answer also carries its ``evidence``: exact lines (or distinctive parts of lines) of what the notebook, as
committed, prints for that row, checked by ``tools/symptom_evidence.py`` (``tests/test_symptom_evidence.py``).
The rule: every evidence line is printed (stdout, stderr or text/plain, after nbval's sanitizers) by a code cell
of the answer's section, the cells from the heading the index names to the next heading, that nbval compares
and that is not a prediction card; at least one is printed by the tagged cell itself; every number in the
``why`` is among the evidence's numbers. A row no printed line supports says so in ``evidence_missing`` (a
known gap, reported), never with invented evidence.
"""
from __future__ import annotations

import html
import json
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from course_utils.chapters.ch09_cheatsheet import Section, _inline, _table

DATA = Path(__file__).with_name("learner_questions.json")
TAG_PREFIX = "answers-"


@dataclass(frozen=True)
class Answer:
    """A notebook cell that answers questions: its anchor, chapter, section, the symptom it explains, and the lines
    it prints that show the why (or why no printed line does)."""

    anchor: str
    chapter: int
    section: str
    symptom: str
    why: str
    evidence: tuple[str, ...] = ()
    evidence_missing: str | None = None


@dataclass(frozen=True)
class Question:
    """One learner question: a paraphrase, where it was asked, its topic, and its answer (or why none)."""

    id: str
    topic: str
    question: str
    sources: tuple[str, ...]
    anchor: str | None
    out_of_scope: str | None


class CorpusError(ValueError):
    """The corpus file is inconsistent (a question without an answer, an unknown anchor...)."""


@lru_cache(maxsize=1)
def corpus() -> tuple[dict[str, Answer], tuple[Question, ...]]:
    """The answers (by anchor) and the questions of ``learner_questions.json``, checked for consistency."""
    return parse(json.loads(DATA.read_text(encoding="utf-8")))


def parse(raw: dict) -> tuple[dict[str, Answer], tuple[Question, ...]]:
    """Answers and questions from the corpus's JSON form; raises CorpusError naming the first problem."""
    answers = {}
    for anchor, a in raw["answers"].items():
        if not anchor or anchor != anchor.strip() or " " in anchor:
            raise CorpusError(f"anchor {anchor!r}: an anchor is one word (letters, digits, dashes)")
        answers[anchor] = Answer(anchor, int(a["chapter"]), a.get("section", ""), a["symptom"], a["why"],
                                 tuple(a.get("evidence", ())), a.get("evidence_missing"))
    questions, seen = [], set()
    for q in raw["questions"]:
        qid = q["id"]
        if qid in seen:
            raise CorpusError(f"question {qid}: the id is used twice")
        seen.add(qid)
        anchor, reason = q.get("anchor"), q.get("out_of_scope")
        if (anchor is None) == (reason is None):
            raise CorpusError(f"question {qid}: give either an anchor or an out_of_scope reason, not both or neither")
        if anchor is not None and anchor not in answers:
            raise CorpusError(f"question {qid}: anchor {anchor!r} is not among the answers")
        sources = tuple(q["sources"])
        if not sources or not all(s.startswith("https://") for s in sources):
            raise CorpusError(f"question {qid}: every source must be an https:// link, and there must be one")
        questions.append(Question(qid, q["topic"], q["question"], sources, anchor, reason))
    return answers, tuple(questions)


def where(answer: Answer) -> str:
    """'Chapter 5 · Reading the curves': where the course shows an answer."""
    return f"Chapter {answer.chapter} · {answer.section}" if answer.section else f"Chapter {answer.chapter}"


def index_rows() -> list[tuple[str, str, str, int]]:
    """(what you see, why, where, how many corpus questions it answers) for every answer asked about."""
    answers, questions = corpus()
    asked = Counter(q.anchor for q in questions if q.anchor)
    order = sorted((a for a in answers.values() if asked[a.anchor]), key=lambda a: a.chapter)
    return [(a.symptom, a.why, where(a), asked[a.anchor]) for a in order]


def summary() -> str:
    """One line: how many questions, from how many sources, how many answered and out of scope."""
    _, questions = corpus()
    hosts = {s.split("/")[2] for q in questions for s in q.sources}
    out = sum(q.out_of_scope is not None for q in questions)
    return (f"{len(questions)} real questions from {len(hosts)} sites: {len(questions) - out} answered by a "
            f"cell of the course, {out} out of its scope")


def symptom_section() -> Section:
    """The symptom index as a cheat-sheet section (chapter 9)."""
    rows = index_rows()
    body_html, body_text = _table([(_inline(s), _inline(w), html.escape(p)) for s, w, p, _ in rows],
                                  ("what you see", "why", "where the course shows it"), (34, 44, 22))
    return Section("What you see → why → where", f"<p>{html.escape(summary())}</p>{body_html}",
                   f"{summary()}\n{body_text}")


def index_markdown() -> str:
    """The symptom index as a Markdown table (the README's copy)."""
    lines = [summary() + ".", "", "| what you see | why | where the course shows it |", "|---|---|---|"]
    lines += [f"| {s} | {w} | {p} |" for s, w, p, _ in index_rows()]
    return "\n".join(lines)
