"""The symptom index (chapter 9 and the README): what you see -> why -> where the course shows it.

Generated from ``learner_questions.json``, the course's corpus of real questions learners ask about their
training loops: each question (a paraphrase, its public sources, a topic) points at the ``answers-<anchor>``
tag of the notebook cell whose run answers it, says why it is out of the course's scope, says what the course
would need to show to answer it (``unanswered``: listed, not indexed), or is held out ungraded (below). Each anchor
carries the symptom a learner sees, the reason, and the chapter and section that show it (kept true by
``tests/test_learner_questions.py``; ``python tools/learner_questions.py sync`` refreshes the sections and
the README's copy of the index).

The corpus is split once, by a hash of each question's first link (``split_half``), into a half the course is
written from (``"write"``) and a half it is only graded on (``"grade"``). A question of the grade half that was
never judged carries ``"ungraded": true`` and no answer: a grader who did not write the sections decides, from
the questions alone (``python tools/learner_questions.py packet``), whether the course answers them. The gap
between the two halves' answered rates measures how well the course generalises beyond the questions it saw.

Each answer also carries its ``evidence``: exact lines (or distinctive parts of lines) of what the notebook, as
committed, prints for that row, checked by ``tools/symptom_evidence.py`` (``tests/test_symptom_evidence.py``).
The rule: every evidence line is printed (stdout, stderr or text/plain, after nbval's sanitizers) by a code cell
of the answer's section, the cells from the heading the index names to the next heading, that nbval compares
and that is not a prediction card; at least one is printed by the tagged cell itself; every number in the
``why`` is among the evidence's numbers. A row no printed line supports says so in ``evidence_missing`` (a
known gap, reported), never with invented evidence.
"""
from __future__ import annotations

import hashlib
import html
import json
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from course_utils.chapters.ch09_cheatsheet import Section, _inline, _table

DATA = Path(__file__).with_name("learner_questions.json")
TAG_PREFIX = "answers-"
HALVES = ("write", "grade")
STATES = ("anchored", "out of scope", "unanswered", "ungraded")


def split_half(link: str) -> str:
    """The half a question belongs to, from its first link alone: "write" when the SHA-256 of the link (UTF-8),
    read as an integer, is even, else "grade". Fixed once, for every question, old and new."""
    return HALVES[int(hashlib.sha256(link.encode("utf-8")).hexdigest(), 16) % 2]


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
    """One learner question: a paraphrase, where it was asked, its topic, its half, and exactly one of: its answer
    (``anchor``), why it is out of scope, what the course would need to show (``unanswered``), or ``ungraded``."""

    id: str
    topic: str
    question: str
    sources: tuple[str, ...]
    anchor: str | None
    out_of_scope: str | None
    half: str = "write"
    unanswered: str | None = None
    ungraded: bool = False

    @property
    def state(self) -> str:
        """"anchored", "out of scope", "unanswered" or "ungraded"."""
        if self.anchor is not None:
            return "anchored"
        if self.out_of_scope is not None:
            return "out of scope"
        return "unanswered" if self.unanswered is not None else "ungraded"


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
        sources = tuple(q["sources"])
        if not sources or not all(s.startswith("https://") for s in sources):
            raise CorpusError(f"question {qid}: every source must be an https:// link, and there must be one")
        half = q.get("half")
        if half != split_half(sources[0]):
            raise CorpusError(f"question {qid}: half {half!r}, but its first link's hash puts it in "
                              f"{split_half(sources[0])!r} (split_half)")
        anchor, reason, need = q.get("anchor"), q.get("out_of_scope"), q.get("unanswered")
        ungraded = q.get("ungraded", False)
        if ungraded not in (True, False):
            raise CorpusError(f"question {qid}: ungraded is true or absent, not {ungraded!r}")
        given = [anchor is not None, reason is not None, need is not None, ungraded]
        if sum(given) != 1:
            raise CorpusError(f"question {qid}: give exactly one of an anchor, an out_of_scope reason, what it would "
                              f"need (unanswered) or ungraded: true")
        if anchor is not None and anchor not in answers:
            raise CorpusError(f"question {qid}: anchor {anchor!r} is not among the answers")
        for name, text in (("out_of_scope", reason), ("unanswered", need)):
            if text is not None and (not isinstance(text, str) or len(text.strip()) < 20):
                raise CorpusError(f"question {qid}: {name} says in a sentence why (20 characters at least)")
        if ungraded and half != "grade":
            raise CorpusError(f"question {qid}: only a question of the grade half can be ungraded")
        questions.append(Question(qid, q["topic"], q["question"], sources, anchor, reason, half, need, ungraded))
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


def place(link: str) -> str:
    """Where a question was asked: a GitHub repository's tracker (owner/name), else the site's host."""
    parts = link.split("/")
    return "/".join(parts[3:5]) if parts[2] == "github.com" else parts[2]


def summary() -> str:
    """One line: how many questions, from how many places, and how many in each state."""
    _, questions = corpus()
    hosts = {s.split("/")[2] for q in questions for s in q.sources}
    repos = {place(s) for q in questions for s in q.sources} - hosts
    count = Counter(q.state for q in questions)
    line = (f"{len(questions)} real questions from {len(hosts)} sites and {len(repos)} GitHub repositories: "
            f"{count['anchored']} answered by a cell of the course, {count['out of scope']} out of its scope")
    if count["unanswered"]:
        line += f", {count['unanswered']} not answered yet"
    if count["ungraded"]:
        line += f", {count['ungraded']} held out for a grader who did not write the course"
    return line


def halves() -> dict[str, Counter]:
    """Per half ("write", "grade"): how many questions in each state."""
    _, questions = corpus()
    return {half: Counter(q.state for q in questions if q.half == half) for half in HALVES}


def unanswered_rows() -> list[tuple[str, str, str]]:
    """(id, question, what the course would need to show) for every question not answered yet: listed, not indexed."""
    _, questions = corpus()
    return [(q.id, q.question, q.unanswered) for q in questions if q.unanswered is not None]


def grade_packet() -> list[dict]:
    """The grade half as a blind grader sees it: id, question, topic, sources; no anchor, reason or hint."""
    _, questions = corpus()
    return [{"id": q.id, "question": q.question, "topic": q.topic, "sources": list(q.sources)}
            for q in questions if q.half == "grade"]


def symptom_section() -> Section:
    """The symptom index as a cheat-sheet section (chapter 9)."""
    rows = index_rows()
    body_html, body_text = _table([(_inline(s), _inline(w), _inline(p)) for s, w, p, _ in rows],
                                  ("what you see", "why", "where the course shows it"), (34, 44, 22))
    return Section("What you see → why → where", f"<p>{html.escape(summary())}</p>{body_html}",
                   f"{summary()}\n{body_text}")


def index_markdown() -> str:
    """The symptom index as a Markdown table (the README's copy)."""
    lines = [summary() + ".", "", "| what you see | why | where the course shows it |", "|---|---|---|"]
    lines += [f"| {s} | {w} | {p} |" for s, w, p, _ in index_rows()]
    return "\n".join(lines)
