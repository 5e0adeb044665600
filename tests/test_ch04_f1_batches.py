"""Chapter 4's F1 over batches: each figure against a count made here in plain Python, and the printed conclusion
far enough from its thresholds that another CPU's last bits (or the nudge) cannot flip it."""
from __future__ import annotations

from course_utils.chapters.ch04_f1_batches import f1_batches_conclusion, f1_over_batches, imbalanced_scores

SEEDS = range(5)
GAPS = {16: 0.05, 32: 0.005}                 # what the notebook prints: below by more than this, per batch size
MARGIN = 0.01                                # a flipped prediction moves a mean of batch F1 by about 0.005


def counted_f1(scores: list[float], labels: list[int]) -> float:
    tp = sum(1 for s, y in zip(scores, labels) if s > 0 and y == 1)
    fp = sum(1 for s, y in zip(scores, labels) if s > 0 and y == 0)
    fn = sum(1 for s, y in zip(scores, labels) if s <= 0 and y == 1)
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def test_each_figure_against_a_count_and_the_conclusion_with_its_margins():
    runs = [f1_over_batches(seed, tuple(GAPS)) for seed in SEEDS]
    for run in runs:
        logits, labels = imbalanced_scores(run.seed)
        scores, targets = logits.tolist(), labels.tolist()
        assert run.positives == sum(targets) and abs(run.whole - counted_f1(scores, targets)) < 1e-12
        for size, gap in GAPS.items():
            starts = range(0, len(targets), size)
            mean = sum(counted_f1(scores[i:i + size], targets[i:i + size]) * len(targets[i:i + size])
                       for i in starts) / len(targets)
            assert abs(run.per_batch_mean[size] - mean) < 1e-12
            assert run.without_positive[size] == (sum(1 for i in starts if sum(targets[i:i + size]) == 0), len(starts))
            assert run.accumulated[size] == run.whole                  # the same counts give the same float
            assert run.whole - run.per_batch_mean[size] > gap + MARGIN, (run.seed, size)
    for end in (min(r.whole for r in runs), max(r.whole for r in runs)):      # the printed range cannot move
        assert min(abs(end - tenth / 10) for tenth in range(11)) > 0.02
    lines = f1_batches_conclusion(runs, GAPS)
    assert "between 0.5 and 0.7 on 5 of 5 seeds" in lines[1]
    assert [line.endswith("on 5 of 5 seeds") for line in lines[2:4]] == [True, True]
    assert "equal to the whole set's on 5 of 5 seeds" in lines[4]
