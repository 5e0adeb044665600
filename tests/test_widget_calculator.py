"""The chapter-0 calculator view, headless: inputs change numbers and timeline; bad input shows a message."""
import pytest

from course_utils.engine.arithmetic import training_arithmetic
from course_utils.widgets.calculator import STAGES, calculator


def test_inputs_update_numbers_and_timeline():
    view = calculator(dataset_size=10_000, batch_size=32, epochs=3, accum_steps=4)
    assert "79" in view.numbers.value and "<svg" in view.timeline.value and "237 weight updates" in view.timeline.value
    before_png, before_text = view.timeline.value, view.text()
    view.batch_size.value = "64"
    assert view.result == training_arithmetic(10_000, 64, 3, 4)
    assert view.timeline.value != before_png and view.text() != before_text
    assert f">{view.result.iters_per_epoch}<" in view.numbers.value
    for control, value in [(view.dataset_size, "999"), (view.epochs, "5"), (view.accum_steps, "3"),
                           (view.world_size, "4"), (view.drop_last, True)]:
        png = view.timeline.value
        control.value = value
        assert view.error is None and view.timeline.value != png, control.description
    assert view.result == training_arithmetic(999, 64, 5, 3, drop_last=True, world_size=4)


@pytest.mark.parametrize("typed, computed", [("2.5", None), ("1e3", 1000), ("2.0", 2), ("1,000", 1000),
                                              (" 40 ", 40), ("25", 25), ("2,5", None), ("10,000", 10000), ("abc", None), ("", None)])
def test_what_the_box_shows_is_what_is_computed(typed, computed):
    """Issue 15.3: the text stays exactly as typed or pasted; it is computed as written, or refused with a message."""
    view = calculator()
    view.epochs.value = typed
    assert view.epochs.value == typed
    if computed is None:
        assert view.result is None and "epochs E" in view.message.value and "invalid input" in view.text()
        assert view.stage.disabled and view.micro_step.disabled and view.play.disabled
    else:
        assert view.result.epochs == computed and view.message.value == ""


def test_invalid_input_keeps_the_layout_and_speaks_the_labels():
    view = calculator()
    view.batch_size.value = "0"
    assert "batch size B must be at least 1" in view.message.value and "batch_size" not in view.message.value
    assert "opacity" in view.numbers.value and "<svg" in view.timeline.value   # dimmed, not removed
    assert "invalid input" in view.text()
    view.batch_size.value = "32"
    assert view.message.value == "" and view.error is None and "opacity" not in view.numbers.value
    view.dataset_size.value = str(10**9)
    assert "between 1 and 10,000,000" in view.message.value and "dataset size N" in view.message.value


def test_animate_one_step_walks_every_stage_and_knows_accumulation():
    view = calculator(dataset_size=100, batch_size=16, epochs=1, accum_steps=4)
    seen = []
    for stage in range(len(STAGES)):
        view.stage.value = stage
        seen.append(view.step_view.value)
    assert len(set(seen)) == len(STAGES)
    view.micro_step.value = 1
    assert "gradients accumulate (1 of K=4)" in view.step_view.value
    view.micro_step.value = view.micro_step.max  # the 7th micro-batch is the flush
    assert view.micro_step.max == 7 and "optimizer.step()" in view.step_view.value
    view.stage.value = 0
    assert "4 examples drawn: batch 7 of 7, examples 97–100" in view.step_view.value


def test_no_batch_at_all_is_explained():
    view = calculator(dataset_size=5, batch_size=10, drop_last=True)
    assert view.error is None and "no complete batch" in view.step_view.value and view.micro_step.disabled


def test_labels_use_plurals_and_commas():
    view = calculator(dataset_size=1, batch_size=1, epochs=1)
    view.stage.value = 0
    assert "1 example drawn" in view.step_view.value


def test_timeline_marks_every_update_and_the_flush():
    """The SVG timeline draws one mark per update of an epoch, the flush in orange, and the dropped examples."""
    view = calculator(dataset_size=100, batch_size=16, epochs=2, accum_steps=4)
    r = view.result
    assert view.timeline.value.count("<path") == r.updates_per_epoch == 2
    assert view.timeline.value.count("#ef6c00") >= 1 and "flush: window of 3" in view.timeline.value
    view.drop_last.value = True
    assert "4 dropped" in view.timeline.value
