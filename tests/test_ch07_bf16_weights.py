"""Chapter 7's bf16 cell: an update below half the spacing of bf16 numbers rounds a stored weight back."""
import torch

from course_utils.chapters.ch07_bf16_weights import _band, bf16_weight_lines, spacing_lines, train_moved


def test_spacing_next_to_one_is_what_finfo_says():
    bf16 = spacing_lines()[0]
    assert f"{1 + torch.finfo(torch.bfloat16).eps:.8g} above" in bf16
    assert bf16.endswith("stored as 1") and spacing_lines()[2].endswith("0.99989998")


def test_norm_weights_in_bf16_never_move_at_small_rates_and_master_weights_do_on_unprinted_seeds():
    for seed in (7, 8):
        stuck, master = train_moved(seed, 1e-4, torch.bfloat16, 20), train_moved(seed, 1e-4, torch.float32, 20)
        assert stuck.norm == 0 and 0 < stuck.linear < stuck.linear_total
        assert master.norm == master.norm_total and master.linear == master.linear_total
        assert master.first_loss - master.last_loss > stuck.first_loss - stuck.last_loss


def test_an_update_above_the_gap_moves_them():
    assert train_moved(7, 1e-2, torch.bfloat16, 20).norm > 0


def test_band_reads_the_shares_it_is_given():
    assert _band([1, 1]) == "all, on every seed" and _band([0, 0]) == "none, on every seed"
    assert _band([0.95, 1]) == "more than 90%, on every seed" and _band([0.6, 0.95]) == "more than half, on every seed"
    assert _band([0.05, 0.95]) == "under 10% on some seed"


def test_the_lines_count_over_the_seeds_given():
    assert bf16_weight_lines(seeds=(3,), updates=5)[-1].endswith("of 1 seeds")
