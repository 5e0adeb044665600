"""The chapter-7 scheduler gallery against closed forms, torch's own schedulers and a counted plateau rule."""
import math

import pytest

from course_utils.chapters.ch07_scheduler_gallery import GALLERY, NAMES, curve, gallery_figure, gallery_table
from course_utils.engine.schedules import lr_curve

LR, EPOCHS, STEPS = 0.1, 12, 10
METRIC = [1.0, 0.8, 0.7, 0.69, 0.7, 0.71, 0.65, 0.66, 0.66, 0.67, 0.67, 0.68]


def per_epoch(lrs):
    assert all(len(set(lrs[e * STEPS:(e + 1) * STEPS])) == 1 for e in range(EPOCHS))  # constant inside an epoch
    return lrs[::STEPS]


def test_every_scheduler_gives_one_lr_per_update():
    for name in NAMES:
        assert len(curve(name, LR, EPOCHS, STEPS, METRIC)) == EPOCHS * STEPS
    assert [row[0] for row in gallery_table(metric=METRIC)] == list(NAMES)
    assert {e.cadence for e in GALLERY} == {"epoch", "update", "metric"}


def test_steplr_and_cosine_closed_forms_per_epoch():
    assert per_epoch(curve("StepLR")) == pytest.approx([LR * 0.5 ** (e // 4) for e in range(EPOCHS)])
    assert per_epoch(curve("CosineAnnealingLR")) == pytest.approx(
        [LR * (1 + math.cos(math.pi * e / EPOCHS)) / 2 for e in range(EPOCHS)], abs=1e-12)


def test_onecycle_and_warmup_cosine_per_update():
    one = curve("OneCycleLR")
    assert one[0] == pytest.approx(LR / 25) and max(one) == pytest.approx(LR) and one[-1] < LR / 1e4
    assert one.index(max(one)) == round(0.3 * len(one)) - 1
    assert curve("warmup + cosine (LambdaLR)") == lr_curve("warmup_cosine", LR, EPOCHS, STEPS)


def test_plateau_matches_a_counted_rule():
    best, bad, lr, expected = math.inf, 0, LR, []
    for value in METRIC:
        expected.append(lr)
        if value < best * (1 - 1e-4):  # torch's default threshold: relative 1e-4
            best, bad = value, 0
        else:
            bad += 1
        if bad > 2:                    # patience 2: the third bad epoch halves the LR
            lr, bad = lr * 0.5, 0
    assert per_epoch(curve("ReduceLROnPlateau", metric=METRIC)) == pytest.approx(expected)
    assert expected[-1] < LR  # the crafted metric does plateau


def test_warm_restarts_come_back_to_the_start_and_the_run_ends_in_a_trough():
    lrs = curve("CosineAnnealingWarmRestarts")
    t0 = math.ceil(EPOCHS * STEPS / 7)
    assert [i for i, x in enumerate(lrs) if x == pytest.approx(LR)] == [0, t0, 3 * t0]  # cycles of T_0, 2 T_0, 4 T_0
    assert lrs[t0 - 1] < LR / 10
    for epochs in range(8, 40):  # 80 updates or more: the run ends near the bottom of its third cycle
        assert curve("CosineAnnealingWarmRestarts", epochs=epochs)[-1] < 0.03 * LR, epochs


def test_a_metric_sizes_the_run_and_is_never_cut():
    metric = [1.0 - 0.05 * e for e in range(8)] + [0.7] * 26  # 34 values: improves, then plateaus
    lrs = curve("ReduceLROnPlateau", metric=metric)
    assert len(lrs) == 34 * STEPS
    assert sorted(set(lrs), reverse=True) == pytest.approx([LR * 0.5 ** k for k in range(len(set(lrs)))])
    assert len(set(lrs)) >= 4  # the plateau is seen: the LR is halved again and again
    rows = gallery_table(metric=metric)
    assert {len(curve(r[0], metric=metric)) for r in rows} == {34 * STEPS}
    with pytest.raises(ValueError, match="34 values but the run has 12 epochs"):
        curve("ReduceLROnPlateau", epochs=12, metric=metric)
    with pytest.raises(ValueError, match="finite"):
        curve("ReduceLROnPlateau", metric=[1.0, float("nan")])


def test_plateau_uses_non_default_factor_and_patience_and_torchs_defaults_would_not_show_it():
    import torch
    from course_utils.chapters.ch07_scheduler_gallery import BY_NAME, PLATEAU
    defaults = torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([torch.zeros(1, requires_grad=True)]))
    assert (defaults.factor, defaults.patience) == (0.1, 10) and PLATEAU != {"factor": 0.1, "patience": 10}
    assert "factor=0.5, patience=2" in BY_NAME["ReduceLROnPlateau"].built


def test_the_wrong_cadence_shows_the_mistake():
    onecycle_per_epoch = curve("OneCycleLR", cadence="epoch")
    assert max(onecycle_per_epoch) < LR / 2          # never gets to its peak
    cosine_per_update = curve("CosineAnnealingLR", cadence="update")
    drops_then_climbs = any(b > a for a, b in zip(cosine_per_update, cosine_per_update[1:]))
    assert drops_then_climbs                          # cosine is periodic: past T_max it climbs back


@pytest.mark.parametrize("kwargs, match", [({"name": "Linear"}, "must be one of"),
                                           ({"name": "ReduceLROnPlateau"}, "needs one validation value"),
                                           ({"name": "StepLR", "cadence": "batch"}, "cadence"),
                                           ({"name": "StepLR", "epochs": 0}, "at least 1")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        curve(**kwargs)


def test_figure_has_six_panels():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = gallery_figure(metric=METRIC)
    assert len(fig.axes) == 6 and all(ax.lines for ax in fig.axes)
    plt.close(fig)
