"""pytest setup for the whole repository (tests/ and nbval over notebooks/).

Quiz progress goes to a throwaway file (kernels started by nbval inherit it, so a learner's own progress is
never read or written). `make test` runs pytest twice (tools/course.py): the unit and widget tests on every core
(pytest-xdist), then the browser tests and the notebook passes' verdicts. It checks the notebooks in two
background passes (tests/test_nbval_passes.py):
nbval as `make nbval` runs it ("pinned"), and under another CPU's numerics with every chaotic run nudged as well
("any-host": course_utils/infra/nudge.py), each in its own
pytest process over copies of the notebooks. They start as soon as collection is final, at niceness 19 (their
kernels too). A Jupyter kernel starts a session of its own, though, and where Linux schedules by session
(autogroup, on by default on most kernels) a niceness counts only inside its session: there the passes' kernels
share the CPU with the tests as equals (measured on a 2-core host: the browser tests take 358 s alone, 414-477 s
beside the passes). Lowering the kernels' sessions too was tried and undone: starved that far, chapter 1's
loader-rhythm cell (a timing demonstration) saw one more long wait than the committed output. The browser tests'
timing limits allow for the load (a control over the limit is measured twice). Their verdicts are read at the end. Run with
`--nbval`, the notebooks are checked in this session instead, cell by cell, and the pinned background pass is
left out; `--collect-only` starts nothing. The end of a run prints where the time went, per part: unit,
widget, nbval, perturbed nbval, browser.
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

sys.path.insert(0, str(Path(__file__).parent / "tools"))
import nbval_perturbed  # noqa: E402  (standard library only: the passes' runner)
from nbval_perturbed import PINNED  # noqa: E402  (nbval as `make nbval` runs it)

PARTS = ("unit", "widget", "nbval", "perturbed nbval", "browser")
PASSES = "tests/test_nbval_passes.py"
NICENESS = 19   # the passes' priority: the lowest, so every test comes first
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
    if path.endswith(".ipynb") or (path == PASSES and f"[{PINNED}]" in nodeid):
        return "nbval"
    if path == PASSES:
        return "perturbed nbval"
    return "widget" if _WIDGET_FILE.fullmatch(path) else "unit"


def is_verdict(item) -> bool:
    """A test that reads a background notebook pass's result."""
    return item.nodeid.startswith(PASSES) and "outputs_hold" in item.nodeid


def pytest_collection_modifyitems(session, config, items):
    """Browser tests after the rest, the background passes' verdicts last."""
    if any(".ipynb::" in item.nodeid for item in items):                  # --nbval: the cells are in the session
        kept = [item for item in items if not (is_verdict(item) and f"[{PINNED}]" in item.nodeid)]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
    order = {"browser": 2}
    items.sort(key=lambda item: 3 if is_verdict(item) else order.get(part_of(item.nodeid), 0))   # stable sort


def pytest_collection_finish(session):
    """Start the notebook passes whose verdicts survived collection (-k, --deselect, --nbval) in a background
    thread; each pass is a pytest process of its own. `--collect-only` runs nothing, so starts nothing."""
    configs = [item.callspec.params["config"] for item in session.items if is_verdict(item)]
    if not configs or session.config.option.collectonly:
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nbval-passes")
    session.config.stash[BACKGROUND] = pool.submit(nbval_perturbed.run_all, configs, nbval_perturbed.notebooks([]),
                                                   jobs=2, niceness=NICENESS)
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
        if part in ("nbval", "perturbed nbval") and background is not None and background.done() \
                and not background.exception():
            runs = {o.config: o.seconds for o in background.result()}
            mine = [f"{name} {seconds:.0f} s" for name, seconds in runs.items() if (name == PINNED) == (part == "nbval")]
            if mine:
                note = f"   ran in the background ({', '.join(mine)}), at the lowest priority"
        write(f"{part:<16} {_seconds[part]:7.1f} s   {_counts[part]:4d} tests{note}")
    write(f"{'total':<16} {time.perf_counter() - _started:7.1f} s   (wall clock, collection included)")
