"""The answers issue 42 corrected, each held to the run that shows it (chapters 1, 2, 4, 7, 8).

Every claim a chapter now prints about these is counted here on the same runs, so a change that made one false
fails here, not only in a notebook diff."""
from __future__ import annotations

import math
import os

from course_utils.chapters import ch08_arena_seeds
from course_utils.chapters.ch01_workers import threads_where_loaded, worker_starts
from course_utils.chapters.ch02_sampling import order_over_seeds
from course_utils.chapters.ch04_eval_pitfalls import batch_dependence, bn_collapse, bn_collapse_fixes
from course_utils.chapters.ch07_loop_tables import double_softmax_training
from course_utils.chapters.ch07_rank_seeds import SEEDINGS, rank_draws
from course_utils.engine.bugs import BUGS


def test_persistent_workers_start_once_and_plain_workers_every_epoch():
    """Chapter 1 (corpus q102): the count of worker processes is epochs x workers without persistence."""
    for epochs, workers in ((3, 2), (2, 1)):
        assert worker_starts(False, epochs, workers) == epochs * workers
        assert worker_starts(True, epochs, workers) == workers


def test_a_worker_runs_torch_on_one_thread_and_the_main_process_keeps_its_own():
    """Chapter 1: the oracle is torch.get_num_threads() read inside __getitem__ (main process, then workers)."""
    import torch
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)                       # a main process with more than one thread, on any host
        seen = threads_where_loaded(num_workers=2)
    finally:
        torch.set_num_threads(before)
    assert seen["num_workers=2: torch threads inside each worker"] == [1]
    assert all(v is True for k, v in seen.items() if "inside each worker" not in k), seen


def test_sorted_data_claims_hold_on_every_seed_chapter_2_counts():
    found = order_over_seeds(range(5))
    claims = found.claims()
    assert claims["last epoch's mean batch loss within 0.25 of ln 3 (guessing)"] == (5, 0)
    assert claims["accuracy on the whole set above 1/3"] == (5, 5)
    assert claims["accuracy on the whole set above 0.9"] == (0, 5)
    assert claims["some class's accuracy below 0.6"] == (5, 0)
    assert claims["most and least predicted class 10 points or more apart"] == (5, 0)
    assert found.shuffled_lower_loss() == 5 and "5 of 5" in found.text()


def test_bn_collapse_is_lag_not_too_few_updates():
    """Chapter 4 (review 04.1): ten times the updates leaves seeds collapsed; centred inputs remove it;
    torch's update_bn re-estimates exactly as the chapter's recalibration."""
    lines = bn_collapse_fixes(range(5))
    longer = int(lines[0].split(" on ")[-1].split(" of ")[0])
    assert longer >= 1, lines[0]
    assert "within 0.1 std of the real one on 5 of 5; eval-mode accuracy above 0.7 on 5 of 5" in lines[1]
    assert lines[2].endswith("on 10 of 10 runs")
    run = bn_collapse(0)
    assert run.eval_mode_accuracy < 0.6 < run.train_mode_accuracy and run.update_bn_same


def test_the_batch_changes_train_mode_outputs_and_only_float_rounding_in_eval_mode():
    train, evaluation = batch_dependence()
    assert "differ by more than 0.1: True; every prediction the same: False" in train
    assert "differ by less than 1e-5: True" in evaluation and "every prediction the same: True" in evaluation


def test_on_the_generic_path_the_batch_size_moves_eval_outputs_in_their_last_bits():
    """Chapter 4's text: the last bits may move with the batch size, depending on the code path; the generic path
    (a CPU without AVX2) moves them, in a process of its own, while the predictions stay."""
    import subprocess
    import sys

    from course_utils.infra.notebook import GENERIC_PATH
    probe = ("import torch; torch.set_num_threads(1); from course_utils.chapters.ch04_eval_pitfalls import "
             "batch_dependence, last_bits; print(last_bits()); print(batch_dependence()[1])")
    env = {k: v for k, v in os.environ.items() if k not in GENERIC_PATH} | GENERIC_PATH
    bits, evaluation = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                      check=True).stdout.splitlines()
    assert bits.startswith("this machine (DEFAULT kernels)") and ": no" in bits, bits
    assert "every prediction the same: True" in evaluation


def test_a_softmax_before_the_loss_looks_stuck_at_log_c_with_ten_classes():
    ends = double_softmax_training(range(3))
    assert all(abs(v - math.log(10)) < 0.1 for v in ends[True])
    assert all(v < 1.9 for v in ends[False]) and all(b > a for a, b in zip(ends[False], ends[True]))


def test_one_seed_on_every_rank_repeats_the_workers_augmentations():
    """Chapter 7 (issue 42 item 4): the same seed gives every rank's k-th example the same draw; seed + rank none."""
    same = rank_draws(SEEDINGS["the same seed on every rank"], world_size=2)
    apart = rank_draws(SEEDINGS["seed + rank"], world_size=2)
    assert same.shared_examples() == apart.shared_examples() == 0
    assert same.same_draws() == same.positions == 16 and apart.same_draws() == 0
    three = rank_draws(SEEDINGS["the same seed on every rank"], world_size=3, n=30)
    assert three.same_draws() == three.positions                        # not a two-rank accident


def test_weight_decay_moves_zero_gradient_weights_in_plain_sgd_too():
    """Chapter 5 (issue 42 item 7): not AdamW's alone; with .grad = None every optimizer skips them."""
    moved = BUGS["freeze_after_optimizer"].demo("sgd", set_to_none=False, weight_decay=0.01).frozen_change
    kept = BUGS["freeze_after_optimizer"].demo("sgd", set_to_none=True, weight_decay=0.01).frozen_change
    plain = BUGS["freeze_after_optimizer"].demo("sgd", set_to_none=False).frozen_change
    assert moved > 0 and kept == 0 and plain == 0


def test_chapter_8_compares_counts_and_shows_the_chaotic_figures_apart():
    """Issue 38: the compared form holds only seed counts and claims; the figures form adds medians and ranges."""
    from course_utils.chapters.ch08_arena import Challenge
    trade = ch08_arena_seeds.batch_trade(Challenge(), batches=(16, 64), seeds=range(2))
    compared, figures = trade.text(figures=False), trade.text()
    assert "updates median" not in compared and "(range" not in compared and "holds" in compared
    assert "updates median" in figures and "on this machine" in figures
    race = ch08_arena_seeds.scaling(Challenge(), seeds=range(2))
    assert "updates median" not in race.text(figures=False) and "updates median" in race.text()
