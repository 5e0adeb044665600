"""Chapter 2's curriculum sampler."""
import random

import pytest
from torch.utils.data import DataLoader

from course_utils.chapters.ch02_custom_samplers import CurriculumSampler, curriculum_lines


def test_the_curriculum_sampler_runs_easy_to_hard_each_epoch_and_deals_every_example_once_over_ranks():
    """Chapter 2's curriculum sampler, through real DataLoaders; the oracle for the deal is the sorted set of indices."""
    rng = random.Random(5)
    difficulty = [rng.random() for _ in range(50)]
    for world in (1, 2, 3):
        shares = [list(CurriculumSampler(difficulty, seed=1, rank=r, world_size=world)) for r in range(world)]
        assert all(len(share) == 50 // world for share in shares)
        assert len(set().union(*shares)) == sum(map(len, shares))                  # no index twice
        for share in shares:
            assert [difficulty[i] for i in share] == sorted(difficulty[i] for i in share)
    levels = [i % 3 for i in range(30)]
    sampler = CurriculumSampler(levels, seed=0)
    orders = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        orders.append([i for b in DataLoader(range(30), batch_size=5, sampler=sampler) for i in b.tolist()])
        assert [levels[i] for i in orders[-1]] == sorted(levels)
    assert len({tuple(o) for o in orders}) == 3
    with pytest.raises(ValueError, match="rank"):
        CurriculumSampler(levels, rank=2, world_size=2)


def test_the_lines_print_the_measured_conclusions():
    lines = curriculum_lines()
    assert lines[0].endswith("[[0], [0], [1], [1], [2], [2], [3], [3]]")
    assert lines[1].endswith("True") and lines[3].endswith("True")


def test_segmentation_weights_give_each_image_its_rarest_class_weight():
    """The oracle: counted by hand on three tiny masks."""
    import torch

    from course_utils.chapters.ch02_custom_samplers import segmentation_sampler_lines, segmentation_weights
    masks = torch.tensor([[[0, 1]], [[0, 0]], [[2, 1]]])            # class 0 in 2 images, 1 in 2, 2 in 1
    assert segmentation_weights(masks).tolist() == [0.5, 0.5, 1.0]
    lines = segmentation_sampler_lines(n=200, batches=100)
    shuffled = float(lines[1].split("per batch of 16: ")[1].split(";")[0])
    weighted = float(lines[2].split("per batch of 16: ")[1].split(";")[0])
    assert weighted > 3 * shuffled
