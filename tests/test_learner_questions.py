"""The corpus of real learner questions (issue 31) and the symptom index generated from it.

Every question points at a notebook cell that answers it by a run (its ``answers-<anchor>`` tag), and that cell
exists, is compared by nbval (not ignored) and has printed output in the committed notebook; or the question
says why it is out of scope, for at most 1 in 10.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from course_utils.chapters import ch09_symptoms
from course_utils.chapters.ch09_symptoms import CorpusError, parse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import learner_questions  # noqa: E402  (tools/learner_questions.py)

ANSWERS, QUESTIONS = ch09_symptoms.corpus()


def test_the_corpus_is_large_and_mostly_answered():
    assert len(QUESTIONS) >= 80
    out = [q for q in QUESTIONS if q.out_of_scope]
    assert len(out) * 10 <= len(QUESTIONS), f"{len(out)} of {len(QUESTIONS)} out of scope: more than 1 in 10"
    assert all(len(q.out_of_scope) > 20 for q in out), "an out-of-scope question says why"


def test_questions_come_from_many_public_places():
    hosts = Counter(s.split("/")[2] for q in QUESTIONS for s in q.sources)
    assert len(hosts) >= 5, hosts
    assert hosts.most_common(1)[0][1] <= 0.6 * len(QUESTIONS), "one site should not make the corpus"
    links = [s for q in QUESTIONS for s in q.sources]
    assert len(links) == len(set(links)), "a thread is one question: the same link twice"


def test_every_answered_question_points_at_a_tagged_compared_cell_and_the_readme_is_generated():
    assert learner_questions.problems() == []


def test_every_answer_cell_has_printed_output_in_the_committed_notebook():
    asked = {q.anchor for q in QUESTIONS if q.anchor}
    printed = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for tag in cell.get("metadata", {}).get("tags", []):
                if tag.startswith(ch09_symptoms.TAG_PREFIX):
                    text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                                   for o in cell.get("outputs", []))
                    printed[tag[len(ch09_symptoms.TAG_PREFIX):]] = text.strip()
    missing = sorted(a for a in asked if not printed.get(a))
    assert not missing, f"answer cells without printed output: {missing}"


def test_every_thin_area_of_the_issue_is_answered():
    topics = Counter(q.topic for q in QUESTIONS if q.anchor)
    for topic in ("reading curves", "best weights", "evaluation across ranks", "imbalanced data on ranks",
                  "mixed precision", "checkpoints", "accumulation", "dataloader workers", "errors in loops",
                  "schedules and warmup", "collation"):
        assert topics[topic] >= 1, f"no answered question on {topic}: {sorted(topics)}"


def test_the_index_lists_each_asked_answer_once_in_chapter_order():
    rows = ch09_symptoms.index_rows()
    asked = {q.anchor for q in QUESTIONS if q.anchor}
    assert len(rows) == len(asked)
    chapters = [int(where.split()[1]) for _, _, where, _ in rows]
    assert chapters == sorted(chapters)
    assert sum(n for *_, n in rows) == sum(1 for q in QUESTIONS if q.anchor)
    section = ch09_symptoms.symptom_section()
    assert all(s in section.body_text for s, *_ in rows)


def test_chapter_9_prints_the_index():
    source = (ROOT / "notebooks" / "src" / "09_cheat_sheet.py").read_text(encoding="utf-8")
    assert "symptom_section()" in source


def _raw(**question):
    q = {"id": "q1", "topic": "t", "question": "why?", "sources": ["https://example.org/1"], "anchor": "a"}
    q.update(question)
    return {"answers": {"a": {"chapter": 1, "symptom": "s", "why": "w"}}, "questions": [q]}


@pytest.mark.parametrize("question, words", [
    ({"anchor": "b"}, "not among the answers"),
    ({"anchor": None}, "either an anchor or an out_of_scope"),
    ({"out_of_scope": "needs a cluster"}, "either an anchor or an out_of_scope"),
    ({"sources": []}, "https://"),
    ({"sources": ["http://example.org"]}, "https://"),
])
def test_a_broken_corpus_is_refused_with_the_question_named(question, words):
    with pytest.raises(CorpusError, match=words):
        parse(_raw(**question))
    assert parse(_raw())[1][0].anchor == "a"


def test_a_tag_missing_from_the_notebooks_is_reported(monkeypatch):
    monkeypatch.setattr(learner_questions, "tagged_cells", lambda: {})
    found = learner_questions.problems()
    assert found and all("0 cells carry the tag" in line or "not the generated" in line for line in found)
