"""Chapter 7's clipping inside accelerator.accumulate, against plain torch clipping each window once."""
import pytest

from course_utils.chapters import ch07_accelerate_ranks as m


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clipping_when_gradients_sync_is_the_oracle_and_clipping_every_batch_is_not(seed):
    runs = m.clip_in_accumulate(seed=seed)
    assert runs["when sync_gradients"] == (4, pytest.approx(0, abs=1e-6))
    clips, off = runs["on every batch"]
    assert clips == 16 and off > 1e-3


def test_without_clipping_at_all_the_ways_agree_so_the_difference_is_the_clip():
    runs = m.clip_in_accumulate(max_norm=1e9)
    assert all(off < 1e-6 for _, off in runs.values())


def test_a_second_unscale_in_one_window_raises_in_torchs_words():
    assert m.unscale_twice_error().startswith("RuntimeError: unscale_() has already been called")


def test_the_lines_say_what_ran():
    lines = m.clip_lines(m.clip_in_accumulate())
    assert lines[1].endswith("True") and lines[2].endswith("False")
