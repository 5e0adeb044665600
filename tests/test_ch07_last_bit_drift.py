"""Chapter 7: a last-bit difference stays small in a stable run and grows in a more chaotic one."""
from course_utils.chapters.ch07_last_bit_drift import drift_counts, drift_run


def test_the_nudge_is_one_unit_in_the_last_place_and_grows_only_at_the_higher_rate():
    calm, wild = drift_run(0, 0.05), drift_run(0, 0.2)
    for run in (calm, wild):
        assert run["trained"]
        assert 0 < run["weight difference"][1] < 1e-6            # the first update keeps the nudge's size
    assert calm["weight difference"][100] < 1e-4 and wild["weight difference"][800] > 1e-2


def test_the_counts_cover_every_seed():
    d = drift_counts(0.2, seeds=range(2))
    assert d["seeds"] == 2 and d["same printed loss"] == {1: 2, 10: 2, 100: 2} and d["weights apart by > 1e-2"][800] == 2
