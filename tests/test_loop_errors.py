"""Chapter 3: the three errors of first loops and the momentum step by hand, as printed, on seeds 0-4."""
import pytest
import torch

from course_utils.chapters.ch03_anatomy import momentum_steps_by_hand, tiny_step
from course_utils.chapters.ch03_loop_errors import (BATCHES, graph_reach, held_by, hidden_state_run, inplace_run,
                                                    wrong_params_run)
from course_utils.chapters.ch06_predictions import prediction_bank
from course_utils.engine.models import MLP

SEEDS = range(5)


def key(bank, qid):
    return next(o.text for o in bank.question(qid).options if o.correct)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_carried_hidden_state_fails_at_the_second_backward_and_detach_fixes_it(seed):
    bug = hidden_state_run("none", seed)
    assert (bug.error, bug.at_batch, bug.says_freed, bug.updates) == ("RuntimeError", 2, True, 1)
    retained = hidden_state_run("retain_graph", seed)
    assert (retained.error, retained.at_batch, retained.says_inplace) == ("RuntimeError", 2, True)
    fixed = hidden_state_run("detach", seed)
    assert not fixed.error and fixed.updates == BATCHES
    assert "RuntimeError at batch 2" in bug.describe() and fixed.describe() == f"no error, {BATCHES} updates"


def test_without_detach_the_graph_reaches_one_batch_further_each_time():
    assert graph_reach(detach=False) == [3, 6, 9, 12]
    assert graph_reach(detach=True) == [3, 3, 3, 3]


def test_an_unknown_fix_is_refused():
    with pytest.raises(ValueError, match="fix must be"):
        hidden_state_run("clone")


@pytest.mark.parametrize("case,fails", [("exp then +=", True), ("exp then +", False), ("linear then +=", False),
                                        ("sigmoid then ReLU(inplace=True)", True),
                                        ("linear then ReLU(inplace=True)", False)])
def test_only_an_in_place_change_of_a_saved_tensor_fails_and_only_at_backward(case, fails):
    for seed in SEEDS:
        r = inplace_run(case, seed)
        assert r.forward_ran and (r.error == "RuntimeError") == fails and r.says_inplace == fails
        assert r.version_saved == 0 and r.version_at_backward == (0 if case == "exp then +" else 1)
        assert r.names == ({"exp": "output 0 of Exp", "sigmoid": "output 0 of Sigmoid"}[case.split()[0]] if fails
                           else "")        # named by the operation that saved it, not by the in-place line


def test_inplace_oracle_the_fixed_form_gives_autograds_gradient():
    z = torch.randn(4, requires_grad=True)
    (torch.exp(z) + 1).sum().backward()
    assert torch.allclose(z.grad, torch.exp(z.detach()))


@pytest.mark.parametrize("seed", SEEDS)
def test_an_optimizer_over_another_model_trains_nothing(seed):
    right, rebuilt = wrong_params_run("right", seed), wrong_params_run("model rebuilt", seed)
    assert right.held == right.total == 6 and right.loss_after < right.loss_before - 0.1
    assert rebuilt.held == 0 and rebuilt.loss_after == rebuilt.loss_before
    assert wrong_params_run("generator used twice", seed).error == "ValueError"


def test_held_by_counts_a_replaced_layer_as_missing():
    model = MLP(hidden=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.head = torch.nn.Linear(8, 3)
    assert held_by(model, optimizer) == 4 and len(list(model.parameters())) == 6


def test_momentum_by_hand_matches_torch_and_its_first_step_is_plain_sgd():
    m = momentum_steps_by_hand(lr=0.01, mu=0.9)
    assert m.W1 == tiny_step(0.01).W_new and m.v1 == m.g1
    flat = lambda a: [v for row in a for v in row]
    assert flat(m.W1) == pytest.approx(flat(m.torch_W1), abs=1e-6)
    assert flat(m.W2) == pytest.approx(flat(m.torch_W2), abs=1e-6)
    assert flat(m.v2) == pytest.approx([0.9 * a + b for a, b in zip(flat(m.v1), flat(m.g2))])


def test_chapter_3_prediction_keys_are_what_the_runs_show():
    bank = prediction_bank(3)
    assert [q.id for q in bank.questions] == ["predict-hidden-state", "predict-inplace", "predict-wrong-params"]
    assert key(bank, "predict-hidden-state").endswith("the second batch's backward raises an error")
    assert hidden_state_run("none").at_batch == 2
    assert key(bank, "predict-inplace").startswith("At backward") and inplace_run("exp then +=").error
    assert key(bank, "predict-wrong-params").startswith("It stays exactly where it started")
    r = wrong_params_run("model rebuilt")
    assert r.loss_after == r.loss_before


def test_separate_backward_calls_equal_one_backward_of_the_sum_and_a_shared_forward_needs_retain_graph():
    from course_utils.chapters.ch03_loop_errors import separate_backward_rules
    for seed in range(3):
        rules = separate_backward_rules(seed)
        assert list(rules.values()) == [True, True, "RuntimeError (graph freed: True)"]


def test_reused_advantages_fail_at_the_second_mini_epoch_and_retain_graph_hurts_the_critic():
    from course_utils.chapters.ch03_loop_errors import reused_advantage_run, reused_advantage_rules
    assert reused_advantage_run("none", 0)["outcome"] == "RuntimeError at mini-epoch 2 (graph freed)"
    for seed in range(3):
        kept = reused_advantage_run("retain_graph", seed)["critic's loss after / before"]
        detached = reused_advantage_run("detach", seed)["critic's loss after / before"]
        assert detached < 0.05 and kept > 2 * detached
    assert reused_advantage_run("none", 0, mini_epochs=1)["outcome"] == "all 1 mini-epochs ran"   # one pass is fine
    rules = reused_advantage_rules(seeds=range(2))
    assert rules["advantages.detach()"].endswith("on 2 of 2 seeds")
    assert rules["backward(retain_graph=True), a critic with a hidden layer of 16"] == \
        "RuntimeError at mini-epoch 2 (modified in place)"              # a saved weight the step changed
