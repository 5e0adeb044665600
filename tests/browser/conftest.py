"""The browser tests print how long each took (setup, server start included) and the machine's load beside it."""
import os
from collections import defaultdict

_seconds: dict[str, float] = defaultdict(float)
_load: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if "tests/browser/" in report.nodeid:
        _seconds[report.nodeid] += report.duration
        if report.when == "call":
            _load[report.nodeid] = os.getloadavg()[0]


def pytest_terminal_summary(terminalreporter):
    if not _seconds:
        return
    terminalreporter.section("browser tests: duration each (load average, 1 min, at the end)")
    for nodeid, seconds in _seconds.items():
        terminalreporter.write_line(f"{seconds:7.1f} s  (load {_load.get(nodeid, float('nan')):.1f})  {nodeid}")
    terminalreporter.write_line(f"{sum(_seconds.values()):7.1f} s  in all")
