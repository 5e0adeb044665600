"""Chapter 7: losses whose value is not an error (learned uncertainty weights, policy-gradient surrogates)."""
import math

import pytest

from course_utils.chapters.ch07_surrogate_losses import entropy_bonus_line, policy_gradient_lines, uncertainty_run


def test_the_learned_log_variance_ends_at_log_of_its_task_loss_and_the_tasks_still_fit():
    r = uncertainty_run(0)
    assert r["total"] < 0 and r["near best"] and r["s off log L"] < 0.05


def test_a_descent_step_on_the_policy_loss_favours_positive_advantages_and_the_loss_scales_with_returns():
    step, x1, x10 = policy_gradient_lines()
    assert "0.50 -> 0.62" in step and "0.50 -> 0.38" in step
    assert x1.endswith(f"{-math.log(0.25) * 16 / 6:.2f}") and x10.endswith(f"{-math.log(0.25) * 160 / 6:.2f}")


def test_minimising_minus_entropy_raises_the_entropy():
    line = entropy_bonus_line()
    start, end = (float(v) for v in line.split(": entropy ")[1].split(" (")[0].split(" -> "))
    assert start < end < math.log(4)


def test_the_generator_gradients_are_the_sigmoid_formulas():
    """Oracle: d/dz log(1 - sigmoid z) = -sigmoid z; d/dz -log sigmoid z = -(1 - sigmoid z)."""
    from course_utils.chapters.ch07_surrogate_losses import gan_saturation_lines
    for line, z in zip(gan_saturation_lines((-6.0, -2.0, 1.0))[2:], (-6.0, -2.0, 1.0)):
        d = 1 / (1 + math.exp(-z))
        cells = line.split()
        assert float(cells[1]) == pytest.approx(d, abs=5e-5)
        assert float(cells[3]) == pytest.approx(-d, abs=5e-5) and float(cells[4]) == pytest.approx(d - 1, abs=5e-5)
