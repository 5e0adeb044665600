"""Chapter 7: a run repeats only when every stream it draws from is seeded."""
import random

import numpy as np
import torch

from course_utils.chapters.ch07_seed_streams import STREAMS, seed_stream_lines, tiny_run


def test_only_all_three_seeds_repeat_the_run_for_several_pairs_of_unseeded_states():
    for a, b in ((1, 2), (3, 7)):
        assert tiny_run(STREAMS, a) == tiny_run(STREAMS, b)
        for left_out in STREAMS:
            assert tiny_run(tuple(s for s in STREAMS if s != left_out), a) != tiny_run(
                tuple(s for s in STREAMS if s != left_out), b), left_out


def test_the_lines_leave_the_global_streams_as_they_found_them():
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    expected = (torch.rand(1), np.random.rand(), random.random())
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    lines = seed_stream_lines()
    assert (torch.rand(1), np.random.rand(), random.random()) == expected
    assert len(lines) == 8 and [line.endswith("True") for line in lines] == [False] * 7 + [True]
