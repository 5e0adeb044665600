"""The per-case tests of the published-loop corpus, made for one part of its loops (every PARTS-th loop, in LOOPS
order). `make test` gives pytest-xdist a test file per worker; the corpus, run bare and watched, is the suite's
largest block of work, so it is spread over PARTS files (tests/test_doctor_published*.py), each a part."""
from __future__ import annotations

import functools

import pytest

from course_utils.infra.notebook import one_thread
from tests.doctor_published import KNOWN_MISSES, LOOPS, cases, run_case, scorecard, state_bytes

PARTS = 4


def part_tests(part: int) -> dict[str, object]:
    """The tests of part `part` (0 .. PARTS - 1), by name, for a test module's globals."""
    loops = set(LOOPS[part::PARTS])
    mine = [c for c in cases() if c.loop in loops]
    by_name = {c.name: c for c in mine}

    @pytest.fixture(autouse=True, scope="module")
    def on_one_thread():
        """One intra-op thread: on a shared 2-core machine, spinning threads only burn CPU (same result either way)."""
        with one_thread():
            yield

    @functools.cache
    def both(name: str):
        bare, _ = run_case(by_name[name], doctor=False)
        watched, report = run_case(by_name[name], doctor=True)
        return report, state_bytes(bare), state_bytes(watched)

    def known(name: str):
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[name]))

    @pytest.mark.parametrize("name", [known(c.name) if c.name in KNOWN_MISSES else c.name for c in mine])
    def test_doctor_names_exactly_the_bugs_of_each_published_case(name):
        report, _, _ = both(name)
        assert set(report.names) == by_name[name].expected, str(report)
        assert not any(note.startswith("the doctor stopped") for note in report.notes), str(report)

    @pytest.mark.parametrize("name", [c.name for c in mine])
    def test_weights_and_optimizer_state_bitwise_equal_with_and_without_the_doctor(name):
        _, bare, watched = both(name)
        assert bare and bare == watched

    def test_precision_and_recall_meet_the_issue():
        """On this part's cases (so on the whole corpus, part by part): no false finding, recall at least 0.98,
        nothing named on a correct case; the known misses have their own strict tests."""
        supported = [c for c in mine if c.name not in KNOWN_MISSES]
        reports = {c.name: both(c.name)[0] for c in supported}
        rows = scorecard(reports, supported)
        tp, fp, fn = (sum(r[i] for r in rows) for i in (1, 2, 3))
        assert fp == 0 and tp / (tp + fn) >= 0.98, rows
        assert not any(reports[c.name].names for c in supported if not c.expected)

    return {f.__name__: f for f in (on_one_thread, test_doctor_names_exactly_the_bugs_of_each_published_case,
                                    test_weights_and_optimizer_state_bitwise_equal_with_and_without_the_doctor,
                                    test_precision_and_recall_meet_the_issue)}
