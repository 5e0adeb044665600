"""Chapter 1: a loop whose every epoch is next(iter(loader)) sees one batch per epoch."""


def test_one_batch_epochs_see_the_first_batch_only():
    from course_utils.chapters.ch01_dataset_tools import one_batch_epochs
    r = one_batch_epochs(n=100, batch_size=10, epochs=5)
    counts = list(r.values())
    assert counts[0] == 100 and counts[1] == 10 and 10 < counts[2] <= 50 and counts[3] == 100
