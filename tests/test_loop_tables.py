"""Chapter 7's reference tables: every loss value is torch's, and the debugging table's numbers are fp16's own."""
import math

import torch
from torch import nn

from course_utils.chapters.ch07_loop_tables import (DEBUG_TABLE, debug_view, double_softmax_floor, initial_loss_check,
                                                    loss_table, loss_view)


def test_loss_values_are_the_losses_own():
    rows = {r.loss: r.value for r in loss_table()}
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 1.5, 0.3], [-0.5, 0.2, 2.2], [1.0, 1.0, 1.0]])
    assert rows["nn.CrossEntropyLoss()"] == nn.CrossEntropyLoss()(logits, torch.tensor([0, 1, 2, 1])).item()
    assert len(repr(loss_view()).splitlines()) == len(loss_table()) + 1
    assert loss_view()._repr_markdown_().count("\n|") == len(loss_table()) + 1


def test_log_c_check_and_the_softmax_floor():
    for classes in (3, 5):
        measured, expected = initial_loss_check(classes=classes)
        assert expected == math.log(classes) and abs(measured - expected) < 0.05 * expected
    right, wrong = double_softmax_floor()
    assert right < 1e-6 and wrong > 0.5


def test_debugging_table_says_what_fp16_does():
    text = repr(debug_view())
    assert f"{torch.finfo(torch.float16).max:,.0f}" in text                       # overflow above 65,504
    assert torch.tensor(1e-8).half().item() == 0.0                                # a small gradient underflows
    nan_row = next(r for r in DEBUG_TABLE if r.symptom.startswith("loss becomes NaN"))
    flat_row = next(r for r in DEBUG_TABLE if r.symptom.startswith("loss flat"))
    assert "without a GradScaler" not in nan_row.likely_causes and "without a GradScaler" in flat_row.likely_causes
    assert "K=2" in text and "2 windows" not in text


def test_a_softmax_before_the_loss_is_listed_at_its_floor_not_at_the_first_loss():
    """Review 07.1: the double softmax starts near log C (chapter 7's Q5, chapter 9) and stops at a floor."""
    first = next(r for r in DEBUG_TABLE if r.symptom.startswith("loss starts far"))
    floor = next(r for r in DEBUG_TABLE if r.symptom.startswith("loss stops falling at a floor"))
    assert "softmax applied before the loss" in floor.likely_causes
    assert "still starts near log(C)" in first.likely_causes
    _, wrong = double_softmax_floor()
    assert "about 0.55 for 3 classes" in floor.symptom and round(wrong, 2) == 0.55
    lowest = math.log((math.e + 2) / math.e)                     # a perfect, saturated prediction after a softmax
    assert abs(lowest - 0.55) < 0.005
