"""Chapter 6's number boxes follow the course's one input rule (issue 27): what the box shows is what is computed,
anything else is refused in words that quote what was typed, and the run is kept."""
import pytest

from course_utils.engine.session import TrainConfig
from course_utils.widgets.simulator import SimulatorView
from course_utils.widgets.simulator_layout import axis_end

SMALL = TrainConfig(n_train=120, n_val=60, epochs=2, batch_size=16)


@pytest.mark.parametrize("name, typed, computed", [
    ("batch_size", "1e1", 10), ("n_train", "1,000", 1000), ("n_train", "1e3", 1000), ("epochs", " 3 ", 3),
    ("accum_steps", "2.0", 2), ("noise", ".5", 0.5), ("dropout", "2.5e-1", 0.25), ("clip_norm", "1e0", 1.0),
])
def test_a_number_written_any_honest_way_is_computed_as_written(name, typed, computed):
    view = SimulatorView(SMALL)
    view.boxes[name].value = typed
    assert getattr(view.session.config, name) == computed and view.error is None
    assert view.boxes[name].value == typed and view.session.state.step == 0


@pytest.mark.parametrize("name, typed, words", [
    ("batch_size", "2.5", "batch size must be a whole number, got 2.5"),
    ("epochs", "1e3", "epochs must be between 1 and 200, got 1e3 (= 1,000)"),
    ("accum_steps", "2.5", "accumulation steps must be a whole number, got 2.5"),
    ("n_train", "1e400", "dataset size: 1e400 is out of range"),
    ("n_train", "2,5", "'2,5' is ambiguous"),
    ("classes", "abc", "classes: 'abc' is not a number"),
    ("noise", "1e400", "noise: 1e400 is out of range"),
    ("noise", "nan", "noise: 'nan' is not a number"),
    ("dropout", "-1", "dropout must be between 0 and 0.9, got -1"),
    ("clip_norm", "1001", "clip norm (0 = off) must be between 0 and 1000, got 1001"),
    ("clip_norm", "1e3.5", "is not a number"),
    ("batch_size", "", "the box is empty"),
])
def test_anything_else_is_refused_in_words_and_the_run_is_kept(name, typed, words):
    view = SimulatorView(SMALL)
    view.step()
    before = view.boxes[name].value
    view.boxes[name].value = typed
    assert words in view.error and "The run and its settings are kept" in view.error, view.error
    assert view.boxes[name].value == before and view.session.config == SMALL and view.session.state.step == 1
    view.boxes["epochs"].value = "3"              # the next valid change clears the message
    assert view.error is None and "to 3: a new run started" in view.text()


def test_the_same_value_written_differently_keeps_the_run():
    view = SimulatorView(SMALL)
    view.step()
    view.boxes["batch_size"].value = "1.6e1"
    assert view.session.state.step == 1 and "already 16: nothing changed" in view.text()


def test_clipping_before_backward_with_clipping_off_says_what_it_needs():
    view = SimulatorView(SMALL)
    view.bug_boxes["clip_before_backward"].value = True
    assert "“Clipping before backward” changes nothing: it needs a clip norm above 0" in view.text()
    view.boxes["clip_norm"].value = "1"
    assert "changes nothing" not in view.text()


def test_the_message_line_has_a_fixed_height():
    view = SimulatorView(SMALL)
    assert view.message.layout.height and not view.message.layout.min_height


@pytest.mark.parametrize("step, planned, end", [(0, 190, 190), (150, 190, 190), (0, 3800, 3800),
                                                (0, 1_000_000, 5000), (3999, 31_400, 5000), (4100, 31_400, 10_000),
                                                (20_000, 31_400, 31_400), (900_000, 1_000_000, 1_000_000)])
def test_the_x_axis_grows_with_a_long_run(step, planned, end):
    assert axis_end(step, planned) == end
