"""Chapter 1-2 quiz keys agree with the engines and the hand calculations."""
import pytest

from course_utils.infra.quiz import check, load_bank
from course_utils.widgets.quiz_view import quiz


@pytest.mark.parametrize("chapter,qid,value", [
    (1, "batches-1001-50", 20),
    (2, "unweighted-cats-32", 3.2), (2, "weighted-cats-32", 32), (2, "padding-copies-1001-8", 7),
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
    if chapter == 1:      # the dataset's own generator is the draw the workers share (tests/test_chapter_questions_0_4)
        assert check(bank.question("worker-rng"), 1).correct and not check(bank.question("worker-rng"), 0).correct


def test_chapter2_keys_agree_with_real_samplers():
    """The keys against torch itself: a real DistributedSampler and a real WeightedRandomSampler."""
    import torch
    from torch.utils.data import DistributedSampler, WeightedRandomSampler
    bank = load_bank(2)
    total = sum(len(list(DistributedSampler(range(1001), num_replicas=8, rank=r, shuffle=False))) for r in range(8))
    assert bank.question("padding-copies-1001-8").answer == total - 1001
    labels = torch.tensor([0] * 950 + [1] * 50)
    weights = torch.where(labels == 1, 1 / 50, 1 / 950).double()
    drawn = list(WeightedRandomSampler(weights, 64 * 400, generator=torch.Generator().manual_seed(0)))
    assert abs(labels[drawn].float().mean().item() * 64 - bank.question("weighted-cats-32").answer) < 1.0


def test_chapter0_new_keys_agree_with_loss_weight_and_a_sampler():
    from torch.utils.data import DistributedSampler
    from course_utils.engine.arithmetic import batch_sizes, loss_weight
    sizes = batch_sizes(1000, 100)
    assert loss_weight(len(sizes) - 1, sizes, 3) == 1.0            # the lone micro-batch weighs 1, not 1/3
    q = load_bank(0).question("flush-weight")
    assert q.options[0].correct and "3× too small" in q.options[0].text
    total = sum(len(list(DistributedSampler(range(6), num_replicas=8, rank=r))) for r in range(8))
    assert load_bank(0).question("padding-w-gt-n").answer == total - 6 == 2
