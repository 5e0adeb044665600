"""The regression cases of the third and fourth blind rounds (tests/exercise_blind_round3.py, _round4.py): each wrong
attempt that once passed now fails, counted, with its mistake named and no traceback; the attempts the statements turned
out to allow still pass."""
from __future__ import annotations

import pytest

from course_utils.exercises import EXERCISES
from tests import exercise_blind_round3 as round3
from tests import exercise_blind_round4 as round4

EXPECTED = {   # wrong attempt -> a phrase of its verdict naming the mistake
    "FolderDataset__wrong__counts_any_pt": "the stats.pt or the 0.txt is not an example",
    "accumulate_epoch__wrong__no_train_mode": "ran in eval mode",
    "dropout__wrong__mask_float32_dtype": "it should be bfloat16",
    "sgd_step_by_hand__wrong__numpy_float64": "updates them in their own dtype",
    "stop_check__wrong__wait_equals_patience": "with patience 0, the first check without an improvement stops",
    "evaluate__wrong__top_level_mode_only": "switched the frozen BatchNorm back to train",
    "SlidingWindows__wrong__returns_list": "asks for a tuple",
    "lr_range_test__wrong__n_from_dataset_floor": "the last one partial: n is len(loader)",
    # round 4
    "FolderDataset__wrong__caches_examples": "your dataset keeps what it read",
    "FolderDataset__wrong__label_int32": "targets have dtype int32; the data's are int64",
    "FolderDataset__wrong__split_stem_isdigit": "the 0.txt is not an example",
    "SlidingWindows__wrong__target_float_item": "it should be -0.166666667",
    "checkpoint_pair__wrong__load_eval_mode": "the model was built in train mode",
    "checkpoint_pair__wrong__epoch_from_scheduler": "load_checkpoint returned 10",
    "clip_gradients__wrong__compares_squared_norm": "the gradients stay as they are",
    "dropout__wrong__detached_output": "no gradient reaches x",
    "dropout__wrong__p_one_zeros_float32": "it should be float64",
    "evaluate__wrong__sampler_len_denominator": "the mean per example is",
    "lr_range_test__wrong__extra_pass_to_count": "went over the loader 2 times",
    "lr_range_test__wrong__stops_on_divergence": "one pass over 10 batches makes 10",
    "stop_check__wrong__nonfinite_checked_in_else": "not finite stops at once",
    "train_step__wrong__zero_grad_after_step": "your step added this batch's gradient to them",
    "fixed_loop__wrong__early_stop_added": "it stopped early",
}
ALLOWED = {    # written as wrong, but the statement allows it -> why
    "lr_range_test__wrong__logspace_float32": "float32 rates are 1e-7 off, within the check's 1e-5: the statement asks "
                                              "for no precision, and torch.logspace is a natural way to write it",
    "clip_gradients__wrong__eps_like_torch": "torch's own clip_grad_norm_ divides by norm + 1e-6; the check compares "
                                             "with it",
    "token_window_losses__wrong__casts_losses_float32": "the statement fixes no dtype for the losses, and float32 "
                                                        "losses are what mixed precision asks for",
}
ATTEMPTS = {n: getattr(m, n) for m in (round3, round4) for n in dir(m) if "__wrong__" in n}


def _verdict(name: str):
    exercise = EXERCISES[name.split("__")[0]]
    attempt = ATTEMPTS[name]
    return exercise.check(*(attempt() if len(exercise.names) > 1 else (attempt,)), record=False)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_wrong_attempt_that_once_passed_now_fails_with_its_mistake_named(name):
    verdict = _verdict(name)
    assert not verdict.passed and verdict.counted, verdict.message
    assert "Traceback" not in verdict.message and 'File "' not in verdict.message
    assert EXPECTED[name].lower() in verdict.message.lower(), verdict.message


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_an_attempt_the_statement_allows_passes(name):
    assert _verdict(name).passed


def test_every_attempt_of_the_files_is_judged():
    assert set(ATTEMPTS) == set(EXPECTED) | set(ALLOWED)


def _round5():
    from tests import exercise_blind_round5 as round5
    return {n: getattr(round5, n) for n in dir(round5) if "__wrong__" in n or "__right__" in n}


@pytest.mark.parametrize("name", sorted(_round5()))
def test_round_5_attempts_keep_their_verdicts(name):
    """Round 5 found no hole: every wrong attempt fails, counted and named without a traceback, and every right
    one passes; a check loosened later fails here."""
    exercise = EXERCISES[name.split("__")[0]]
    attempt = _round5()[name]
    verdict = exercise.check(*(attempt() if len(exercise.names) > 1 else (attempt,)), record=False)
    assert verdict.passed == ("__right__" in name), verdict.message
    assert verdict.counted and "Traceback" not in verdict.message


def _round6():
    from tests import exercise_blind_round6 as round6
    return {n: getattr(round6, n) for n in dir(round6) if "__wrong__" in n}


@pytest.mark.parametrize("name", sorted(_round6()))
def test_round_6_holes_stay_closed(name):
    """Round 6's wrong attempts that passed before the checks were tightened: each now fails, counted and named
    without a traceback."""
    exercise = EXERCISES[name.split("__")[0]]
    verdict = exercise.check(_round6()[name], record=False)
    assert not verdict.passed and verdict.counted and "Traceback" not in verdict.message, verdict.message
