"""Chapter 3: what backward(create_graph=True) keeps alive, counted with weak references."""
import pytest

from course_utils.chapters.ch03_graph_cycles import WAYS, graph_cycle_lines, throwaway_copies


@pytest.mark.parametrize("tasks", [2, 5])
def test_backward_with_create_graph_leaks_every_dropped_copy_and_the_other_ways_none(tasks):
    leak, grad, cleared = (throwaway_copies(how, tasks) for how in WAYS)
    assert leak["alive after the loop"] == leak["alive after gc.collect()"] == tasks      # one per copy, for good
    assert leak["bytes held"] == tasks * (50 * 50 + 50) * 4
    for r in (grad, cleared):
        assert r["alive after the loop"] == r["alive after gc.collect()"] == r["bytes held"] == 0


def test_an_unknown_way_is_refused_by_name():
    with pytest.raises(ValueError, match="how must be one of"):
        throwaway_copies("backward()")


def test_the_lines_count_each_way():
    lines = graph_cycle_lines(3)
    assert len(lines) == 3 and lines[0].startswith("backward(create_graph=True): copies alive after the loop 3 of 3")
    assert lines[1].endswith("after gc.collect() 0 (0 bytes of parameters held)")
