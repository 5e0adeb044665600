"""Chapter 4's accuracy counts against a counted loop: the right count is the one a Python loop over the examples
gives; the broadcast table's mean is the chance agreement of predictions and labels, whatever the model."""
import torch

from course_utils.chapters.ch04_accuracy_counts import _batch, accuracy_count_lines


def test_the_counts_agree_with_a_loop_and_the_broadcast_is_chance():
    logits, y = _batch()
    pred = logits.argmax(1)
    counted = sum(int(p) == int(t) for p, t in zip(pred, y))
    assert counted == 270
    lines = accuracy_count_lines()
    assert lines[1].endswith(f"{counted / len(y):.2f}")
    # the table's mean is sum over classes of P(pred = c) * P(label = c): chance, not the model's accuracy
    chance = sum((pred == c).float().mean() * (y == c).float().mean() for c in range(3)).item()
    assert f".float().mean() {chance:.2f}" in lines[2] and abs(chance - 1 / 3) < 1e-6
    assert "correct // total (floor division of the count): 0 " in lines[3]
    assert lines[3].endswith("1 for a model right on all 300, 0 again with a single mistake"), lines[3]
    assert "RuntimeError: The size of tensor a (300) must match the size of tensor b (3)" in lines[4]


def test_a_different_model_leaves_the_broadcast_count_where_it_was():
    logits, y = _batch(wrong=0)                                # a perfect model
    assert ((logits.argmax(1) == y.unsqueeze(1)).float().mean() - 1 / 3).abs() < 1e-6
