"""Chapter 6's prediction cards: one question before each experiment, its answer kept with the quiz progress."""
import html
import json
import re
import sys
from pathlib import Path

import ipywidgets as w
import nbformat
import pytest

from course_utils.chapters.ch06_predictions import PREFIX, prediction, prediction_bank, predictions_made
from course_utils.infra.quiz import ProgressStore, load_bank, option_order
from course_utils.widgets.predict_view import HEADING, HIDDEN, AnswerView, PredictView, answer, predict

ROOT = Path(__file__).resolve().parents[1]

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


# --- the measurement stays out of sight until the card is answered (review finding 06.1) ----------------------

MEASURED = "no NaN on any seed: yes\nsteps within 4 x lr: 5 of 5 <seeds>\n"


def _synced_text(widget: w.Widget) -> str:
    """Everything a widget tree syncs to the browser (and so saves with the notebook), as one string."""
    parts = []
    for child in [widget, *getattr(widget, "children", ())]:
        parts.append(str(child.get_state()))
        if child is not widget:
            parts.append(_synced_text(child))
    return "".join(parts)


def _pair(tmp_path, qid="adam-lr-one"):
    store = ProgressStore(tmp_path / "p.json")
    return store, predict(6, qid, store), AnswerView(6, qid, MEASURED, store)


def test_the_measurement_is_hidden_before_the_card_is_answered(tmp_path):
    _, card, shown = _pair(tmp_path)
    state = _synced_text(shown.widget)
    assert not shown.is_open and "no NaN" not in state and "4 x lr" not in state and HIDDEN in state
    assert not shown.button.disabled                                     # no dead end: it can be shown anyway
    card.card.check_button.click()                                      # Check with nothing chosen: no attempt
    assert not shown.is_open and "no NaN" not in _synced_text(shown.widget)


def test_check_opens_it_with_the_same_number_of_lines(tmp_path):
    _, card, shown = _pair(tmp_path)
    closed = shown.screen.value
    wrong = next(i for i, o in enumerate(card.question.options) if not o.correct)
    card.card.set_answer(wrong)
    card.card.check_button.click()                                      # a wrong prediction opens it too
    assert shown.is_open and "no NaN on any seed: yes" in shown.screen.value and "&lt;seeds&gt;" in shown.screen.value
    assert closed.count("\n") == shown.screen.value.count("\n")         # no jump: the same height open or closed
    def widths(markup):                                                  # the lines as the <pre> lays them out
        return [len(line) for line in html.unescape(re.sub(r"<[^>]+>", "", markup)).split("\n")]
    assert widths(closed)[1:] == widths(shown.screen.value)[1:]          # the same widths: wrapped or scrolled alike
    assert widths(closed)[0] == max(len(HIDDEN), widths(shown.screen.value)[0])
    assert shown.button.disabled


def test_show_answer_or_its_own_button_opens_it(tmp_path):
    _, card, shown = _pair(tmp_path)
    card.card.reveal_button.click()
    assert shown.is_open
    other = AnswerView(6, "no-grad", MEASURED, ProgressStore(tmp_path / "q.json"))
    other.button.click()
    assert other.is_open


def test_only_its_own_card_opens_it(tmp_path):
    store = ProgressStore(tmp_path / "p.json")
    card = predict(6, "same-lr", store)
    shown = AnswerView(6, "adam-lr-one", MEASURED, store)
    card.card.set_answer(0)
    card.card.check_button.click()
    assert not shown.is_open


def test_a_prediction_saved_earlier_opens_it_at_once(tmp_path):
    store, card, _ = _pair(tmp_path)
    card.card.set_answer(0)
    card.card.check_button.click()
    reopened = AnswerView(6, "adam-lr-one", MEASURED, ProgressStore(tmp_path / "p.json"))   # a new session
    assert reopened.is_open and "no NaN" in reopened.screen.value


def test_the_text_forms_hold_the_printed_text(tmp_path):
    _, _, shown = _pair(tmp_path)
    data = shown._repr_mimebundle_()
    assert data["text/plain"] == MEASURED.rstrip("\n")                  # what nbval compares: the print, exactly
    assert data["text/html"].startswith("<details><summary>")           # GitHub, untrusted: closed until clicked
    assert "&lt;seeds&gt;" in data["text/html"] and "application/vnd.jupyter.widget-view+json" in data


def test_answer_captures_the_prints_and_displays_them_hidden(tmp_path, monkeypatch, capsys):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    with answer(6, "adam-lr-one", ProgressStore(tmp_path / "p.json")):
        print("no NaN on any seed: yes")
    assert capsys.readouterr().out == "" and shown[0].text() == "no NaN on any seed: yes\n"
    with pytest.raises(ZeroDivisionError), answer(6, "adam-lr-one"):   # a failing block: its prints are kept
        print("before the error")
        1 / 0
    assert capsys.readouterr().out == "before the error\n"
    with pytest.raises(KeyError):
        with answer(6, "no-such-question"):
            pass


def test_nbclient_and_nbval_agree_on_the_hidden_measurement(tmp_path):
    """The build (nbclient) records the text as the cell's output and nbval compares it: a changed print fails."""
    sys.path.insert(0, str(ROOT / "tools"))
    import nbval_perturbed
    import notebooks as nbtool

    cells = ['from course_utils.widgets.predict_view import predict, answer\npredict(6, "adam-lr-one")',
             'with answer(6, "adam-lr-one"):\n    print("measured:", 6 * 7)']
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nbtool.execute(nb)
    out = nb.cells[1].outputs
    assert [o.output_type for o in out] == ["display_data"] and out[0].data["text/plain"] == "measured: 42"
    assert "measured" not in json.dumps(nb.metadata["widgets"])          # the saved widget state keeps it hidden
    path = tmp_path / "90_predict.ipynb"
    nbformat.write(nb, path)
    assert nbval_perturbed.nbval([path], PYTHONPATH=str(ROOT)).returncode == 0
    nb.cells[1].outputs[0].data["text/plain"] = "measured: 41"
    nbformat.write(nb, path)
    assert nbval_perturbed.nbval([path], PYTHONPATH=str(ROOT)).returncode == 1
