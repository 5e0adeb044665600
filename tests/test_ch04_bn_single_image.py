"""Chapter 4: a trained BatchNorm CNN in train mode with batches of one image loses what a channel's level says."""
import torch

from course_utils.chapters.ch04_bn_single_image import cnn, single_image, single_image_lines


def test_a_single_image_in_train_mode_is_normalised_by_its_own_statistics():
    norm = cnn()[1].train()
    features = torch.randn(1, 16, 8, 8)
    level = torch.randn(1, 16, 1, 1) * 5                     # each channel's overall level moved
    with torch.no_grad():
        assert torch.allclose(norm(features), norm(features + level), atol=1e-4)
        assert not torch.allclose(norm.eval()(features), norm(features + level), atol=1e-2)


def test_accuracy_collapses_only_in_train_mode_with_batches_of_one_on_unprinted_seeds():
    for seed in (7, 8):
        r = single_image(seed)
        assert r.eval_mode > 0.9 and r.train_mode_full > 0.9 and r.train_mode_one < 0.5


def test_the_lines_count_the_seeds_given():
    lines = single_image_lines(seeds=(5,))
    assert lines[0].endswith("1 seeds:") and all(line.endswith("1 of 1") for line in lines[1:])
