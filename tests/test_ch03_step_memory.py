"""Chapter 3: gradients appear at the first backward, Adam's moments at the first step, and zero_grad frees."""
from course_utils.chapters.ch03_step_memory import step_memory, step_memory_lines


def test_memory_steps_up_in_iteration_one_and_stays_level():
    weights, points = step_memory(width=64)
    table = {when: (grads, state) for when, grads, state in points}
    assert table["built"] == (0, 0) and table["iteration 1, after backward()"] == (weights, 0)
    grads, state = table["iteration 1, after step()"]
    assert grads == weights and 2 * weights <= state <= 2 * weights + 64        # two moments, and 4 step counters
    assert table["iteration 2, after zero_grad()"] == (0, state)
    assert table["iteration 2, after step()"] == table["iteration 1, after step()"]
    assert len(step_memory_lines(width=64)) == 1 + len(points)
