"""Chapter 9's quiz keys: computed by the course's calculator, or checked here by running what a question predicts."""
import torch

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.engine.models import MLP
from course_utils.infra.quiz import load_bank


def question(qid):
    return load_bank(9).question(qid)


def key(qid):
    return next(o.text for o in question(qid).options if o.correct)


def test_numeric_keys_are_the_calculators():
    assert question("updates-20k-64-k4-10-final").answer == 790
    two = training_arithmetic(20_000, 64, 10, 4, world_size=2)
    assert question("updates-two-ranks").answer == two.total_weight_updates == 400 and two.effective_batch_size == 512


def test_evaluate_without_switching_back_trains_with_dropout_off():
    model = MLP(dropout=0.5)
    model.train()                      # once, before the epochs
    model.eval()                       # an evaluate() that does not switch back
    x = torch.randn(16, 2)
    loss = model(x).sum()
    loss.backward()                    # gradients flow in eval mode: no error
    assert not model.training
    assert torch.equal(model(x), model(x))  # no dropout: two forwards agree
    assert key("evaluate-mode").startswith("It trains with dropout off")


def test_a_new_onecycle_after_resume_starts_its_warmup_again():
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100)
    for _ in range(40):
        optimizer.step()
        scheduler.step()
    saved = optimizer.state_dict()
    middle = optimizer.param_groups[0]["lr"]
    fresh = torch.optim.SGD(model.parameters(), lr=0.1)
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["lr"] == middle       # the optimizer's state holds the LR ...
    torch.optim.lr_scheduler.OneCycleLR(fresh, max_lr=0.1, total_steps=100)
    assert abs(fresh.param_groups[0]["lr"] - 0.1 / 25) < 1e-12 and 0.1 / 25 < middle  # a new scheduler resets it
    assert key("resume-without-scheduler").startswith("It jumps back to the schedule's start")


def test_the_browser_tests_final_quiz_card_is_unique():
    """tests/browser/interactions_ch08.py finds the final question by this text; no other question may contain it."""
    assert [q.id for q in load_bank(9).questions if "20,000 examples, batch 64" in q.prompt] == ["updates-20k-64-k4-10-final"]
