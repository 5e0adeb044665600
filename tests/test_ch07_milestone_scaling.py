"""Chapter 7's milestone schedule moved to another batch size: torch's MultiStepLR against closed forms."""
import pytest

from course_utils.chapters import ch07_milestone_scaling as ms


@pytest.mark.parametrize("batch", [4, 8, 32])
def test_scaling_keeps_the_images_at_each_drop_and_the_lr_per_image(batch):
    ref, moved = ms.REFERENCE, ms.scaled(ms.REFERENCE, batch)
    assert [s * moved.batch for s in moved.steps] == [s * ref.batch for s in ref.steps]
    assert moved.max_iter * moved.batch == ref.max_iter * ref.batch
    assert moved.lr / moved.batch == pytest.approx(ref.lr / ref.batch)
    assert ms.shares(moved) == pytest.approx(ms.shares(ref))


@pytest.mark.parametrize("schedule", [ms.REFERENCE, ms.ONE_X, ms.scaled(ms.REFERENCE, 4)])
def test_torchs_scheduler_gives_the_closed_form_of_a_milestone_schedule(schedule):
    lrs = ms.lr_per_update(schedule)
    assert len(lrs) == schedule.max_iter // ms.UNIT
    for k, lr in enumerate(lrs):
        drops = sum(k * ms.UNIT >= s for s in schedule.steps)
        assert lr == pytest.approx(schedule.lr * 0.1 ** drops)


def test_keeping_the_milestones_puts_most_of_the_run_at_the_smallest_lr():
    kept = ms.Schedule(4, 0.005, 1_080_000, ms.REFERENCE.steps)
    assert ms.shares(kept)[-1] > 0.5 > ms.shares(ms.REFERENCE)[-1]
    lines = ms.milestone_lines(4)
    assert "True" in lines[2] and "False" not in "".join(lines)
