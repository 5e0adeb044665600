"""pytest setup for the whole repository (tests/ and nbval over notebooks/).

Quiz progress goes to a throwaway file (kernels started by nbval inherit it, so a learner's own progress is
never read or written). The browser tests run last, alone, because they time what a learner waits for. The
perturbed nbval pass (tests/test_nbval_perturbed.py) starts in the background as soon as the tests are
collected: its two kernels share the machine with the unit, widget and nbval tests, and its result is read
just before the browser tests begin. The end of a run prints where the time went, per part: unit, widget,
nbval, perturbed nbval, browser.
"""
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

_PROGRESS_DIR = tempfile.mkdtemp(prefix="course-progress-")
os.environ["COURSE_PROGRESS"] = os.path.join(_PROGRESS_DIR, "progress.json")
os.environ.setdefault("MPLBACKEND", "Agg")

PARTS = ("unit", "widget", "nbval", "perturbed nbval", "browser")
PERTURBED = "tests/test_nbval_perturbed.py"
BACKGROUND = pytest.StashKey[Future]()
_WIDGET_FILE = re.compile(r"tests/test_(widget\w*|\w*_view|view_fuzz)\.py")
_seconds: dict[str, float] = defaultdict(float)
_counts: dict[str, int] = defaultdict(int)
_started = time.perf_counter()


def part_of(nodeid: str) -> str:
    """Which part of the suite a test belongs to, from its node id (file names say it)."""
    path = nodeid.split("::")[0]
    if path.startswith("tests/browser/"):
        return "browser"
    if path.endswith(".ipynb"):
        return "nbval"
    if path == PERTURBED:
        return "perturbed nbval"
    return "widget" if _WIDGET_FILE.fullmatch(path) else "unit"


def pytest_collection_modifyitems(session, config, items):
    """Browser tests last; the perturbed pass's verdicts just before them, its runs started now."""
    order = {"browser": 2, "perturbed nbval": 1}
    items.sort(key=lambda item: order.get(part_of(item.nodeid), 0))   # stable: the rest keeps its order
    if any(part_of(item.nodeid) == "perturbed nbval" and "outputs_hold" in item.nodeid for item in items):
        sys.path.insert(0, str(Path(__file__).parent / "tools"))
        import nbval_perturbed

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="perturbed-nbval")
        config.stash[BACKGROUND] = pool.submit(nbval_perturbed.run_all, nbval_perturbed.SUITE,
                                               nbval_perturbed.notebooks([]), 2)
        pool.shutdown(wait=False)


def pytest_runtest_logreport(report):
    part = part_of(report.nodeid)
    _seconds[part] += report.duration
    if report.when == "call":
        _counts[part] += 1


def pytest_terminal_summary(terminalreporter, config):
    if not _counts:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per part")
    background = config.stash.get(BACKGROUND, None)
    for part in PARTS:
        if not _counts[part]:
            continue
        note = ""
        if part == "perturbed nbval" and background is not None and background.done() and not background.exception():
            runs = ", ".join(f"{o.config} {o.seconds:.0f} s" for o in background.result())
            note = f"   waited for; ran in the background ({runs}) beside the parts above"
        write(f"{part:<16} {_seconds[part]:7.1f} s   {_counts[part]:4d} tests{note}")
    write(f"{'total':<16} {time.perf_counter() - _started:7.1f} s   (wall clock, collection included)")
