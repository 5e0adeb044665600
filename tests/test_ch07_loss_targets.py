"""Chapter 7's loss table: each loss takes its arguments, the wrong target's outcome is torch's own, knobs hold."""
import pytest
import torch

from course_utils.chapters.ch07_loss_targets import ctc_checks, knob_checks, loss_cases, loss_table


def test_every_case_runs_on_its_right_arguments_with_every_reduction():
    for case in loss_cases():
        for reduction in ("none", "mean", "sum"):
            out = case.make(reduction)(*case.args())
            assert torch.isfinite(out).all(), case.label
            assert (out.dim() == 0) == (reduction != "none"), case.label


def test_table_reports_the_known_outcomes():
    rows = {(r.label, r.mistake): r for r in loss_table()}
    assert rows[("CrossEntropyLoss", "class index as float")].outcome == "RuntimeError"
    assert rows[("MSELoss", "target (N, 1), output (N,)")].outcome == "accepted, 'none' (4, 4), UserWarning"
    assert rows[("GaussianNLLLoss", "a negative variance")].outcome == "ValueError"
    per_pixel = rows[("CrossEntropyLoss, per pixel", "logits (N, H, W, C)")]
    assert per_pixel.none_shape == (4, 2, 2) and per_pixel.outcome == "RuntimeError"    # classes on dim 1 only
    assert rows[("MarginRankingLoss", "0/1 instead of -1/+1")].outcome.startswith("accepted")
    assert not rows[("NLLLoss(weight)", "class index as float")].mean_is_average    # a weighted mean
    assert all(r.sum_is_total for r in rows.values())


def test_knob_checks_all_hold():
    checks = knob_checks()
    assert checks.pop("real tokens") == 3
    assert checks.pop("mean = sum / all tokens") is False
    assert all(v is True for v in checks.values()), checks


def test_ctc_zero_infinity():
    c = ctc_checks()
    assert c["'none' shape"] == "(2,)"
    assert all(v is True for k, v in c.items() if k != "'none' shape")


def test_a_size_one_broadcast_is_harmless_and_one_target_over_many_modes_is_their_mean():
    from course_utils.chapters.ch07_loss_targets import broadcast_checks
    assert all(broadcast_checks().values())


def test_a_contrastive_loss_at_scale_zero_is_log_batch_with_no_gradient():
    import math
    from course_utils.chapters.ch07_loss_targets import contrastive_scale_lines
    lines = contrastive_scale_lines(batch=6)
    assert lines[0] == f"batch 6: log(6) = {math.log(6):.4f}"
    for line in lines[1:3]:
        assert f"loss {math.log(6):.4f}; every gradient on the anchors 0: True" in line
    assert all(line.endswith("0: False") for line in lines[3:])


def test_kl_div_reads_log_probabilities_against_probabilities_and_the_t_squared_factor_holds_the_size():
    from course_utils.chapters.ch07_loss_targets import distillation_kl_lines
    for t in (1.0, 3.0):
        lines = distillation_kl_lines(temperature=t)
        value = lines[0].rsplit(": ", 1)[1]
        assert lines[1].endswith(value) and lines[2].endswith(value) and float(value) >= 0
        assert lines[3].endswith("negative: True")
    scaled = [float(v) for v in lines[4].rsplit("times T²: ", 1)[1].split(", ")]
    assert max(scaled) - min(scaled) < 0.05 * max(scaled)


@pytest.mark.parametrize("vocab", [500, 1000])
def test_minus_100_as_an_index_is_a_real_token_and_torchs_ignore_index_skips_the_target(vocab):
    from course_utils.chapters.ch07_loss_targets import smoothing_index_lines
    lines = smoothing_index_lines(vocab=vocab)
    assert f"the entry zeroed is [{vocab - 100}]" in lines[0] and lines[2].endswith("True")
    assert lines[1].endswith(f"RuntimeError: index -100 is out of bounds for dimension 1 with size {vocab}")


@pytest.mark.parametrize("boxes", [(1, 5, 0), (2, 2), (0, 3, 1, 4)])
def test_box_normalised_weights_follow_the_counts_and_an_empty_batch_is_0_over_0(boxes):
    import torch

    from course_utils.chapters.ch07_loss_targets import box_normaliser_lines
    lines = box_normaliser_lines(boxes)
    # the oracle: gradients of a box-normalised loss with respect to each image's summed box losses
    sums = torch.zeros(len(boxes), requires_grad=True)
    (sums.sum() / sum(boxes)).backward()
    weights = [round(g * n, 3) for g, n in zip(sums.grad.tolist(), boxes)]
    assert f"weigh {weights} of the loss" in lines[0]
    assert "0 / 0 = nan; with the count clamped to at least 1: 0.0" in lines[1]
    assert lines[3].endswith("gradient all 0") and lines[4].endswith("gradient NaN")
