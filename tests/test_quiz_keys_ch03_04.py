"""The chapter 3 and 4 quiz banks load, and their numeric keys are the figures the chapters compute."""
import pytest

from course_utils.infra.quiz import check, load_bank


@pytest.mark.parametrize("chapter", [3, 4])
def test_bank_loads_with_feedback_everywhere(chapter):
    bank = load_bank(chapter)
    assert len(bank.questions) >= 3
    for q in bank.questions:
        assert all(o.feedback for o in q.options)


def test_ch03_keys():
    bank = load_bank(3)
    new_loss = bank.question("new-loss")
    assert new_loss.answer == pytest.approx(1.96601, abs=1e-9)
    assert check(new_loss, "1.96601").correct and not check(new_loss, "2.225").correct
    q = bank.question("no-zero-grad")
    assert "sum" in [o.text for o in q.options if o.correct][0]
    q = bank.question("clip-place")
    assert [o.text for o in q.options if o.correct] == ["Between backward() and optimizer.step()"]
    q = bank.question("order")
    assert check(q, 0).correct


def test_ch04_keys():
    bank = load_bank(4)
    assert bank.question("averaging").answer == pytest.approx(80 / 136)
    assert bank.question("budget").answer == 4200
    assert check(bank.question("eval-changes"), {0, 1}).correct
    assert not check(bank.question("eval-changes"), {0, 1, 2}).correct
    assert check(bank.question("inference-mode"), {0, 1}).correct
    assert check(bank.question("nograd-vs-eval"), 0).correct
    assert check(bank.question("ranks-accuracy"), 0).correct


def test_ch03_hidden_state_key_is_the_fix_the_run_shows():
    from course_utils.chapters.ch03_loop_errors import hidden_state_run

    q = load_bank(3).question("hidden-state-fix")
    assert [o.text for o in q.options if o.correct] == ["h = h.detach() at the start of each batch"]
    assert not hidden_state_run("detach").error
    assert hidden_state_run("retain_graph").says_inplace and hidden_state_run("none").says_freed
    assert load_bank(3).questions[-1].id == "new-loss"          # the chapter calls it the last question
