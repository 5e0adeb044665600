"""The chapter-0 calculator view, headless: inputs change numbers and timeline; bad input shows a message."""
from course_utils.arithmetic import training_arithmetic
from course_utils.widgets.calculator import STAGES, calculator


def test_inputs_update_numbers_and_timeline():
    view = calculator(dataset_size=10_000, batch_size=32, epochs=3, accum_steps=4)
    assert "79" in view.numbers.value and bytes(view.timeline.value).startswith(b"\x89PNG")
    before_png, before_text = view.timeline.value, view.text()
    view.batch_size.value = 64
    assert view.result == training_arithmetic(10_000, 64, 3, 4)
    assert view.timeline.value != before_png and view.text() != before_text
    assert f">{view.result.iters_per_epoch}<" in view.numbers.value
    for control, value in [(view.dataset_size, 999), (view.epochs, 5), (view.accum_steps, 3),
                           (view.world_size, 4), (view.drop_last, True)]:
        png = view.timeline.value
        control.value = value
        assert view.error is None and view.timeline.value != png, control.description
    assert view.result == training_arithmetic(999, 64, 5, 3, drop_last=True, world_size=4)


def test_invalid_input_shows_a_message_not_a_traceback():
    view = calculator()
    view.batch_size.value = 0
    assert "batch_size" in view.message.value and view.numbers.value == "" and "invalid input" in view.text()
    view.batch_size.value = 32
    assert view.message.value == "" and view.error is None
    view.dataset_size.value = 10**9
    assert "at most" in view.message.value


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


def test_no_batch_at_all_is_explained():
    view = calculator(dataset_size=5, batch_size=10, drop_last=True)
    assert view.error is None and "no complete batch" in view.step_view.value and view.micro_step.disabled
