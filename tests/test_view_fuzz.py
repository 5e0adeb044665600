"""Headless view fuzz (issue 15.2): build every view, drive every input through edge values, click every button.

HOW TO ADD YOUR VIEW: append ONE line to VIEW_FACTORIES below,
    ("chNN what it is", "course_utils.widgets.your_module:factory", {"keyword": value}),
(the factory is called with those keyword arguments and must return a View, i.e. an object with `.widget`
and `.text()`). Nothing else is needed: the harness finds every control inside `view.widget`.

What it does, per view: walks the widget tree and, for every enabled control, sets edge values (text boxes:
zero, negative, huge, malformed, "2.5", "1e3", "2,5", empty; sliders: min, max; checkboxes and toggles: both
ways; choices: every option) and clicks every button twice, restoring each control afterwards. It fails on any
exception that escapes a handler: those raised by an observer come back from the assignment, and those raised
by a button's on_click (which ipywidgets would swallow and log, invisible in JupyterLab) are captured by
patching ipywidgets' CallbackDispatcher. After every action the view's text form must still render.

Every number box is held to the course's one input rule (issue 27): it is a course number box (no ipywidgets
IntText / FloatText, which turn "2.5" into 25), it shows either exactly what was typed or what it showed before
(reverted), never a third value, and text the shared parser refuses ("2.5" in a whole-number box, "1e400",
"2,5", "abc") makes the view say so ("⚠") rather than compute something.
Run `pytest tests/test_view_fuzz.py -s` to see how many controls and actions each view got.
"""
from __future__ import annotations

import importlib
import time

import ipywidgets as w
import pytest
from ipywidgets.widgets.widget import CallbackDispatcher

from course_utils.chapters.ch06_predictions import prediction_bank

VIEW_FACTORIES: list[tuple[str, str, dict]] = [
    ("ch00 calculator", "course_utils.widgets.calculator:calculator", {}),
    ("ch00 calculator K=4", "course_utils.widgets.calculator:calculator", {"accum_steps": 4, "world_size": 2}),
    ("ch00 course progress", "course_utils.widgets.quiz_view:course_progress", {}),
    ("ch01 pipeline", "course_utils.widgets.pipeline_view:pipeline_view", {"drop_last": True}),
    ("ch02 sampling", "course_utils.widgets.sampling_view:sampling_strategies", {}),
    ("ch02 distributed", "course_utils.widgets.sampling_view:distributed", {}),
    ("ch02 padding", "course_utils.widgets.sampling_view:padding", {}),
    ("ch00 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 0}),
    ("ch01 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 1}),
    ("ch02 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 2}),
    ("ch03 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 3}),
    ("ch04 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 4}),
    ("ch05 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 5}),
    # chapters 3-5 and later chapters: append your views here, one line each.
    ("ch03 step-through", "course_utils.widgets.step_view:step_through", {}),
    ("ch04 train vs eval", "course_utils.widgets.train_eval_view:train_vs_eval", {}),
    ("ch05 bug detector", "course_utils.widgets.bug_detector:bug_detector", {"n_train": 60, "n_val": 30, "n_test": 30, "epochs": 2, "batch_size": 16, "accum_steps": 2, "clip_norm": 1.0}),
    ("ch05 mystery", "course_utils.widgets.mystery_view:mystery", {"config": {"n_train": 60, "n_val": 30, "n_test": 30, "epochs": 2, "batch_size": 16, "accum_steps": 2, "clip_norm": 1.0, "dropout": 0.2}}),
    ("ch06 simulator", "course_utils.widgets.simulator:simulator", {"n_train": 120, "n_val": 60, "epochs": 2, "batch_size": 16}),
    ("ch06 LR range test", "course_utils.widgets.lr_find_view:lr_range_test", {}),
    ("ch07 flowchart", "course_utils.widgets.flowchart_view:FlowchartView", {"enabled": ("seed", "checkpoint")}),
    ("ch08 arena", "course_utils.widgets.arena_view:arena", {"batch_size": 64, "optimizer": "adam", "lr": 0.1, "epochs": 2, "background": False}),
    ("ch06 simulator, a bug ticked", "course_utils.widgets.simulator:simulator", {"n_train": 120, "n_val": 60, "epochs": 2, "batch_size": 16, "bugs": ("missing_zero_grad",), "clip_norm": 1.0, "dropout": 0.2}),
    ("ch06 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 6}),
    ("ch07 flowchart, all components", "course_utils.widgets.flowchart_view:FlowchartView", {"enabled": ("seed", "checkpoint", "early_stop", "accumulation", "amp", "clip", "nan_guard", "schedule", "logging", "compile", "scale_out")}),
    ("ch07 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 7}),
    ("ch08 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 8}),
    ("ch09 quiz", "course_utils.widgets.quiz_view:quiz", {"chapter": 9}),
    ("ch09 course progress", "course_utils.widgets.quiz_view:course_progress", {}),
    *[(f"ch06 prediction {q.id}", "course_utils.widgets.predict_view:predict",
       {"chapter": 6, "qid": q.id.removeprefix("predict-")}) for q in prediction_bank(6).questions],
    *[(f"ch07 prediction {q.id}", "course_utils.widgets.predict_view:predict",
       {"chapter": 7, "qid": q.id.removeprefix("predict-")}) for q in prediction_bank(7).questions],
    ("ch06 hidden measurement", "course_utils.widgets.predict_view:AnswerView",
     {"chapter": 6, "qid": "adam-lr-one", "printed": "runs with a NaN loss  0 of 5\n"}),
]

TEXT_EDGES = ["0", "-5", "99999999999999999999", "1e400", "abc", "", "2.5", "1e3", " 7 ", "1,000", "nan", "-0",
              "2,5", "2,30", "1e-400", "0.5", "1.6e1"]
NUMBER_EDGES = [0, -5, 10**20, 1, 2**63]
MAX_CHOICES = 8


class Escaped(list):
    """Exceptions that escaped a callback during the current action."""


ESCAPED = Escaped()


@pytest.fixture(autouse=True)
def _capture_callback_exceptions(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_PROGRESS", str(tmp_path / "progress.json"))

    def call(self, *args, **kwargs):
        value = None
        for callback in self.callbacks:
            try:
                local = callback(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - recorded and failed on below
                ESCAPED.append(exc)
            else:
                value = local if local is not None else value
        return value

    monkeypatch.setattr(CallbackDispatcher, "__call__", call)
    ESCAPED.clear()
    yield
    ESCAPED.clear()


def controls(root: w.Widget) -> list[w.Widget]:
    """Every widget under `root`, depth first (controls inside boxes inside boxes included)."""
    found, stack = [], [root]
    while stack:
        widget = stack.pop(0)
        found.append(widget)
        stack[:0] = list(getattr(widget, "children", ()) or ())
    return found


def edge_values(widget: w.Widget) -> list:
    """The values to drive a control through, by kind."""
    if isinstance(widget, (w.Text, w.Textarea)):
        return TEXT_EDGES
    if isinstance(widget, (w.IntSlider, w.FloatSlider, w.BoundedIntText, w.BoundedFloatText, w.Play)):
        return [widget.min, widget.max, (widget.min + widget.max) // 2 if isinstance(widget.min, int)
                else (widget.min + widget.max) / 2]
    if isinstance(widget, (w.IntText, w.FloatText)):
        return NUMBER_EDGES
    if isinstance(widget, (w.Checkbox, w.ToggleButton)):
        return [not widget.value, widget.value]
    if isinstance(widget, (w.Dropdown, w.RadioButtons, w.ToggleButtons, w.Select)):
        return [value for _, value in list(zip(widget._options_labels, widget._options_values))[:MAX_CHOICES]]
    if isinstance(widget, w.SelectMultiple):
        return [(), tuple(widget._options_values[:2])]
    return []


def shown_words(view) -> str:
    """Everything the view shows in words: its HTML widgets and its text form."""
    return " ".join(getattr(c, "value", "") for c in controls(view.widget) if isinstance(c, w.HTML)) + view.text()


def check_number_box(view, name: str, box: w.Text, typed: str, before: str) -> None:
    """The one input rule for one typed value: shown as typed or reverted, and refused in words if unreadable."""
    from course_utils.infra.numbers import parse_decimal, parse_whole_number
    assert box.value in (typed, before), f"{name}: {box.description!r} shows {box.value!r} after {typed!r}"
    parse = parse_whole_number if box.number_kind == "whole" else parse_decimal
    try:
        parse(typed, box.description)
    except ValueError:
        assert "⚠" in shown_words(view) or "invalid input" in view.text(), (
            f"{name}: {box.description!r} = {typed!r} is refused by the rule but the view says nothing")


def _act(view, name: str, what: str, action) -> float:
    start = time.perf_counter()
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - an observer's exception comes back from the assignment
        pytest.fail(f"{name}: {what} raised {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    assert not ESCAPED, f"{name}: {what} let an exception escape a callback: {ESCAPED[0]!r}"
    text = view.text()
    assert isinstance(text, str) and text, f"{name}: text form empty after {what}"
    return seconds


@pytest.mark.parametrize("name, target, kwargs", VIEW_FACTORIES, ids=[f[0] for f in VIEW_FACTORIES])
def test_every_control_survives_edge_values(name, target, kwargs):
    module, _, attribute = target.partition(":")
    view = getattr(importlib.import_module(module), attribute)(**kwargs)
    assert not ESCAPED, f"{name}: building the view let an exception escape: {ESCAPED[0]!r}"
    assert view.text()
    widgets = controls(view.widget)
    mangling = [c for c in widgets if isinstance(c, (w.IntText, w.FloatText, w.BoundedIntText, w.BoundedFloatText))]
    assert not mangling, f"{name}: {[c.description for c in mangling]} are not course number boxes"
    driven, actions, worst, boxes = 0, 0, (0.0, ""), set()
    for widget in widgets:
        label = f"{type(widget).__name__} {getattr(widget, 'description', '')!r}"
        if isinstance(widget, w.Button):
            driven += 1
            for _ in range(2):
                if widget.disabled:
                    break
                seconds = _act(view, name, f"clicking {label}", widget.click)
                actions += 1
                worst = max(worst, (seconds, f"click {label}"))
            continue
        values = edge_values(widget)
        if not values:
            continue
        driven += 1
        original = widget.value
        for value in list(values) + [original]:
            if getattr(widget, "disabled", False):
                break
            before = widget.value
            seconds = _act(view, name, f"setting {label} to {value!r}",
                           lambda: setattr(widget, "value", value))
            if hasattr(widget, "number_kind"):
                check_number_box(view, name, widget, value, before)
                boxes.add(id(widget))
            actions += 1
            worst = max(worst, (seconds, f"{label} = {value!r}"))
    assert driven, f"{name}: no control found to drive"
    print(f"\n[view fuzz] {name}: {driven} controls ({len(boxes)} number boxes held to the input rule), {actions} "
          f"actions, slowest {worst[0] * 1000:.0f} ms ({worst[1]})")
