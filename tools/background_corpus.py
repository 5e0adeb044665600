"""The loop doctor's published-loop corpus (tests/test_doctor_published*.py) run beside `make test`'s two phases:
about 220 s of one core that has no timing in it, on the CPU the phases leave idle (the unit phase's last files on
one worker while the other has finished, the browser tests waiting on the page).

One pytest process (two xdist workers, a file each at a time) in a session of its own, at niceness 19, and where
Linux schedules by session (autogroup) its group at niceness 19 too: a niceness alone counts only inside a session,
so without the group's the corpus would take its share from the tests' and the browser's kernels. tools/course.py
starts it before the unit phase and reads its verdict after the browser phase; `make test` fails if it fails.
Standard library only (tools/course.py runs before anything is installed).
"""
from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATTERN = "tests/test_doctor_published*.py"     # the corpus's test files (make test's unit phase leaves them out)
NICENESS = 19
TIMEOUT_S = 1800


@functools.cache
def files() -> tuple[str, ...]:
    """The corpus's test files, relative to the repository."""
    return tuple(sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(PATTERN)))


def command(paths: tuple[str, ...] | None = None, python: str | None = None) -> list[str]:
    """pytest over the corpus's files (or `paths`), on two workers, a file per worker at a time."""
    return [python or sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-rfEX",
            "-n", "2", "--dist", "loadfile", *(files() if paths is None else paths)]


def _lower(niceness: int) -> None:
    """What the child runs before pytest starts (its session already its own): its niceness and its group's."""
    os.nice(niceness)
    try:
        Path("/proc/self/autogroup").write_text(str(niceness))
    except OSError:           # no autogroup (a kernel without it, another OS): the niceness alone then counts
        pass


def _signal_group(process: subprocess.Popen, number: int) -> None:
    """Send `number` to the run's process group (pytest and its xdist workers); its leader alone where there are
    no groups."""
    try:
        os.killpg(process.pid, number)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.send_signal(number)


@dataclass
class Run:
    """The corpus's background run: its process, its log, and once it has ended its exit code and seconds."""

    process: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.perf_counter)
    seconds: float | None = None
    code: int | None = None
    _text: str | None = None

    def wait(self, timeout: float = TIMEOUT_S) -> int:
        if self.code is None:
            try:
                self.code = self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.code = self.process.wait()
            self.seconds = time.perf_counter() - self.started
        return self.code

    def text(self) -> str:
        """The run's log (pytest's output), also after `close`."""
        if self._text is not None:
            return self._text
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def close(self) -> None:
        """Wait for the end; keep the log's text here and remove its file."""
        self.wait()
        self._text = self.text()
        self.log.unlink(missing_ok=True)

    def stop(self) -> None:
        """End a run still going (its session is its own, so a Ctrl-C in the terminal does not reach it): its
        whole process group, the xdist workers included."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            self.wait(timeout=30)
        self.close()

    def verdict(self) -> str:
        """What `make test` prints at its end: pytest's summary line, and where it failed its short summary."""
        lines = self.text().strip().splitlines()
        ends = [line for line in lines if re.search(r"\d+ (passed|failed|error).* in [\d.]+s", line)]
        head = f"doctor corpus    {ends[-1].strip('= ') if ends else 'no summary (exit code ' + str(self.code) + ')'}"
        head += f"   ran beside both phases ({self.seconds:.0f} s), at the lowest priority"
        if self.code == 0:
            return head
        failures = [line for line in lines if line.startswith(("FAILED", "ERROR", "XPASS"))]
        return "\n".join([head, *(failures or lines[-40:])])

    @property
    def count(self) -> int:
        """Tests run (passed, xfailed, failed, ...) by pytest's last summary line; 0 before the end."""
        ends = re.findall(r"^=*\s*(\d+ \w+.* in [\d.]+s.*?)\s*=*$", self.text(), flags=re.M)
        return sum(int(n) for n in re.findall(r"(\d+) (?:passed|failed|xfailed|xpassed|error)", ends[-1])) if ends else 0


def start(paths: tuple[str, ...] | None = None, niceness: int = NICENESS, python: str | None = None,
          env: dict[str, str] | None = None) -> Run:
    """Start the corpus's run with `python` (this one by default) in `env` (this environment); or pytest over
    `paths` at `niceness` (the tests of this mechanism)."""
    handle, name = tempfile.mkstemp(prefix="doctor-corpus-", suffix=".log")
    os.close(handle)
    log = Path(name)
    env = {k: v for k, v in (os.environ if env is None else env).items()
           if k not in ("PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST")}
    with log.open("w") as out:
        process = subprocess.Popen(command(paths, python), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   preexec_fn=functools.partial(_lower, niceness) if hasattr(os, "nice") else None)
    return Run(process, log)
