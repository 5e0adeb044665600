"""Re-run the notebooks under perturbed numeric kernels and compare with the committed outputs as nbval does.

A host with another CPU computes float32 on another code path: ATen's AVX-512, AVX2 or generic kernels, MKL's
per-CPU branches, oneDNN's ISA, NumPy's SIMD dispatch, glibc's libm variants (with or without FMA). The
chapters pin ATen, MKL and oneDNN to their AVX2 paths (``course_utils.infra.notebook.NUMERIC_PIN``); each
configuration below moves what a different host would move:

- ``generic-path``: the pin overridden by the generic path (ATen's generic kernels, MKL's compatible branch,
  oneDNN at SSE4.1: ``GENERIC_PATH``), what a CPU without AVX2 computes on, or a host where the pin did not take.
  Everything nbval compares must be a conclusion robust to that.
- ``pinned-other-libs``: the pin in force, and what it does not cover lowered: NumPy's dispatch to its
  baseline, glibc's libm without AVX2/FMA/AVX-512 variants.
- ``other-host``: both at once.
- ``nudged``: the pin in force, and every random initialisation and generated point moved by a relative 1e-6
  (``course_utils/infra/nudge.py``). A host can only lower itself to code paths it has; the nudge moves every
  chaotic trajectory on any host, as another CPU's last bits would, so a compared output that holds under it is a
  conclusion, not one machine's digits.
- ``any-host``: ``other-host`` and the nudge at once, the pass `make test` runs (``SUITE``) beside its plain one.
  (Run apart, as a third pass, the passes outlasted the unit tests and ran beside the timed browser tests, one of
  which then failed; together they cost one pass, and a cell that differs is sorted out with the configurations
  above.)

    python tools/nbval_perturbed.py [NN ...] [--config NAME ...] [--jobs N]

prints, per configuration, the cells whose outputs differ (exit code 1 if any), and the seconds it took.
Each configuration runs on its own copy of the notebooks (chapter 7 writes runs next to its notebook).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from course_utils.infra.notebook import GENERIC_PATH  # noqa: E402 (the course, from this checkout)
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"

_KERNELS = dict(GENERIC_PATH)          # the path the pin does not take (a CPU without AVX2 takes it)
_OTHER_LIBS = {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
               "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F"}
NUDGE = {"COURSE_NUDGE": "1e-6"}       # course_utils/infra/nudge.py: every random init and generated point moved
CONFIGS: dict[str, dict[str, str]] = {
    "generic-path": _KERNELS,
    "pinned-other-libs": _OTHER_LIBS,
    "other-host": {**_KERNELS, **_OTHER_LIBS},
    "nudged": NUDGE,
    "any-host": {**_KERNELS, **_OTHER_LIBS, **NUDGE},
}
# `make test` runs one of them beside its plain nbval pass (the pin as is): everything another host could move moved
# at once, and the nudge, which moves every chaotic run on any host, whatever its CPU (issue 38: the pin did not
# give the same digits on an AMD EPYC). The other configurations tell which of them moved a cell that differs.
SUITE = ["any-host"]
PINNED = "pinned"           # no perturbation: the pin alone, as `make nbval` runs the notebooks
PIN_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES",
                 "GLIBC_TUNABLES", "COURSE_NUDGE")
TIMEOUT_S = 900
# pytest, lowered by argv[1] first (a niceness a process sets for itself is inherited by every kernel it starts)
_NICE_PYTEST = ("import os, sys, pytest\n"
                "if hasattr(os, 'nice') and int(sys.argv[1]) > 0: os.nice(int(sys.argv[1]))\n"
                "sys.exit(pytest.main(sys.argv[2:]))")


@dataclass
class Outcome:
    """One configuration's run: the cells whose outputs differ, nbval's summary line, the seconds taken."""

    config: str
    failed: list[str]
    summary: str
    seconds: float
    returncode: int
    log: str

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.failed

    def differences(self, width: int = 240) -> str:
        """Each failing cell's name and nbval's diff of it (`+` the committed output, `-` this run's), a long line
        shown around its first difference from the line of the other sign: a cell's input and a wide HTML output
        otherwise bury the lines that differ."""
        plain = re.sub(r"\x1b\[[0-9;]*m", "", self.log)
        sections = re.split(r"^_{3,} (\S+::Cell \d+) _{3,}$", plain, flags=re.M)
        kept = []
        for name, body in zip(sections[1::2], sections[2::2]):
            lines = [ln for ln in body.split("\n=====", 1)[0].splitlines()        # up to the next pytest banner
                     if re.match(r"\s*(mismatch |Cell \d+:|[-+] |E\s|\w*Error\b)", ln)]
            kept += [f"{name}:", *(_around_difference(ln, lines, width) for ln in lines)]
        return "\n".join(kept)


def _around_difference(line: str, lines: list[str], width: int) -> str:
    if len(line) <= width:
        return line
    text = line.lstrip()
    others = [o.lstrip() for o in lines if o.lstrip()[:1] in ("+", "-") and o.lstrip()[:1] != text[:1]]
    at = min((next((i for i, (a, b) in enumerate(zip(text[2:], o[2:])) if a != b), len(o) - 2) for o in others),
             default=0)
    start = max(0, at - width // 2)
    return f"  {text[:2]}[from column {start}] {text[2 + start:2 + start + width]} ..."


def notebooks(selected: list[str]) -> list[Path]:
    """The committed notebooks, or those whose names start with one of `selected` (e.g. "05")."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if selected:
        paths = [p for p in paths if any(p.name.startswith(s) for s in selected)]
        if not paths:
            raise SystemExit(f"no notebook matches {selected}")
    return paths


def environment(config: str | None, progress: Path, **extra: str) -> dict[str, str]:
    """This process's environment without inherited pin variables, plus the configuration's and `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in PIN_VARIABLES}
    env.update(CONFIGS[config] if config not in (None, PINNED) else {})
    env.update(COURSE_PROGRESS=str(progress), MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def nbval_arguments() -> list[str]:
    """The instructor command's nbval arguments (tools/course.py, `make nbval`), with the sanitize file's full path."""
    from course import NBVAL                         # tools/ is on sys.path: this file's own folder
    return [str(SANITIZE) if arg == "tests/nbval_sanitize.cfg" else arg for arg in NBVAL]


# A kernel that died before it answered its first request ran none of the notebook's cells: nothing was compared
# (seen once in a fresh-clone CI, a notebook's every cell an error while two passes and the tests started kernels)
KERNEL_NOT_STARTED = "Kernel died before replying to kernel_info"


def nbval(paths: list[Path], config: str | None = None, label: str = "", niceness: int = 0, **extra: str) -> Outcome:
    """Run nbval on copies of `paths` in a fresh folder under a configuration (None: the pin alone).

    `niceness` > 0 lowers the priority of the pass and its kernels (where the OS has `nice`): it then runs on
    the CPU time others leave idle. `extra` variables go into the kernels' environment too (a mutation test
    puts a mutant on PYTHONPATH). A notebook whose kernel died before it started is run once more, alone, and says
    so in the log; a cell that differs is never run again.
    """
    first = _nbval_once(paths, config, label, niceness, **extra)
    unstarted = sorted(set(re.findall(r"^ERROR \S*?(\d\d_\w+\.ipynb)::Cell", first.log, flags=re.M)))
    if KERNEL_NOT_STARTED not in first.log or not unstarted or first.failed:
        return first                 # nothing to run again, or a cell differs: as it is
    # (the notebooks with errors run again: an error of another kind comes back in the second run, and counts)
    again = _nbval_once([p for p in paths if p.name in unstarted], config, label, niceness, **extra)
    said = f"{', '.join(unstarted)}: the kernel did not start; run once more, alone: {again.summary}"
    return Outcome(first.config, again.failed, f"{first.summary} ({said})", first.seconds + again.seconds,
                   again.returncode, f"{first.log}\n[{said}]\n{again.log}")


def _nbval_once(paths: list[Path], config: str | None, label: str, niceness: int, **extra: str) -> Outcome:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nbval-") as tmp:
        folder = Path(tmp) / "notebooks"
        folder.mkdir()
        for path in paths:
            shutil.copy(path, folder / path.name)
        command = [sys.executable, "-c", _NICE_PYTEST, str(niceness), *nbval_arguments(), "-p", "no:cacheprovider",
                   "-q", "--no-header", "-rfE", f"--rootdir={tmp}", "-c", os.devnull,
                   "-o", "truncation_limit_lines=0", "-o", "truncation_limit_chars=0",   # a differing cell in full
                   str(folder)]
        done = subprocess.run(command, cwd=tmp, env=environment(config, Path(tmp) / "progress.json", **extra),
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    log = done.stdout + done.stderr
    failed = re.findall(r"^FAILED \S*?(\d\d_\w+\.ipynb::Cell \d+)", log, flags=re.M)
    ends = re.findall(r"^=*\s*(\d+ (?:passed|failed|error).* in [\d.]+s.*?)\s*=*$", log, flags=re.M)
    summary = ends[-1] if ends else (log.strip().splitlines()[-1] if log.strip() else "no output")
    return Outcome(label or config or PINNED, failed, summary, time.perf_counter() - start, done.returncode, log)


def run_all(configs: list[str | None], paths: list[Path], jobs: int = 2, niceness: int = 0) -> list[Outcome]:
    """Run every configuration (PINNED or None: the pin alone, as `make nbval`), `jobs` at a time (each kernel
    uses one thread: setup_notebook fixes it), at `niceness`."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda c: nbval(paths, c, niceness=niceness), configs))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="chapter numbers (e.g. 05 06); all by default")
    parser.add_argument("--config", action="append", choices=sorted(CONFIGS), help="one configuration (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="configurations run at once (default 2)")
    parser.add_argument("--verbose", action="store_true", help="print nbval's whole log for failing configurations")
    args = parser.parse_args(argv)
    outcomes = run_all(args.config or list(CONFIGS), notebooks(args.notebooks), args.jobs)
    for o in outcomes:
        state = "same outputs" if o.passed else f"{len(o.failed)} cell(s) differ"
        print(f"{o.config:<18} {state:<18} {o.seconds:6.1f} s   {o.summary}")
        if o.failed:
            print(o.differences())
        if args.verbose and not o.passed:
            print(o.log)
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
