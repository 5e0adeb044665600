"""Issue 27: a restarted quiz shows the saved state truthfully, a retyped right number is not a new attempt, a
decimal comma is never read as thousands, and a damaged progress file is said in the view, not as a warning."""
import warnings

import pytest

from course_utils.infra.quiz import ProgressStore, check, load_bank
from course_utils.widgets.quiz_view import QuizView


def _card(view, qid):
    return next(c for c in view.cards if c.question.id == qid)


def test_a_green_card_never_shows_a_later_wrong_answer(tmp_path):
    store = ProgressStore(tmp_path / "p.json")
    card = _card(QuizView(load_bank(0), store), "iters-50k-256")
    for typed in ("195", "196", "-50"):            # wrong, right, then wrong again
        card.set_answer(typed)
        card.check_button.click()
    restored = _card(QuizView(load_bank(0), ProgressStore(tmp_path / "p.json")), "iters-50k-256")
    assert restored.input.value == "196" and "answered correctly after 3 attempt(s)" in restored.feedback.value
    assert "Your last answer was not right" in restored.feedback.value


def test_an_old_record_without_the_right_answer_shows_no_wrong_one(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"version": 1, "chapters": {"00": {"iters-50k-256": '
                    '{"attempts": 7, "correct": true, "answer": "-50"}}}}')
    card = _card(QuizView(load_bank(0), ProgressStore(path)), "iters-50k-256")
    assert card.input.value == "" and "answered correctly after 7 attempt(s)" in card.feedback.value


def test_a_card_not_yet_right_shows_the_last_answer_in_neutral_colours(tmp_path):
    store = ProgressStore(tmp_path / "p.json")
    card = _card(QuizView(load_bank(0), store), "iters-50k-256")
    card.set_answer("195")
    card.check_button.click()
    restored = _card(QuizView(load_bank(0), ProgressStore(tmp_path / "p.json")), "iters-50k-256")
    assert restored.input.value == "195" and "not yet answered correctly" in restored.feedback.value
    assert "#e8f5e9" not in restored.feedback.value                       # not green


@pytest.mark.parametrize("again", ["196", "196.0", "1.96e2", " 196 ", "196.00"])
def test_retyping_the_right_number_is_not_a_new_attempt(tmp_path, again):
    store = ProgressStore(tmp_path / "p.json")
    card = _card(QuizView(load_bank(0), store), "iters-50k-256")
    card.set_answer("196")
    card.check_button.click()
    card.set_answer(again)
    card.check_button.click()
    assert store.chapter("00")["iters-50k-256"]["attempts"] == 1 and "not counted again" in card.feedback.value
    restored = _card(QuizView(load_bank(0), ProgressStore(tmp_path / "p.json")), "iters-50k-256")
    restored.set_answer(again)                                              # after a restart too
    restored.check_button.click()
    assert store.chapter("00")["iters-50k-256"]["attempts"] == 1


def test_a_decimal_comma_is_refused_not_read_as_thousands():
    q = load_bank(0).question("iters-50k-256")
    result = check(q, "19,6")
    assert not result.counted and "ambiguous" in result.message
    assert check(q, "1e400").counted is False and "out of range" in check(q, "1e400").message


def test_select_all_that_apply_is_said_once(tmp_path):
    view = QuizView(load_bank(0), ProgressStore(tmp_path / "p.json"))
    card = _card(view, "what-changes-with-k")
    title = card.widget.children[0].value.lower()
    assert title.count("select all that apply") == 1


def test_a_damaged_progress_file_is_said_in_the_view_not_as_a_warning(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"version": 1, "chapters": {"00": {"iters-50k-256": {"attempts": 1, "correct": true, '
                    '"answer": "196"}, "bad": {"attempts": "x"}}}}')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        view = QuizView(load_bank(0), ProgressStore(path))
    assert "1 of 2 saved answers were kept" in view.notice.value and str(tmp_path) not in view.notice.value
    assert _card(view, "iters-50k-256").input.value == "196"
