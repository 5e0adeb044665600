"""Chapter 1: a persistent worker keeps the dataset copy it started with; shared memory reaches it."""
from course_utils.chapters.ch01_worker_state import epochs_seen, worker_state_lines


def test_without_workers_and_with_fresh_workers_every_epoch_sees_its_set_epoch():
    assert epochs_seen(0, False, epochs=4) == [[0], [1], [2], [3]]
    assert epochs_seen(2, False, epochs=4) == [[0], [1], [2], [3]]


def test_persistent_workers_replay_the_first_epoch_unless_the_epoch_is_in_shared_memory():
    assert epochs_seen(2, True, epochs=4) == [[0], [0], [0], [0]]
    assert epochs_seen(2, True, shared=True, epochs=4) == [[0], [1], [2], [3]]


def test_the_same_under_spawn():
    assert epochs_seen(2, True, context="spawn") == [[0], [0], [0]]
    assert epochs_seen(2, True, shared=True, context="spawn") == [[0], [1], [2]]


def test_the_lines_show_what_each_loader_saw():
    lines = worker_state_lines(epochs=2)
    assert [line.rsplit(": ", 1)[1] for line in lines] == ["[0, 1]", "[0, 1]", "[0, 0]", "[0, 1]"]
