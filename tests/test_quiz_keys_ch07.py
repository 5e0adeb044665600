"""Chapter 7's quiz keys, checked against the code that the chapter's cells run (and real runs where a key is a
prediction on a setting the chapter did not run)."""
import math

import pytest
import torch

from course_utils.engine.arithmetic import batch_sizes, loss_weight, training_arithmetic
from course_utils.infra.quiz import check, load_bank
from course_utils.chapters.ch07_scheduler_gallery import curve


def question(qid):
    return next(q for q in load_bank(7).questions if q.id == qid)


def test_bank_has_the_seed_question_and_feedback_everywhere():
    bank = load_bank(7)
    assert len(bank.questions) >= 4 and question("resumable-checkpoint").kind == "multi"
    for q in bank.questions:
        assert q.explanation and all(o.feedback for o in q.options)


def key(qid):
    return next(o.text for o in question(qid).options if o.correct)


def test_initial_loss_diagnosis_confident_logits_not_a_double_softmax():
    from course_utils.engine.data import make_spiral
    from course_utils.engine.models import MLP
    torch.manual_seed(0)
    x, y = make_spiral(600, classes=10, seed=0).tensors
    model = MLP(out_features=10)
    with torch.no_grad():
        logits = model(x)
        fresh = torch.nn.functional.cross_entropy(logits, y).item()
        double_softmax = torch.nn.functional.cross_entropy(logits.softmax(dim=1), y).item()
        confident = torch.nn.functional.cross_entropy(50 * logits, y).item()
    assert abs(fresh - math.log(10)) < 0.05 * math.log(10)
    assert abs(double_softmax - math.log(10)) < 0.05 * math.log(10)  # the start cannot show a softmax too many
    assert confident > 1.5 * math.log(10)                            # large logits: far above log C
    assert key("initial-loss-diagnosis").startswith("The model starts confidently wrong")


def test_short_window_weight_is_one():
    sizes = batch_sizes(360, 8)              # 45 micro-batches: 11 windows of 4, then a window of 1
    assert loss_weight(len(sizes) - 1, sizes, 4) == 1.0
    assert question("accumulation-short-window").options[0].text.startswith("By 1:")


def test_onecycle_per_epoch_never_reaches_max_lr():
    assert max(curve("OneCycleLR", lr=0.1, cadence="epoch")) < 0.05


def test_bf16_has_float32s_range_and_fp16_does_not():
    assert torch.finfo(torch.bfloat16).max > 1e38 and torch.finfo(torch.float16).max < 7e4
    assert torch.finfo(torch.bfloat16).tiny > 0 and torch.finfo(torch.bfloat16).tiny < 1e-37


def test_ddp_allreduce_key_is_one_per_update_and_the_flowchart_counts_it():
    from course_utils.chapters.ch07_flowchart_costs import count_allreduces
    assert question("ddp-allreduces").answer == 25 == training_arithmetic(25600, 32, 1, 8, world_size=4).updates_per_epoch
    counted = count_allreduces(("accumulation", "scale_out"), batch_size=32, accum_steps=8)
    arithmetic = training_arithmetic(384, 32, 1, 8)
    assert counted.allreduces == counted.updates == arithmetic.updates_per_epoch  # one per update
    without = count_allreduces(("accumulation", "scale_out"), no_sync=False, batch_size=32, accum_steps=8)
    assert without.allreduces == arithmetic.iters_per_epoch                       # one per micro-batch


def test_effective_batch_lr_key_is_the_linear_rule():
    effective = training_arithmetic(64_000, 64, 1, 2, world_size=8).effective_batch_size
    assert effective == 1024
    assert key("effective-batch-lr").startswith(f"{0.1 * effective / 64:g}:")


def test_early_stopping_key_matches_the_trainer(tmp_path):
    import contextlib
    import io
    from course_utils.production import FitConfig, fit, load_checkpoint
    with contextlib.redirect_stdout(io.StringIO()):
        result = fit(FitConfig(out=str(tmp_path), epochs=60, n_train=40, n_val=200, lr=0.03, patience=3, threads=1,
                               progress=False, tensorboard=False))
    if not hasattr(result, "delivered"):
        pytest.skip("this trainer does not deliver the best weights yet (the trainer branch adds it)")
    assert result.delivered == "best" and result.best["epoch"] < result.epochs_completed
    delivered = torch.load(tmp_path / "model.pt", weights_only=True)
    best = load_checkpoint(sorted((tmp_path / "checkpoints").glob("best-*.pt"))[-1])["model"]
    last = torch.load(tmp_path / "model-last.pt", weights_only=True)
    assert all(torch.equal(delivered[k], best[k]) for k in best)
    assert not all(torch.equal(delivered[k], last[k]) for k in last)
    assert key("early-stopping-weights").startswith("Epoch 19's")  # the run the question describes: best 19, stop 22
    assert (result.best["epoch"], result.epochs_completed) == (19, 22)


def test_clip_too_low_slows_sgd_and_barely_touches_adamw():
    from course_utils.chapters.ch07_clipping import spike_run
    for seed in range(5):
        sgd, sgd_clipped = spike_run(seed, "SGD", False, None), spike_run(seed, "SGD", False, 0.1)
        adam, adam_clipped = spike_run(seed, "AdamW", False, None), spike_run(seed, "AdamW", False, 0.1)
        assert sum(sgd_clipped.steps) < 0.5 * sum(sgd.steps) and sgd_clipped.val_loss > sgd.val_loss
        assert sum(adam_clipped.steps) > 0.9 * sum(adam.steps)
        assert abs(adam_clipped.val_loss - adam.val_loss) < 0.15 * adam.val_loss
        assert sgd.ordinary_norm > 2 * 0.1 and adam.ordinary_norm > 2 * 0.1  # 0.1 is well below the ordinary norms
    assert key("clip-too-low").startswith("SGD moves far less")


@pytest.mark.parametrize("chapter", [7, 9])
def test_the_key_is_not_given_away_by_length(chapter):
    """In fewer than half of a chapter's choice questions is a right option longer than every wrong one."""
    choice = [q for q in load_bank(chapter).questions if q.options]
    given_away = sum(max(len(o.text) for o in q.options if o.correct) > max(len(o.text) for o in q.options
                                                                             if not o.correct) for q in choice)
    assert given_away < len(choice) / 2, (given_away, len(choice))
