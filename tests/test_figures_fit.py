"""Every figure a chapter shows keeps its text inside its own canvas.

The notebooks send figures as they are laid out (setup_notebook turns off the inline backend's tight bounding box,
which draws each figure a second time to measure it): a title, label or legend outside the canvas would be cut off
on screen. Each figure the package draws for a chapter or a view is checked here, with the chapter's arguments where
they are cheap, by the bounding box of all it draws.
"""
from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

SLACK_PX = 1.0


def cut_off(fig) -> list[str]:
    """The edges of `fig`'s canvas that what it draws reaches beyond (by more than a pixel): the bounding box of
    everything drawn, as the tight bounding box the inline backend no longer computes would measure it."""
    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)   # a bare Figure: Agg's
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())              # inches
    width, height = fig.get_size_inches()
    slack = SLACK_PX / fig.dpi
    edges = [("left", -drawn.x0), ("bottom", -drawn.y0), ("right", drawn.x1 - width), ("top", drawn.y1 - height)]
    plt.close(fig)
    return [edge for edge, beyond in edges if beyond > slack]


def _timeline():
    from course_utils.engine.arithmetic import training_arithmetic
    from course_utils.widgets.calculator import timeline_figure
    return timeline_figure(training_arithmetic(10_000, 32, 3, accum_steps=4))


def _comparison():
    from course_utils.chapters.ch05_museum import compare
    from course_utils.chapters.ch05_museum_figure import comparison_figure
    return comparison_figure(compare(("missing_zero_grad",), epochs=2, n_train=128), "a title")


def _run():
    from course_utils.chapters.ch06_simulator import run_figure
    from course_utils.engine.session import Session, TrainConfig
    session = Session(TrainConfig(epochs=2, n_train=128, bugs=("missing_zero_grad",)), ghost=True)
    session.run_to_end()
    return run_figure(session, "a title")


def _sweep():
    from course_utils.chapters.ch06_lr_find import lr_find, sweep_figure
    from course_utils.engine.session import TrainConfig
    return sweep_figure(lr_find(TrainConfig(n_train=128), iterations=30), "adam")


def _gallery():
    from course_utils.chapters.ch07_scheduler_gallery import gallery_figure
    return gallery_figure(metric=[1.0 / (1 + e) for e in range(60)])


def _trace():
    from course_utils.chapters.ch07_clipping import spike_study, trace_figure
    return trace_figure(spike_study(range(1)), seed=0)


def _race(title):
    from course_utils.chapters.ch08_arena import Challenge, Knobs, race
    from course_utils.widgets.arena_figure import race_figure
    challenge = Challenge(n_train=240, n_val=120, max_epochs=6)
    baseline = race(challenge, Knobs(batch_size=32, optimizer="adam", lr=0.03, schedule="onecycle", epochs=6))
    return race_figure(baseline, baseline, challenge.target, title=title)


FIGURES = {"chapter 0 timeline": _timeline, "chapter 5 panels": _comparison, "chapter 6 run": _run,
           "chapter 6 lr sweep": _sweep, "chapter 7 schedulers": _gallery, "chapter 7 spikes": _trace,
           "chapter 8 race": lambda: _race(None), "chapter 8 race, titled": lambda: _race("a title of some length")}


@pytest.mark.parametrize("name", FIGURES)
def test_nothing_is_cut_off(name):
    with plt.rc_context({"figure.dpi": 90}):
        assert cut_off(FIGURES[name]()) == []


def test_the_check_sees_a_title_outside_the_canvas():
    """The check can fail: chapter 8's old way, a title set after the margins were fixed for none."""
    fig = _race(None)
    fig.axes[0].set_title("the baseline: validation accuracy after each update")
    assert cut_off(fig) == ["top"]
