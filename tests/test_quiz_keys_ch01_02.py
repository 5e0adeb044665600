"""Chapter 1-2 quiz keys agree with the engines and the hand calculations."""
import pytest

from course_utils.quiz import check, load_bank
from course_utils.widgets.quiz_view import quiz


@pytest.mark.parametrize("chapter,qid,value", [
    (1, "batches-100-16", 7), (1, "skipped-1000-64", 40),
    (2, "unweighted-cats-32", 3.2), (2, "weighted-cats-32", 16), (2, "padding-copies-10-4", 2),
])
def test_numeric_keys(chapter, qid, value):
    q = load_bank(chapter).question(qid)
    assert q.answer == pytest.approx(value)
    assert check(q, str(value)).correct


@pytest.mark.parametrize("chapter", [1, 2])
def test_banks_complete(chapter, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PROGRESS", str(tmp_path / "p.json"))
    bank = load_bank(chapter)
    assert len(bank.questions) >= 3
    assert all(o.feedback for q in bank.questions for o in q.options)
    view = quiz(chapter)
    for card in view.cards:
        card.reveal_button.click()
        assert card.feedback.value
    ids = {q.id for q in bank.questions}
    assert ("drop-last-does" if chapter == 1 else "distributed-ensures") in ids
