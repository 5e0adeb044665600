"""pytest setup for the whole repository (tests/ and nbval over notebooks/).

Quiz progress goes to a throwaway file (kernels started by nbval inherit it, so a learner's own progress is
never read or written), and the end of a run prints where the time went, per part: unit, widget, nbval,
perturbed nbval, browser."""
import os
import re
import tempfile
import time
from collections import defaultdict

_PROGRESS_DIR = tempfile.mkdtemp(prefix="course-progress-")
os.environ["COURSE_PROGRESS"] = os.path.join(_PROGRESS_DIR, "progress.json")
os.environ.setdefault("MPLBACKEND", "Agg")

PARTS = ("unit", "widget", "nbval", "perturbed nbval", "browser")
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
    if path == "tests/test_nbval_perturbed.py":
        return "perturbed nbval"
    return "widget" if _WIDGET_FILE.fullmatch(path) else "unit"


def pytest_runtest_logreport(report):
    part = part_of(report.nodeid)
    _seconds[part] += report.duration
    if report.when == "call":
        _counts[part] += 1


def pytest_terminal_summary(terminalreporter):
    if not _counts:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per part")
    for part in PARTS:
        if _counts[part]:
            write(f"{part:<16} {_seconds[part]:7.1f} s   {_counts[part]:4d} tests")
    write(f"{'total':<16} {time.perf_counter() - _started:7.1f} s   (wall clock, collection included)")
