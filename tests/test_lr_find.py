"""The LR range test (chapter 6): an exponential sweep on the run it tunes, a sensible suggestion, a view.

That the suggestion trains well (and rates 30 times off do not) is checked over five seeds in
tests/test_simulator_seeds.py."""
import math
from dataclasses import replace

import pytest

from course_utils.engine.loop import train_epoch
from course_utils.chapters.ch06_lr_find import ITERATIONS, LR_FIND, lr_find, sweep_figure
from course_utils.infra.notebook import one_thread
from course_utils.engine.session import TrainConfig, build
from course_utils.chapters.ch06_simulator import lr_outcome
from course_utils.widgets.lr_find_view import LrFindView, lr_range_test

FAST = replace(LR_FIND, n_train=480)          # 15 micro-batches an epoch


def test_sweep_is_exponential_and_uses_the_loop_with_each_lr():
    sweep = lr_find(FAST, start_lr=1e-4, end_lr=1.0, diverge=1e9, iterations=30)
    assert len(sweep.lrs) == 30 and not sweep.stopped_early
    assert sweep.lrs[0] == pytest.approx(1e-4) and sweep.lrs[-1] == pytest.approx(1.0)
    ratios = [b / a for a, b in zip(sweep.lrs, sweep.lrs[1:])]
    assert max(ratios) == pytest.approx(min(ratios))
    assert sweep.lrs[0] < sweep.suggested <= sweep.min_loss_lr <= sweep.lrs[-1]


def test_the_sweep_runs_on_the_run_it_tunes_across_epochs():
    """Oracle: the run's own loop, epoch after epoch (15 micro-batches each), each lr set before its step."""
    assert replace(LR_FIND, measure_memory=True) == TrainConfig() and ITERATIONS == 100
    sweep = lr_find(FAST, start_lr=1e-3, end_lr=0.1, diverge=1e9, iterations=20)
    assert (sweep.n_train, sweep.batch_size, len(sweep.lrs)) == (480, 32, 20)
    state = build(FAST)
    steps = (event for _ in range(2) for event in train_epoch(state))
    losses = []
    with one_thread():
        for lr in sweep.lrs:
            for group in state.optimizer.param_groups:
                group["lr"] = lr
            losses.append(next(steps).loss)
    assert losses == sweep.losses and state.epoch == 2


def test_smoothing_is_a_bias_corrected_moving_average():
    sweep = lr_find(FAST, beta=0.5, diverge=1e9, iterations=30)
    average = 0.0
    for i, loss in enumerate(sweep.losses):
        average = 0.5 * average + 0.5 * loss
        assert sweep.smoothed[i] == pytest.approx(average / (1 - 0.5 ** (i + 1)))
    assert sweep.smoothed[0] == pytest.approx(sweep.losses[0])


def test_sweep_stops_when_the_loss_diverges():
    sweep = lr_find(end_lr=100.0)
    assert sweep.stopped_early and sweep.smoothed[-1] > 4 * min(sweep.smoothed)
    assert len(sweep.lrs) < ITERATIONS
    assert sweep.minimum_rule == sweep.min_loss_lr / 10 and sweep.suggested < sweep.min_loss_lr


@pytest.mark.parametrize("kwargs, match", [(dict(start_lr=0), "start_lr"), (dict(end_lr=math.inf), "end_lr"),
                                           (dict(start_lr=1.0, end_lr=0.1), "end_lr must be larger"),
                                           (dict(beta=1.0), "beta"), (dict(diverge=1.0), "diverge")])
def test_bad_arguments_raise_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lr_find(FAST, **kwargs)


def test_too_few_micro_batches_is_refused():
    with pytest.raises(ValueError, match="at least 5 micro-batches"):
        lr_find(FAST, iterations=4)
    with pytest.raises(ValueError, match="no micro-batch"):
        lr_find(replace(LR_FIND, n_train=20, drop_last=True))


def test_view_sweeps_per_optimizer_and_shows_errors_as_messages():
    view = lr_range_test("adam")
    assert view.text().startswith("LR range test (Adam)") and "data:image/png;base64" in view.figure.value
    view.optimizer.value = "sgd"
    view.button.click()
    assert view.text().startswith("LR range test (SGD)") and not view.button.disabled
    empty = LrFindView()
    assert "press Sweep" in empty.text()
    import course_utils.widgets.lr_find_view as module
    original = module.lr_find
    module.lr_find = lambda config: (_ for _ in ()).throw(ValueError("boom"))
    try:
        empty.button.click()
    finally:
        module.lr_find = original
    assert "The sweep failed: boom" in empty.text() and "⚠" in empty.summary.value


def test_a_changed_menu_dims_the_old_sweep_and_sweep_never_repeats_the_same_one(monkeypatch):
    """Issue 27: the figure never shows one optimizer under a menu naming another; clicks on the shown one are free."""
    import course_utils.widgets.lr_find_view as module
    calls = []
    original = module.lr_find
    monkeypatch.setattr(module, "lr_find", lambda config: calls.append(config.optimizer) or original(config))
    view = lr_range_test("adam")
    view.optimizer.value = "momentum"
    assert "This figure is the sweep for Adam: press Sweep to test SGD + momentum" in view.figure.value
    assert "opacity" in view.figure.value and "opacity" in view.summary.value
    for _ in range(3):                                   # three quick clicks: one sweep
        view.button.click()
    assert calls == ["adam", "momentum"] and "opacity" not in view.figure.value
    assert "SGD + momentum" in view.summary.value and "(momentum)" not in view.summary.value
    view.optimizer.value = "adam"                        # back to a swept one? it is not kept: dimmed again
    assert "press Sweep to test Adam" in view.figure.value


def test_the_figure_is_shown_at_its_own_size_with_legible_legends():
    from course_utils.widgets.base import figure_png, png_size
    from course_utils.widgets.lr_find_view import FIGURE_PX
    sweep = lr_find(FAST)
    fig = sweep_figure(sweep, "Adam")
    assert min(t.get_fontsize() for t in fig.axes[0].get_legend().get_texts()) * fig.dpi / 72 >= 9
    assert "Adam" in fig.axes[0].get_title()
    assert png_size(figure_png(fig, tight=False)) == FIGURE_PX
