"""Chapter 7's new sections: fp16 pitfalls, travelling checkpoints, token-weighted accumulation, and their
prediction keys (every key is what the measurement prints, on all five seeds)."""
import io

import pytest
import torch
from torch import nn

from course_utils.chapters import ch07_checkpoint_travel as travel_mod
from course_utils.chapters.ch06_predictions import prediction_bank
from course_utils.chapters.ch07_precision_pitfalls import FP16_MAX, STEPS, forward_overflow, scheduler_warning
from course_utils.chapters.ch07_token_weighting import token_weighting
from course_utils.engine.models import MLP


def key(qid: str) -> str:
    question = prediction_bank(7).question("predict-" + qid)
    return next(o.text for o in question.options if o.correct)


def test_fp16_forward_overflow_defeats_the_scaler_and_bf16_or_a_float32_layer_fixes_it():
    result = forward_overflow()
    assert all(result.claims().values()), result.text()
    assert min(result.largest.values()) > 200_000 > FP16_MAX                 # the prompt's "exceed 200,000"
    assert all(r["scale"] == 65536 / 2 ** STEPS for r in result.runs["fp16 + GradScaler"].values())
    assert key("fp16-overflow") == "Every update is skipped and the weights never move"
    calm = forward_overflow(input_scale=1.0)                                   # the same code, no overflow: trains
    assert not calm.claims()["fp16: the loss is inf or NaN at every step, on every seed"]


def test_a_skipped_first_step_warns_in_a_correct_loop_and_the_guard_quiets_it():
    result = scheduler_warning()
    assert all(result.claims().values()), result.text()
    assert key("scaler-warning").startswith("It warns")
    assert all(r["skipped"] == 1 for r in result.plain.values())


def test_a_gpu_tagged_checkpoint_needs_map_location_and_optimizer_state_follows_the_parameters_at_load():
    result = travel_mod.travel()
    assert (result.without_map, result.with_map) == ("RuntimeError", "loaded")
    assert result.devices_after_map == {"cpu"} and result.equal_after_map
    assert (result.state_dtype_right, result.state_dtype_wrong) == (torch.float64, torch.float32)
    assert result.step_wrong == "RuntimeError"
    assert key("ckpt-travel").startswith("It raises an error")


def test_the_tag_is_really_written_and_the_registry_is_left_as_it_was():
    before = list(torch.serialization._package_registry)
    data = travel_mod.gpu_tagged_checkpoint({"w": torch.ones(2)})
    assert list(torch.serialization._package_registry) == before
    assert b"cuda:0" in data
    plain = io.BytesIO()
    torch.save({"w": torch.ones(2)}, plain)
    assert b"cuda:0" not in plain.getvalue()


def test_wrapper_prefixes_refuse_a_plain_load_until_stripped():
    lines = travel_mod.prefix_lines({"dp": nn.DataParallel(MLP())}, MLP)
    assert lines == ["dp: every key starts with 'module.': True; a plain model's load_state_dict: RuntimeError; "
                     "with the prefix stripped: works"]


def test_mean_of_micro_batch_means_is_off_and_token_weighting_is_exact():
    result = token_weighting()
    assert all(v > 0.05 for v in result.mean_of_means.values())
    assert max(result.token_weighted.values()) < 1e-6 and max(result.divided_after.values()) < 1e-6
    counts = [n for c in result.tokens.values() for n in c]
    assert (min(counts), max(counts)) == (24, 74)                              # the prompt's "24 to 74"
    assert "8% to 29% off" in result.text()
    assert key("token-accum") == "A few percent to about a third off"


@pytest.mark.parametrize("chapter", [6, 7])
def test_every_prediction_of_chapters_6_and_7_is_asked_in_its_notebook_before_its_answer(chapter):
    from pathlib import Path
    source = next((Path(__file__).resolve().parents[1] / "notebooks" / "src").glob(f"{chapter:02d}_*.py")).read_text()
    for q in prediction_bank(chapter).questions:
        qid = q.id.removeprefix("predict-")
        asked, shown = source.find(f'predict({chapter}, "{qid}")'), source.find(f'answer({chapter}, "{qid}")')
        assert 0 <= asked < shown, qid


def test_a_resume_without_the_optimizer_state_is_another_run_and_one_with_it_is_the_same():
    """Chapter 7: the oracle is the uninterrupted run itself, continued in the same process."""
    from course_utils.chapters.ch07_checkpoint_travel import _resumed_runs, resume_without_optimizer_lines
    run = _resumed_runs(seed=3, before=40, after=4)
    same = all(torch.equal(a, b) for a, b in zip(run["uninterrupted"][1], run["weights and optimizer state"][1]))
    differs = any(not torch.equal(a, b) for a, b in zip(run["uninterrupted"][1], run["weights alone"][1]))
    assert same and differs
    moved = run["weights alone"][2]
    assert ((moved[moved > 0] - 1).abs() < 0.01).float().mean() > 0.9        # a fresh Adam: lr-sized steps
    lines = resume_without_optimizer_lines(seeds=range(2))
    assert "on 2 of 2 seeds" in lines[0] and "bitwise equal on 0 of 2" in lines[2]
    assert "within a factor 3 of it on 2 of 2" in lines[3]


def test_a_resume_that_rebuilds_its_scheduler_warms_up_again_and_one_that_loads_it_is_the_same_run():
    """Chapter 7: the oracle is the uninterrupted run; the rebuilt scheduler's rates are LambdaLR's own from 0."""
    from course_utils.chapters.ch07_checkpoint_travel import _schedule_resumes, _warmup_cosine
    run = _schedule_resumes(seed=1, before=40, total=60, warmup=5, lr=0.05)
    assert all(torch.equal(a, b) for a, b in zip(run["uninterrupted"][2], run["scheduler state loaded"][2]))
    assert run["scheduler state loaded"][0] == run["uninterrupted"][0]
    rates = run["scheduler built anew"][0]
    factor = _warmup_cosine(5, 60)
    assert rates[0] == run["uninterrupted"][0][0]        # the first update: the lr the optimizer's state restored
    assert rates[1:] == pytest.approx([0.05 * factor(k) for k in range(1, 20)])   # then the schedule from its start
    assert run["stepped past the end"][2] > run["stepped past the end"][1] > run["stepped past the end"][0] == 0
    from course_utils.chapters.ch07_checkpoint_travel import _first_resumed_rate   # the order of the two lines
    assert _first_resumed_rate(False, 40, 60, 5, 0.05) == run["uninterrupted"][0][0]
    assert _first_resumed_rate(True, 40, 60, 5, 0.05) == pytest.approx(0.05 * factor(0))


def test_a_model_without_its_inputs_learns_the_label_frequencies_and_nothing_else():
    """Chapter 7: with every example the same row the held-out loss is the prior's cross-entropy (computed from the
    training labels' frequencies by torch's own cross_entropy) and the accuracy the majority's share."""
    from course_utils.chapters.ch07_loop_tables import _collapse_run
    lost, healthy = _collapse_run(0, inputs_lost=True), _collapse_run(0, inputs_lost=False)
    assert abs(lost["loss"] / lost["prior_loss"] - 1) < 0.02 and lost["classes"] == 1
    assert lost["accuracy"] == lost["majority"]
    assert healthy["loss"] < 0.8 * healthy["prior_loss"] and healthy["classes"] == 3
