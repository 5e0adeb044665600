"""Chapter 6's simulator, headless: every control changes the run it claims to, every bug toggle changes the
telemetry, the ghost is the healthy run, bad input shows a message and keeps the last good state."""
import math

import pytest
import torch

from course_utils.engine.bugs import BUGS, LOOP_BUGS
from course_utils.engine.session import Session, TrainConfig
from course_utils.chapters.ch06_simulator import boundary_grid, data_extent, updates_to_reach
from course_utils.widgets.base import RUN_HINT
from course_utils.widgets.simulator import LIMITS, SimulatorView, simulator

SMALL = TrainConfig(n_train=120, n_val=60, epochs=2, batch_size=16)
# a run where every loop bug leaves a trace: dropout, SGD, accumulation with a remainder, clipping that
# bites, an epoch schedule, a validation set that is no multiple of the batch
SHOWS_ALL = TrainConfig(n_train=120, n_val=60, epochs=2, batch_size=16, dropout=0.3, optimizer="sgd", lr=0.3,
                        accum_steps=3, clip_norm=0.1, schedule="cosine")


def test_opens_with_a_deterministic_text_form():
    a, b = simulator(SMALL), simulator(SMALL)
    assert a.text() == b.text() and "step 0 of 16" in a.text() and "bugs: none" in a.text()
    assert a._repr_mimebundle_()["text/plain"] == a.text() + "\n" + RUN_HINT
    assert a.buttons["stop"].disabled and not a.buttons["step"].disabled


def test_step_epoch_end_and_reset_buttons():
    view = SimulatorView(SMALL)
    view.buttons["step"].click()
    assert view.session.state.step == 1 and "step 1 of 16" in view.text()
    view.buttons["epoch"].click()                  # no event loop here: trains synchronously
    assert len(view.session.epochs) == 1 and view.session.state.step == 8
    assert "epoch 1 of 2 done | step 8 of 16" in view.text()
    view.buttons["end"].click()
    assert view.session.done and "run is complete" in view.text() and "epoch 2 of 2 done" in view.text()
    assert view.buttons["step"].disabled and view.buttons["epoch"].disabled
    view.buttons["step"].click()                   # disabled in the browser; a stray call still says why
    view.buttons["reset"].click()
    assert view.session.state.step == 0 and not view.session.done and not view.buttons["step"].disabled


def test_view_telemetry_is_the_sessions_own():
    """Oracle: a bare Session with the same config; the panels got exactly its points."""
    view = SimulatorView(SMALL)
    for _ in range(3):
        view.step()
    view.train_to_end()
    oracle = Session(SMALL)
    oracle.run_to_end()
    assert [y for _, y in view.plot.data["loss"]] == [e.loss for e in oracle.steps]
    assert [y for _, y in view.plot.data["val_acc"]] == [e.val_acc for e in oracle.epochs]
    assert [x for x, _ in view.plot.data["val_acc"]] == [e.steps for e in oracle.epochs]
    assert view.plot.xmax == SMALL.arithmetic().total_micro_steps


def _shown(plot, sent):
    """A browser view appears (it asks for a snapshot) and acknowledges every message it draws."""
    original = plot.send

    def send(content, buffers=None):
        original(content, buffers)
        sent.append(content)
        if "seq" in content:
            plot._on_message(plot, {"type": "ack", "seq": content["seq"]}, [])
    plot.send = send
    plot._on_message(plot, {"type": "ready"}, [])


def test_live_plot_sends_only_new_points():
    view = SimulatorView(SMALL)
    sent = []
    _shown(view.plot, sent)
    assert sent[0]["type"] == "reset"
    view.step()
    appended = [m for m in sent if m["type"] == "append"]
    assert len(appended) == 1 and {len(buckets) for _, buckets in appended[0]["series"].values()} == {1}
    view.step()
    appended = [m for m in sent if m["type"] == "append"]
    assert appended[-1]["series"]["loss"] == [1, [[2.0, view.session.steps[-1].loss]]]
    assert len(view.plot.data["loss"]) == 2
    sent.clear()
    view.plot._on_message(view.plot, {"type": "ready"}, [])     # a new browser view asks for everything once
    assert sent[0]["type"] == "reset" and sent[0]["series"]["loss"][0] == 0 and "grid" in sent[0]
    assert len(sent[0]["series"]["loss"][1]) == 2


def test_a_step_reaches_the_browser_as_one_message_with_the_readouts(monkeypatch):
    """Every widget's outgoing comm message is counted: a Step (after the first) sends exactly one, the plot's,
    and it carries the new points, the boundary and the readouts the text form shows."""
    from ipywidgets import Widget
    view = SimulatorView(SMALL)
    _shown(view.plot, [])
    sent = []
    original = Widget._send
    monkeypatch.setattr(Widget, "_send", lambda self, msg, buffers=None: (sent.append((self, msg)),
                                                                         original(self, msg, buffers)))
    view.step()                                     # the first Step also changes the note above the plot
    assert len(sent) == 2 and sent[-1][0] is view.plot, [(type(w).__name__, m) for w, m in sent]
    for n in (2, 3):
        sent.clear()
        view.step()
        assert len(sent) == 1 and sent[0][0] is view.plot, [(type(w).__name__, m) for w, m in sent]
        content = sent[0][1]["content"]
        assert {"series", "grid", "text"} <= set(content) and content["text"] == view.plot.text
        assert f"step {n} of 16" in content["text"][0] and set(content["text"]) <= set(view.text().splitlines())


@pytest.mark.parametrize("name, value, attribute, expected", [
    ("n_train", "150", "n_train", 150), ("classes", "4", "classes", 4), ("noise", "0.5", "noise", 0.5),
    ("batch_size", "20", "batch_size", 20), ("epochs", "3", "epochs", 3), ("accum_steps", "2", "accum_steps", 2),
    ("dropout", "0.25", "dropout", 0.25), ("optimizer", "momentum", "optimizer", "momentum"),
    ("schedule", "onecycle", "schedule", "onecycle"), ("clip_norm", "0.5", "clip_norm", 0.5),
])
def test_every_setting_restarts_the_run_with_that_setting(name, value, attribute, expected):
    view = SimulatorView(SMALL)
    view.step()
    view.boxes[name].value = value
    assert getattr(view.session.config, attribute) == expected and view.session.state.step == 0
    assert "new run started from step 0" in view.text() and view.error is None
    view.train_to_end()
    oracle = Session(TrainConfig(**{**vars(SMALL), attribute: expected}))
    oracle.run_to_end()
    assert [e.loss for e in view.session.steps] == [e.loss for e in oracle.steps]


def test_classes_setting_reaches_the_model_and_the_boundary():
    view = SimulatorView(SMALL)
    view.boxes["classes"].value = "5"
    assert view.session.model.head.out_features == 5
    assert set(view.plot._points[1]) == set(range(5))


def test_lr_slider_mid_run_keeps_the_run_and_before_step_one_restarts():
    view = SimulatorView(SMALL)
    view.log_lr.value = -1.0
    assert view.session.config.lr == pytest.approx(0.1) and view.session.lr_changes == []
    view.step()
    view.step()
    view.log_lr.value = -2.0
    assert view.session.state.step == 2 and view.session.lr_changes == [(2, pytest.approx(0.01))]
    assert view.step().lr == pytest.approx(0.01)
    assert "changed mid-run: 0.01 at step 2" in view.text()
    view.reset()                                   # Reset starts from the slider's value
    assert view.session.config.lr == pytest.approx(0.01) and view.session.lr_changes == []


@pytest.mark.parametrize("bug", LOOP_BUGS)
def test_each_bug_toggle_changes_the_telemetry_against_its_ghost(bug):
    view = SimulatorView(SHOWS_ALL)
    view.bug_boxes[bug].value = True
    assert view.session.config.bugs == (bug,) and view.session.ghost is not None
    assert f"bugs: {bug}" in view.text() and "healthy ghost" in view.text()
    view.train_to_end()
    bugged = [(type(e).__name__, vars(e)) for e in view.session.history]
    ghost = [(type(e).__name__, vars(e)) for e in view.session.ghost.history]
    assert bugged != ghost, bug
    assert "ghost_loss" in view.plot.data and any(p["series"][-1]["faint"] for p in view.plot.panels)
    view.bug_boxes[bug].value = False
    assert view.session.ghost is None and view.session.config.bugs == ()


def test_a_hidden_bug_says_what_it_needs():
    view = SimulatorView(SMALL)
    view.bug_boxes["epoch_schedule_per_batch"].value = True
    assert "changes nothing: it needs schedule step or cosine" in view.text()


def test_two_bugs_on_one_operation_show_a_message_and_keep_the_run():
    view = SimulatorView(SMALL)
    view.bug_boxes["missing_zero_grad"].value = True
    view.step()
    view.bug_boxes["zero_grad_after_backward"].value = True
    assert not view.bug_boxes["zero_grad_after_backward"].value           # the box is unticked again
    assert view.session.config.bugs == ("missing_zero_grad",) and view.session.state.step == 1
    assert "both change the same operation" in view.error and "Traceback" not in view.message.value
    assert BUGS["zero_grad_after_backward"].title in view.text()
    view.step()                                                           # the run goes on
    assert view.session.state.step == 2 and view.error is None


@pytest.mark.parametrize("name, bad", [("n_train", "0"), ("n_train", "1000000"), ("batch_size", "0"),
                                       ("classes", "1"), ("noise", "-0.1"), ("dropout", "0.95"), ("epochs", "0"),
                                       ("accum_steps", "0"), ("clip_norm", "-1")])
def test_out_of_range_input_shows_a_message_in_screen_words_and_keeps_the_last_good_state(name, bad):
    view = SimulatorView(SMALL)
    view.step()
    good = view.boxes[name].value
    view.boxes[name].value = bad
    label = LIMITS[name][0]
    assert view.error.startswith(f"{label} must be between") and name not in view.error.replace(label, "")
    assert view.boxes[name].value == good and view.session.config == SMALL and view.session.state.step == 1
    assert "⚠" in view.message.value and "Traceback" not in view.message.value


def test_an_invalid_combination_from_the_config_is_shown_in_screen_words():
    view = SimulatorView(TrainConfig(n_train=120, n_val=60, epochs=2, batch_size=16, schedule="onecycle",
                                     accum_steps=2))
    view.bug_boxes["epoch_schedule_per_batch"].value = True
    assert view.error and "OneCycleLR" in view.error and view.session.config.bugs == ()
    assert not view.bug_boxes["epoch_schedule_per_batch"].value


def test_a_failing_action_shows_a_message_not_a_traceback():
    view = SimulatorView(SMALL)
    view.session.step = lambda: 1 / 0
    view.buttons["step"].click()
    assert "Something went wrong" in view.error and "division by zero" in view.error


def test_stop_when_nothing_runs_says_so():
    view = SimulatorView(SMALL)
    view.buttons["stop"].click()
    assert "Nothing is running" in view.text()


def test_a_stop_that_arrives_after_the_run_ended_keeps_the_runs_last_word():
    """Stop clicked during Train to end, handled by the kernel after the last step (a race the page cannot see)."""
    view = SimulatorView(SMALL)
    view.train_to_end()
    assert "The run is complete" in view.text()
    view.stop()
    assert "The run is complete" in view.text() and "Nothing is running" not in view.text()


def test_async_training_can_be_stopped_and_goes_on_from_there():
    """The button path in a kernel: a task that yields between micro-batches; Stop ends it."""
    import asyncio

    async def scenario():
        view = SimulatorView(SMALL)
        view._start("end")
        assert view.running and not view.buttons["stop"].disabled and view.buttons["step"].disabled
        for _ in range(3):
            await asyncio.sleep(0)
        view.buttons["stop"].click()
        await view._task
        return view

    view = asyncio.run(scenario())
    assert not view.running and 0 < view.session.state.step < 16 and "Stopped at step" in view.text()
    view.train_to_end()
    oracle = Session(SMALL)
    oracle.run_to_end()
    assert [e.loss for e in view.session.steps] == [e.loss for e in oracle.steps]


def test_stop_is_honoured_whenever_it_arrives_even_at_an_epoch_boundary():
    """Stop clicked after any number of turns of the event loop, including the turn right after an epoch's
    last micro-batch (where a stop request used to be dropped when the next epoch began), ends the run."""
    import asyncio

    total = SMALL.epochs * SMALL.arithmetic().iters_per_epoch

    async def stop_after(turns: int):
        view = SimulatorView(SMALL)
        view._start("end")
        for _ in range(turns):
            await asyncio.sleep(0)
        view.buttons["stop"].click()
        await view._task
        return view

    for turns in range(total):
        view = asyncio.run(stop_after(turns))
        assert not view.running and view.session.state.step < total, turns
        assert "Stopped at step" in view.text(), (turns, view.text())
    view.train_epoch()                                    # the request was consumed: training goes on
    assert view.session.state.step > 0 and "Stopped" not in view.text()


def test_boundary_grid_predicts_like_the_model_and_leaves_it_unchanged():
    s = Session(TrainConfig(**{**vars(SMALL), "dropout": 0.5}))
    s.run_epoch()
    s.model.train()
    before = [p.clone() for p in s.model.parameters()]
    extent = data_extent(s.state.splits.train.tensors[0])
    classes, confidence = boundary_grid(s.model, extent, 8)
    assert all(m.training for m in s.model.modules())           # every module back in training mode
    assert all(torch.equal(a, b) for a, b in zip(before, s.model.parameters()))
    corner = torch.tensor([[extent[0], extent[2]], [extent[1], extent[3]]])
    s.model.eval()
    expected = s.model(corner).argmax(dim=1).tolist()
    assert [classes[0], classes[-1]] == expected and len(confidence) == 64
    with pytest.raises(ValueError, match="n must be"):
        boundary_grid(s.model, extent, 1)


def test_updates_to_reach_counts_the_first_update_at_the_target():
    """Oracle: a counted loop evaluating after every update."""
    config = TrainConfig(n_train=200, n_val=100, epochs=3, measure_memory=False)
    found = updates_to_reach(config, 0.6)
    s = Session(config)
    accuracies = []
    while (event := s.step()) is not None:
        accuracies.append(s.evaluate()[1])
    first = next(i + 1 for i, a in enumerate(accuracies) if a >= 0.6)
    assert found == first
    assert updates_to_reach(config, 1.0) is None or accuracies[found - 1] == 1.0
    with pytest.raises(ValueError, match="target"):
        updates_to_reach(config, 1.5)
