"""Carried LSTM state with retain_graph and .data updates: each backward reaches every earlier batch; detached, none;
without .data, torch's version counter refuses the carried graph."""
from course_utils.chapters import ch03_slower_epochs as se


def test_each_backward_reaches_every_earlier_batch_when_carried_and_none_when_detached():
    carried, cut = se.run(False, epochs=3, batches=6), se.run(True, epochs=3, batches=6)
    # batch k of the whole run (1-based) reaches its k - 1 predecessors: epoch e sums k - 1 over its batches
    expected = [sum(k - 1 for k in range(6 * e + 1, 6 * e + 7)) for e in range(3)]
    assert carried["through"] == expected and cut["through"] == [0, 0, 0]
    lines = se.slower_lines(carried, cut)
    assert "15, 51, 87" in lines[0] and lines[2].endswith("True")


def test_without_data_the_version_counter_refuses_the_carried_graph():
    """The same loop, the update written p.add_ under no_grad: the second backward raises (what .data hides)."""
    refused = se.run(False, epochs=1, through_data=False)
    assert refused["at batch"] == 2 and "modified by an inplace operation" in refused["error"]
    assert refused["error"].startswith("RuntimeError: one of the variables needed for gradient computation")
    lines = se.slower_lines(se.run(False, epochs=2, batches=3), se.run(True, epochs=2, batches=3))
    assert lines[-1].endswith(refused["error"])
