"""Chapter 4: a model evaluated on inputs prepared as it was trained, and otherwise."""
from course_utils.chapters.ch04_preprocessing import normalisation_accuracies, normalisation_lines


def test_only_the_trained_preprocessing_or_an_equivalent_one_keeps_the_accuracy_on_unprinted_seeds():
    for seed in (7, 8):
        r = normalisation_accuracies(seed, steps=200)
        right, own, other, raw = r.values()
        assert right > 0.85 and abs(own - right) <= 0.05 and other < right - 0.1 and raw < right - 0.1


def test_the_lines_count_the_seeds_given():
    lines = normalisation_lines(seeds=(5,))
    assert lines[0].endswith("on 1 of 1") and lines[3].endswith("more than 0.1 below on 1 of 1, within 0.05 on 0 of 1")
