"""Chapter 6's quiz: the bank loads, and what its answers claim is what the runs measure."""
import pytest

from course_utils.quiz import check, load_bank
from course_utils.session import Session, TrainConfig
from course_utils.simulator import lr_outcome, sgd_vs_adam


def test_bank_loads_with_feedback_everywhere():
    bank = load_bank(6)
    assert len(bank.questions) >= 4
    assert all(o.feedback for q in bank.questions for o in q.options)


def test_numeric_key_is_what_the_simulator_counts():
    q = load_bank(6).question("updates-accumulation")
    s = Session(TrainConfig(n_train=600, batch_size=32, accum_steps=4, epochs=10, measure_memory=False))
    assert s.run_to_end().updates == q.answer == 50
    assert check(q, "50").correct and not check(q, "48").correct


def test_adam_at_lr_one_key_matches_the_run():
    q = load_bank(6).question("adam-lr-one")
    assert "No NaN" in [o.text for o in q.options if o.correct][0]
    bad, good = lr_outcome(1.0, "adam"), lr_outcome(0.01, "adam")
    assert not bad.any_nan and bad.max_loss > 10 * good.max_loss and bad.final_val_acc < good.final_val_acc - 0.3


def test_sgd_vs_adam_key_matches_the_race():
    q = load_bank(6).question("sgd-vs-adam")
    assert "at 0.01 SGD never reached" in [o.text for o in q.options if o.correct][0]
    slow, fast = sgd_vs_adam(0.01, epochs=10), sgd_vs_adam(0.3, epochs=15)
    assert slow.sgd is None and slow.adam is not None
    assert fast.ratio() is not None and fast.ratio() > 2


def test_lr_mid_run_key_matches_the_session():
    q = load_bank(6).question("lr-mid-run")
    assert "three times higher" in [o.text for o in q.options if o.correct][0]
    changed = Session(TrainConfig(schedule="cosine", epochs=4, n_train=128, measure_memory=False))
    plain = Session(TrainConfig(schedule="cosine", epochs=4, n_train=128, measure_memory=False))
    for _ in range(8):
        changed.step(), plain.step()
    changed.set_lr(0.03)
    changed.run_to_end(), plain.run_to_end()
    assert [e.lr for e in changed.steps[8:]] == pytest.approx([3 * e.lr for e in plain.steps[8:]])
