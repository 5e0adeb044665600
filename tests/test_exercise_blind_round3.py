"""The regression cases of the third blind round (tests/exercise_blind_round3.py): each wrong attempt that once passed
now fails, counted, with its mistake named and no traceback."""
from __future__ import annotations

import pytest

from course_utils.exercises import EXERCISES
from tests import exercise_blind_round3 as attempts

EXPECTED = {   # wrong attempt -> a phrase of its verdict naming the mistake
    "FolderDataset__wrong__counts_any_pt": "the stats.pt, is not an example",
    "accumulate_epoch__wrong__no_train_mode": "ran in eval mode",
    "dropout__wrong__mask_float32_dtype": "it should be bfloat16",
    "sgd_step_by_hand__wrong__numpy_float64": "updates them in their own dtype",
    "stop_check__wrong__wait_equals_patience": "with patience 0, the first check without an improvement stops",
    "evaluate__wrong__top_level_mode_only": "switched the frozen BatchNorm back to train",
    "SlidingWindows__wrong__returns_list": "asks for a tuple",
    "lr_range_test__wrong__n_from_dataset_floor": "the last one partial: n is len(loader)",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_wrong_attempt_that_once_passed_now_fails_with_its_mistake_named(name):
    verdict = EXERCISES[name.split("__")[0]].check(getattr(attempts, name), record=False)
    assert not verdict.passed and verdict.counted, verdict.message
    assert "Traceback" not in verdict.message and 'File "' not in verdict.message
    assert EXPECTED[name].lower() in verdict.message.lower(), verdict.message


def test_every_attempt_of_the_file_is_checked():
    assert {n for n in dir(attempts) if "__wrong__" in n} == set(EXPECTED)
