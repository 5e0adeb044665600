"""The quiz engine: banks, grading, computed keys, and a progress store that never loses answers."""
import json
import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from course_utils.infra.quiz import ProgressStore, all_banks, check, load_bank, resolve_key
from course_utils.widgets.quiz_view import QuizView, course_progress


def test_every_bank_loads_and_has_three_questions_with_feedback():
    banks = all_banks()
    assert banks and [b.chapter for b in banks] == sorted(b.chapter for b in banks)
    for bank in banks:
        assert len(bank.questions) >= 3, bank.chapter
        for q in bank.questions:
            assert q.explanation.strip()
            assert all(o.feedback.strip() for o in q.options)
            if q.kind == "numeric":
                assert math.isfinite(q.answer)


def test_chapter0_keys_agree_with_a_real_dataloader():
    bank = load_bank(0)
    batches = len(DataLoader(TensorDataset(torch.zeros(50_000)), batch_size=256))
    assert bank.question("iters-50k-256").answer == batches == 196
    per_epoch = len(DataLoader(TensorDataset(torch.zeros(20_000)), batch_size=64))
    assert bank.question("updates-20k-64-k4-10").answer == 10 * math.ceil(per_epoch / 4) == 790
    kept = sum(len(x) for (x,) in DataLoader(TensorDataset(torch.zeros(1_000)), batch_size=64, drop_last=True))
    assert bank.question("drop-last-1000-64").answer == 1_000 - kept == 40
    assert bank.question("remainder-naive").answer == 313 // 4 == 78


def test_grading_single_multi_numeric():
    bank = load_bank(0)
    single = bank.question("max-steps")
    assert check(single, 0).correct and not check(single, 1).correct
    assert check(single, 1).feedback and "✗" in check(single, 1).feedback[0]
    none = check(single, None)
    assert not none.counted and none.message == "Choose an option first."
    multi = bank.question("what-changes-with-k")
    assert check(multi, {0, 2}).correct
    partial = check(multi, {0})
    assert not partial.correct and "Partly right" in partial.message and partial.feedback == ()
    wrong = check(multi, {0, 1, 2})
    assert not wrong.correct and len(wrong.feedback) == 1 and wrong.feedback[0].startswith("✗")
    assert not check(multi, set()).counted
    numeric = bank.question("iters-50k-256")
    assert check(numeric, "196").correct and check(numeric, " 1,96 ".replace(",", "")).correct
    assert "too high" in check(numeric, 197).message
    bad = check(numeric, "about two hundred")
    assert not bad.correct and not bad.counted and "not a number" in bad.message
    assert not check(numeric, "nan").counted


def test_resolve_key_rejects_calls_outside_the_package():
    with pytest.raises(ValueError, match="course_utils"):
        resolve_key({"call": "os:getcwd"})
    with pytest.raises(ValueError, match="number"):
        resolve_key("196")


def test_bad_bank_gives_a_clear_error(tmp_path):
    (tmp_path / "ch42.json").write_text(json.dumps({"title": "t", "questions": [
        {"id": "a", "type": "single", "prompt": "p", "explanation": "e",
         "options": [{"text": "x", "correct": True, "feedback": "f"}, {"text": "y", "correct": True, "feedback": "f"}]}]}))
    with pytest.raises(ValueError, match="exactly one correct"):
        load_bank(42, tmp_path)
    with pytest.raises(ValueError, match="no question bank"):
        load_bank(77, tmp_path)


def test_progress_is_merged_and_survives_reloads(tmp_path):
    path = tmp_path / "p.json"
    a, b = ProgressStore(path), ProgressStore(path)  # two notebooks open at once
    a.record("00", "q1", 196, True)
    b.record("01", "q1", 0, False)
    b.record("01", "q1", 1, True)
    fresh = ProgressStore(path)
    assert fresh.chapter("00")["q1"] == {"attempts": 1, "correct": True, "answer": 196, "right_answer": 196}
    assert fresh.chapter("01")["q1"]["attempts"] == 2 and fresh.chapter("01")["q1"]["correct"]
    assert fresh.record("00", "q1", 5, False)["correct"]  # a later wrong try keeps the earned credit
    assert not list(tmp_path.glob("*.tmp"))                 # atomic writes leave no temp files


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"chapters": {"00": 5}}', ""])
def test_corrupted_progress_is_moved_aside_never_crashes(tmp_path, content):
    path = tmp_path / "p.json"
    path.write_text(content)
    store = ProgressStore(path)
    with pytest.warns(RuntimeWarning, match="could not be read|was damaged"):
        assert store.chapter("00") == {}
    backups = list(tmp_path.glob("p.json.corrupt-*"))
    assert len(backups) == 1 and backups[0].read_text() == content  # the old bytes are kept
    store.record("00", "q", 1, True)
    assert ProgressStore(path).chapter("00")["q"]["correct"]


def test_quiz_view_checks_saves_and_restores(tmp_path):
    store = ProgressStore(tmp_path / "p.json")
    view = QuizView(load_bank(0), store)
    card = view.cards[0]
    card.set_answer("abc")
    card.check_button.click()
    assert "not a number" in card.feedback.value and store.chapter("00") == {}
    card.set_answer("195")
    card.check_button.click()
    assert "Not quite" in card.feedback.value and "Why" not in card.feedback.value
    card.set_answer("196")
    card.check_button.click()
    assert "Correct" in card.feedback.value and "Why" in card.feedback.value
    multi = view.cards[5]
    multi.set_answer({0, 2})
    multi.check_button.click()
    assert "Correct" in multi.feedback.value
    view.cards[3].reveal_button.click()
    assert "Answer:" in view.cards[3].feedback.value and view.cards[3].feedback.value.count("✗") == 3
    again = QuizView(load_bank(0), store)  # a new session
    assert again.cards[0].input.value == "196" and "answered correctly" in again.cards[0].feedback.value
    assert again.cards[5].answer() == {0, 2}
    text = course_progress(store).text()
    row = next(line for line in text.splitlines() if line.startswith("00"))
    assert row.split()[-4:-1] == ["2", "2", str(len(load_bank(0).questions))]


def test_text_form_is_readable():
    text = QuizView(load_bank(0), ProgressStore()).text()
    assert text.startswith("Quiz — chapter 00") and "Q1." in text and "    a) " in text


def test_option_order_is_shuffled_per_question_and_stable():
    from course_utils.infra.quiz import option_order
    firsts = []
    for bank in all_banks():
        for q in bank.questions:
            if q.options:
                order = option_order(bank.chapter, q)
                assert sorted(order) == list(range(len(q.options))) and order == option_order(bank.chapter, q)
                firsts.append(q.options[order[0]].correct)
    assert 0 < sum(firsts) < len(firsts) / 2, "the right option must not sit first in most questions"


def test_quiz_view_shows_options_in_shuffled_order_and_grades_the_right_one(tmp_path):
    view = QuizView(load_bank(0), ProgressStore(tmp_path / "p.json"))
    card = next(c for c in view.cards if c.question.kind == "single")
    labels = [label for label, _ in card.input.options]
    assert labels == [card.question.options[i].text for i in card.order] and card.order != sorted(card.order)
    card.check_button.click()                     # nothing chosen
    assert "Choose an option first." in card.feedback.value
    right = next(i for i, o in enumerate(card.question.options) if o.correct)
    card.input.value = right
    card.check_button.click()
    card.check_button.click()                     # the same answer again is not a new attempt
    assert "Correct" in card.feedback.value and "not counted again" in card.feedback.value
    assert view.store.chapter("00")[card.question.id]["attempts"] == 1


def test_wrong_feedback_and_hints_never_hand_over_the_key():
    for bank in all_banks():
        for q in bank.questions:
            if q.kind == "numeric":
                hint = check(q, "about a lot").message
                assert f"{q.answer:g}" not in hint and not any(ch.isdigit() for ch in hint), (q.id, hint)
                wrong = check(q, q.answer + 10 * (q.tolerance + 1))
                assert f" {q.answer:g} " not in f" {wrong.message} "
            else:
                right = {i for i, o in enumerate(q.options) if o.correct}
                for i in range(len(q.options)):
                    result = check(q, i if q.kind == "single" else {i})
                    if not result.correct:   # only the chosen wrong option is explained
                        assert all(q.options[j].text not in " ".join(result.feedback) for j in right), q.id


def test_numeric_answers_may_carry_their_unit():
    bank = load_bank(4)
    q = next(q for q in bank.questions if q.unit)
    typed = f"{q.answer:,.0f} {q.unit}"
    assert check(q, typed).correct and check(q, f"{q.answer:g}{q.unit.lower()}").correct
    assert not check(q, f"{q.answer:g} GB").counted


def test_markdown_code_in_prompts_is_rendered(tmp_path):
    view = QuizView(load_bank(0), ProgressStore(tmp_path / "p.json"))
    html = " ".join(c.widget.children[0].value for c in view.cards)
    assert "<code>" in html and "`" not in html
