"""Chapter 7's quiz keys, checked against the code that the chapter's cells run."""
import math

import torch

from course_utils.arithmetic import batch_sizes, loss_weight
from course_utils.quiz import check, load_bank
from course_utils.scheduler_gallery import curve


def question(qid):
    return next(q for q in load_bank(7).questions if q.id == qid)


def test_bank_has_the_seed_question_and_feedback_everywhere():
    bank = load_bank(7)
    assert len(bank.questions) >= 4 and question("resumable-checkpoint").kind == "multi"
    for q in bank.questions:
        assert q.explanation and all(o.feedback for o in q.options)


def test_initial_loss_key_is_log_c():
    assert check(question("initial-loss"), math.log(10)).correct
    assert not check(question("initial-loss"), 1.1).correct


def test_short_window_weight_is_one():
    sizes = batch_sizes(360, 8)              # 45 micro-batches: 11 windows of 4, then a window of 1
    assert loss_weight(len(sizes) - 1, sizes, 4) == 1.0
    assert question("accumulation-short-window").options[0].text.startswith("By 1:")


def test_onecycle_per_epoch_never_reaches_max_lr():
    assert max(curve("OneCycleLR", lr=0.1, cadence="epoch")) < 0.05


def test_bf16_has_float32s_range_and_fp16_does_not():
    assert torch.finfo(torch.bfloat16).max > 1e38 and torch.finfo(torch.float16).max < 7e4
    assert torch.finfo(torch.bfloat16).tiny > 0 and torch.finfo(torch.bfloat16).tiny < 1e-37
