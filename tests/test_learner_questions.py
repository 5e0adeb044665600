"""The corpus of real learner questions (issues 31 and 43.5) and the symptom index generated from it.

Every question is in exactly one state: it points at a notebook cell that answers it by a run (its
``answers-<anchor>`` tag: the cell exists, is compared by nbval (not ignored) and has printed output in the
committed notebook); or it says why it is out of scope (at most 1 in 10 of the judged questions); or it says what
the course would need to show to answer it (``unanswered``: listed, not indexed); or, in the half the course is
only graded on, it is ``ungraded`` until a grader who did not write the course judges it. The halves are fixed
by a hash of each question's first link (``split_half``).
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from course_utils.chapters import ch09_symptoms
from course_utils.chapters.ch09_symptoms import CorpusError, parse, place, split_half

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import learner_questions  # noqa: E402  (tools/learner_questions.py)

ANSWERS, QUESTIONS = ch09_symptoms.corpus()


def test_the_corpus_is_large_and_every_question_is_in_exactly_one_state():
    assert len(QUESTIONS) >= 250
    raw = json.loads(ch09_symptoms.DATA.read_text(encoding="utf-8"))["questions"]
    for q in raw:
        given = [q.get("anchor") is not None, q.get("out_of_scope") is not None, q.get("unanswered") is not None,
                 q.get("ungraded", False) is True]
        assert sum(given) == 1, q["id"]
    judged = [q for q in QUESTIONS if q.state != "ungraded"]
    out = [q for q in judged if q.out_of_scope]
    assert len(out) * 10 <= len(judged), f"{len(out)} of {len(judged)} judged questions out of scope: more than 1 in 10"
    assert all(len(q.out_of_scope) > 20 for q in out), "an out-of-scope question says why"
    assert all(len(q.unanswered) > 20 for q in QUESTIONS if q.unanswered), "an unanswered question says what it needs"


def test_the_split_is_the_hash_of_the_first_link_for_every_question():
    for q in json.loads(ch09_symptoms.DATA.read_text(encoding="utf-8"))["questions"]:
        digest = int(hashlib.sha256(q["sources"][0].encode("utf-8")).hexdigest(), 16)
        assert q["half"] == ("write" if digest % 2 == 0 else "grade"), q["id"]
        assert q["half"] == split_half(q["sources"][0]), q["id"]
    halves = {half: sum(q.half == half for q in QUESTIONS) for half in ("write", "grade")}
    assert min(halves.values()) >= 0.4 * len(QUESTIONS), halves


def test_only_the_grade_half_is_ungraded_and_the_packet_gives_no_hint():
    assert all(q.half == "grade" for q in QUESTIONS if q.ungraded)
    assert all(q.state != "ungraded" for q in QUESTIONS if q.half == "write"), "the write half is judged"
    packet = ch09_symptoms.grade_packet()
    assert [p["id"] for p in packet] == [q.id for q in QUESTIONS if q.half == "grade"]
    assert all(set(p) == {"id", "question", "topic", "sources"} for p in packet)


def test_unanswered_questions_are_listed_not_indexed():
    listed = {qid for qid, _, _ in ch09_symptoms.unanswered_rows()}
    assert listed == {q.id for q in QUESTIONS if q.unanswered}
    assert sum(n for *_, n in ch09_symptoms.index_rows()) == sum(1 for q in QUESTIONS if q.anchor)


def test_questions_come_from_many_public_places():
    # a place is a site, or one repository's tracker on GitHub: most questions are GitHub issues, from many projects
    hosts = Counter(s.split("/")[2] for q in QUESTIONS for s in q.sources)
    places = Counter(place(s) for q in QUESTIONS for s in q.sources)
    assert len(hosts) >= 5 and len(places) >= 100, (len(hosts), len(places))
    assert places.most_common(1)[0][1] <= 0.2 * len(QUESTIONS), "one site or repository should not make the corpus"
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


WRITE_LINK, GRADE_LINK = "https://example.org/1", "https://example.org/4"   # split_half: "write", "grade"


def _raw(**question):
    q = {"id": "q1", "topic": "t", "question": "why?", "sources": [WRITE_LINK], "half": "write", "anchor": "a"}
    q.update(question)
    return {"answers": {"a": {"chapter": 1, "symptom": "s", "why": "w"}}, "questions": [q]}


NEED = "a cell that shows what the question asks"


@pytest.mark.parametrize("question, words", [
    ({"anchor": "b"}, "not among the answers"),
    ({"anchor": None}, "exactly one of"),
    ({"out_of_scope": "needs a cluster to show it"}, "exactly one of"),
    ({"anchor": None, "unanswered": NEED, "out_of_scope": "needs a cluster to show it"}, "exactly one of"),
    ({"ungraded": True}, "exactly one of"),
    ({"anchor": None, "unanswered": "more"}, "20 characters"),
    ({"anchor": None, "ungraded": True}, "only a question of the grade half"),
    ({"anchor": None, "ungraded": "yes"}, "ungraded is true or absent"),
    ({"half": "grade"}, "hash puts it in 'write'"),
    ({"half": None}, "split_half"),
    ({"sources": []}, "https://"),
    ({"sources": ["http://example.org"]}, "https://"),
])
def test_a_broken_corpus_is_refused_with_the_question_named(question, words):
    with pytest.raises(CorpusError, match=words):
        parse(_raw(**question))
    assert parse(_raw())[1][0].anchor == "a"


def test_the_four_states_are_read():
    assert split_half(WRITE_LINK) == "write" and split_half(GRADE_LINK) == "grade"
    assert parse(_raw())[1][0].state == "anchored"
    assert parse(_raw(anchor=None, out_of_scope="needs a cluster to show it"))[1][0].state == "out of scope"
    assert parse(_raw(anchor=None, unanswered=NEED))[1][0].state == "unanswered"
    ungraded = parse(_raw(anchor=None, ungraded=True, sources=[GRADE_LINK], half="grade"))[1][0]
    assert ungraded.state == "ungraded" and ungraded.half == "grade"


def test_a_tag_missing_from_the_notebooks_is_reported(monkeypatch):
    monkeypatch.setattr(learner_questions, "tagged_cells", lambda: {})
    found = learner_questions.problems()
    assert found and all("0 cells carry the tag" in line or "not the generated" in line for line in found)


def test_the_blind_grades_cover_exactly_the_held_out_questions_and_a_calibration_of_anchored_ones():
    """tools/blind_grades.json: every held-out (grade half, ungraded) question graded once, nothing else among the
    held-out grades; the calibration questions are questions the author anchored."""
    import json
    graded = json.loads((ROOT / "tools" / "blind_grades.json").read_text(encoding="utf-8"))
    questions = {q.id: q for q in ch09_symptoms.corpus()[1]}
    held_out = {qid for qid, q in questions.items() if q.state == "ungraded"}
    sets = [graded] + [graded[k] for k in sorted(graded) if k.startswith("fresh")]   # fresh sets, each by its reader
    each = [set(s["held_out"]) for s in sets]
    assert set().union(*each) == held_out and sum(map(len, each)) == len(held_out) and len(held_out) >= 70
    for s in sets:
        grades = {**s["held_out"], **s.get("held_out_write_half", {})}
        assert grades and all(g["grade"] in ("answered", "partly", "not answered", "out of scope") for g in grades.values())
        assert all(questions[qid].anchor == g["author_anchor"] for qid, g in s["calibration"].items())
        # a set kept unseen in the write half (its halves used the other way round): write-half questions, each
        # anchored only where the reader found it answered, or with what it needs
        for qid, g in s.get("held_out_write_half", {}).items():
            q = questions[qid]
            assert q.half == "write" and q.state in ("anchored", "unanswered"), qid
            assert g["grade"] != "answered" or q.state == "anchored", qid
