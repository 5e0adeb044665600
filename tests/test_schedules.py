"""Schedules, checked against torch.optim.lr_scheduler and the closed forms."""
import math

import pytest
import torch
from torch.optim import lr_scheduler

from course_utils.engine.schedules import CADENCE, SCHEDULES, lr_curve, make_scheduler, warmup_cosine_factor

LR, EPOCHS, PER_EPOCH = 0.1, 6, 5


def _per_epoch(curve):
    assert all(len(set(curve[e * PER_EPOCH:(e + 1) * PER_EPOCH])) == 1 for e in range(EPOCHS))
    return curve[::PER_EPOCH]


def test_names_and_cadences():
    assert SCHEDULES == ("constant", "step", "cosine", "warmup_cosine", "onecycle")
    assert {name: CADENCE[name] for name in SCHEDULES} == {
        "constant": "epoch", "step": "epoch", "cosine": "epoch", "warmup_cosine": "update", "onecycle": "update"}


def test_every_curve_has_one_lr_per_update():
    for name in SCHEDULES:
        assert len(lr_curve(name, LR, EPOCHS, PER_EPOCH)) == EPOCHS * PER_EPOCH


def test_constant():
    assert lr_curve("constant", LR, EPOCHS, PER_EPOCH) == [LR] * (EPOCHS * PER_EPOCH)


def test_step_matches_steplr_closed_form():
    epochs = _per_epoch(lr_curve("step", LR, EPOCHS, PER_EPOCH, step_size=2, gamma=0.5))
    assert epochs == pytest.approx([LR * 0.5 ** (e // 2) for e in range(EPOCHS)], rel=1e-12)


def test_cosine_matches_cosineannealinglr_closed_form():
    epochs = _per_epoch(lr_curve("cosine", LR, EPOCHS, PER_EPOCH))
    closed = [LR * (1 + math.cos(math.pi * e / EPOCHS)) / 2 for e in range(EPOCHS)]
    assert epochs == pytest.approx(closed, rel=1e-9, abs=1e-15)


def test_warmup_cosine_matches_linear_then_cosine_annealing_from_torch():
    total = EPOCHS * PER_EPOCH
    warm = round(0.1 * total)                                # 3 updates of warmup
    weight = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([weight], lr=LR)
    oracle = lr_scheduler.SequentialLR(opt, [
        lr_scheduler.LinearLR(opt, start_factor=1 / warm, end_factor=1.0, total_iters=warm - 1),
        lr_scheduler.CosineAnnealingLR(opt, T_max=total - warm)], milestones=[warm])
    expected = []
    for _ in range(total):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        oracle.step()
    assert lr_curve("warmup_cosine", LR, EPOCHS, PER_EPOCH) == pytest.approx(expected, rel=1e-9)


def test_warmup_cosine_factor_shape():
    assert warmup_cosine_factor(0, 100, 10) == pytest.approx(0.1)
    assert warmup_cosine_factor(9, 100, 10) == 1.0 == warmup_cosine_factor(10, 100, 10)
    assert warmup_cosine_factor(55, 100, 10) == pytest.approx(0.5)
    assert warmup_cosine_factor(500, 100, 10) == 0.0          # clamped: never climbs back


def test_onecycle_matches_onecycle_lr_and_its_shape():
    curve = lr_curve("onecycle", LR, EPOCHS, PER_EPOCH)
    weight = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([weight], lr=LR)
    oracle = lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=EPOCHS * PER_EPOCH, cycle_momentum=False)
    expected = []
    for _ in range(EPOCHS * PER_EPOCH):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        oracle.step()
    assert curve == pytest.approx(expected, rel=1e-12)
    assert curve[0] == pytest.approx(LR / 25) and max(curve) == pytest.approx(LR)
    assert curve.index(max(curve)) == round(0.3 * len(curve)) - 1
    assert curve[-1] < LR / 1e4


def test_onecycle_keeps_plain_sgd_plain_and_cycles_real_momentum():
    weight = torch.zeros(1, requires_grad=True)
    plain = torch.optim.SGD([weight], lr=LR)
    make_scheduler("onecycle", plain, epochs=2, steps_per_epoch=3)
    assert plain.param_groups[0]["momentum"] == 0
    heavy = torch.optim.SGD([weight], lr=LR, momentum=0.9)
    make_scheduler("onecycle", heavy, epochs=2, steps_per_epoch=3)
    assert heavy.param_groups[0]["momentum"] == pytest.approx(0.95)   # OneCycle starts at max_momentum


@pytest.mark.parametrize("name, kwargs, match", [("linear", {}, "schedule"),
                                                 ("cosine", {"epochs": 0}, "epochs"),
                                                 ("warmup_cosine", {"warmup": 1.0}, "warmup")])
def test_bad_arguments(name, kwargs, match):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=LR)
    with pytest.raises(ValueError, match=match):
        make_scheduler(name, opt, **{"epochs": 2, "steps_per_epoch": 3, **kwargs})
