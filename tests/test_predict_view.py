"""Chapter 6's prediction cards: one question before each experiment, its answer kept with the quiz progress."""
import pytest

from course_utils.chapters.ch06_predictions import PREFIX, prediction, prediction_bank, predictions_made
from course_utils.infra.quiz import ProgressStore, load_bank, option_order
from course_utils.widgets.predict_view import HEADING, PredictView, predict

EXPERIMENTS = ("adam-lr-one", "lr-plateau", "same-lr", "fair-race", "zero-grad", "no-grad", "schedules")


def test_every_experiment_has_a_prediction_and_only_those():
    bank = prediction_bank(6)
    assert [q.id for q in bank.questions] == [PREFIX + e for e in EXPERIMENTS]
    assert {q.id for q in bank.questions}.isdisjoint({q.id for q in load_bank(6).questions})


def test_the_card_reads_as_text_in_the_order_jupyterlab_shows(tmp_path):
    view = predict(6, "same-lr", ProgressStore(tmp_path / "p.json"))
    text = view.text()
    q = view.question
    assert text.startswith(f"{HEADING}: {q.prompt}")
    shown = [line.split(") ", 1)[1] for line in text.splitlines()[1:-1]]
    assert shown == [q.options[i].text for i in option_order("06", q)]
    assert [label for label, _ in view.card.input.options] == shown
    assert HEADING in view.widget.children[0].value


def test_a_prediction_is_saved_with_the_progress_and_leaves_the_quiz_counts_alone(tmp_path):
    store = ProgressStore(tmp_path / "p.json")
    view = PredictView(6, "predict-no-grad", store)
    wrong = next(i for i, o in enumerate(view.question.options) if not o.correct)
    view.card.set_answer(wrong)
    result = view.card.submit()
    assert not result.counted or not result.correct
    saved = predictions_made(store, 6)
    assert saved == {"predict-no-grad": {"attempts": 1, "correct": False, "answer": wrong}}
    assert [row[2] for row in store.summary([load_bank(6)])] == [0]      # the quiz: nothing answered
    again = PredictView(6, "no-grad", store)                                 # a new session: restored
    assert again.card.input.value == wrong and "Earlier" in again.card.feedback.value


def test_unknown_predictions_and_bad_ids_raise(tmp_path):
    with pytest.raises(KeyError):
        prediction(6, "no-such-experiment")
    with pytest.raises(ValueError, match="no question bank"):
        prediction_bank(42)
