"""Chapter 7's triplet cell: batch-hard and all-triplet losses against loops written from their definitions, and
the collapse's score."""
import itertools

import pytest
import torch

from course_utils.chapters import ch07_metric_mining as m


def _loop(e, y, margin):
    """Per anchor the farthest positive and nearest negative, and every (a, p, n) triplet, by plain loops."""
    d = lambda i, j: (e[i] - e[j]).norm().item()      # noqa: E731
    hard, every = [], []
    for a in range(len(y)):
        pos = [p for p in range(len(y)) if p != a and y[p] == y[a]]
        neg = [n for n in range(len(y)) if y[n] != y[a]]
        hard.append(max(0.0, max(d(a, p) for p in pos) - min(d(a, n) for n in neg) + margin))
        every += [max(0.0, d(a, p) - d(a, n) + margin) for p, n in itertools.product(pos, neg)]
    return sum(hard) / len(hard), sum(every) / len(every)


@pytest.mark.parametrize("margin", [0.01, 0.3])
def test_losses_are_their_definitions(margin):
    g = torch.Generator().manual_seed(3)
    e, y = torch.randn(12, 4, generator=g), torch.arange(12) % 3
    hard, every = _loop(e, y, margin)
    assert m.batch_hard_loss(e, y, margin).item() == pytest.approx(hard, rel=1e-5)
    assert m.all_triplets_loss(e, y, margin).item() == pytest.approx(every, rel=1e-5)


def test_one_point_scores_exactly_the_margin_and_the_lines_say_so():
    e, y = torch.ones(9, 4), torch.arange(9) % 3
    assert m.batch_hard_loss(e, y, 0.05).item() == pytest.approx(0.05)
    assert m.all_triplets_loss(e, y, 0.05).item() == pytest.approx(0.05)
    assert m.collapse_lines(0.05)[0].endswith("the margin: True")


def test_mining_counts_over_two_seeds():
    lines = m.mining_lines(seeds=2, steps=300)
    assert "at least 0.9 on 2 of 2" in lines[0]
    assert "on 2 of 2; the mean over all triplets is below the margin on 2 of 2" in lines[1]
