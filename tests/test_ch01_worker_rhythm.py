"""Chapter 1: a loader slower than the loop delivers its batches in bursts of num_workers. A batch takes 0.3 s to
load, so that a long wait (over 0.15 s) stands clear of what a loaded machine adds to a wake-up (make test runs these
beside the browser tests: seen at 0.08 s with 0.06 s per example and the workers not yet started together)."""
from course_utils.chapters.ch01_worker_rhythm import arrival_gaps, rhythm_lines


def test_bursts_follow_the_number_of_workers():
    for workers in (2, 3):
        gaps = arrival_gaps(num_workers=workers, batches=3 * workers, batch_size=2, seconds=0.15)
        long = [i + 2 for i, gap in enumerate(gaps) if gap > 0.15]
        assert long == [1 + workers, 1 + 2 * workers], gaps


def test_one_worker_waits_before_every_batch():
    gaps = arrival_gaps(num_workers=1, batches=4, batch_size=2, seconds=0.15)
    assert all(gap > 0.15 for gap in gaps), gaps


def test_the_lines_name_the_pattern():
    lines = rhythm_lines(num_workers=2, batches=4, batch_size=2, seconds=0.15)
    assert lines[1].startswith("long waits (over 0.15 s) before batches [3]") and "round of 2 batches" in lines[2], lines
