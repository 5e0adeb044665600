"""The course's setup without make (Windows, a minimal Linux): `python tools/course.py lab` or `... test`.

`make install` runs this file's `install` too, so the two ways cannot install different things. Standard library
only: it runs before anything is installed, with the Python that will build .venv (the one that runs it).
Commands: install (build .venv), lab (install, then JupyterLab on chapter 0), test (install, then every test),
nbval (install, then the notebook check alone).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
LOCK = "requirements.lock"
OVERRIDES = "tools/jupyterlab_overrides.json"        # JupyterLab settings for this course's .venv only
OVERRIDES_AT = "share/jupyter/lab/settings/overrides.d/training-loop-course.json"
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-cell-timeout=300", "--nbval-sanitize-with",
         "tests/nbval_sanitize.cfg", "-p", "no:randomly"]
LAB = ["--notebook-dir=notebooks", "--LabApp.default_url=/lab/tree/00_vocabulary.ipynb"]
VERDICTS = "tests/test_nbval_passes.py::test_committed_outputs_hold"     # the background notebook passes' verdicts
UNIT_PHASE = ["-n", "auto", "--dist", "loadfile", "--ignore=tests/browser", f"--deselect={VERDICTS}"]
BROWSER_PHASE = ["tests/browser", VERDICTS]


def supported() -> tuple[int, int]:
    """The supported minor versions of Python 3, [low, high), from pyproject.toml's requires-python."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    low, high = (part.strip().lstrip("<>=") for part in spec.split(","))
    return int(low.split(".")[1]), int(high.split(".")[1])


def venv_bin(name: str) -> Path:
    """A program in .venv: bin/NAME on Linux and macOS, Scripts/NAME.exe on Windows."""
    return VENV / ("Scripts" if os.name == "nt" else "bin") / (name + (".exe" if os.name == "nt" else ""))


def stamp() -> Path:
    """The file that says .venv is installed, naming the Python version that built it (the Makefile's too)."""
    return VENV / f".installed-py{sys.version_info[0]}.{sys.version_info[1]}"


def call(*args: object, env: dict[str, str] | None = None) -> int:
    """Run a command from the repository root (in `env`, else this environment); its exit code."""
    print(" ".join(map(str, args)), flush=True)
    return subprocess.call([str(a) for a in args], cwd=ROOT, env=env)


def run(*args: object) -> None:
    """Run a command from the repository root; stop with its exit code if it fails."""
    code = call(*args)
    if code:
        sys.exit(code)


def rebuild_if_other_python(version: str) -> None:
    """Remove .venv if a Python other than `version` ("3.13") built it: it is rebuilt, never half-reused."""
    if not VENV.exists():
        return
    python = venv_bin("python")
    probe = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True) if python.exists() else None
    built = probe.stdout.strip() if probe and probe.returncode == 0 else ""
    if built != version:
        print(f".venv was built with {'Python ' + built if built else 'a Python that no longer runs'}: "
              f"rebuilding it with Python {version}", flush=True)
        shutil.rmtree(VENV)


# Bytecode for every installed module, on every core (compileall's workers=0), as pip's own compilation would write it
COMPILE_SITE_PACKAGES = ("import compileall, sysconfig; paths = sysconfig.get_paths(); "
                         "[compileall.compile_dir(d, quiet=2, workers=0) for d in sorted({paths['purelib'], paths['platlib']})]")


def install() -> None:
    """Build .venv with this Python: the lock, then the course itself, then the JupyterLab settings."""
    low, high = supported()
    if not low <= sys.version_info[1] < high or sys.version_info[0] != 3:
        print(f"This is Python {sys.version_info[0]}.{sys.version_info[1]}; the course needs Python 3.{low} to "
              f"3.{high - 1}: run this file with one of those (on Windows: py -3.{high - 1} tools/course.py ...)")
        sys.exit(2)
    rebuild_if_other_python(f"{sys.version_info[0]}.{sys.version_info[1]}")
    run(sys.executable, "-m", "venv", VENV)
    python = venv_bin("python")
    run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip", "setuptools>=77")
    # pip would compile every module to bytecode as it unpacks it, on one core (34 of its 73 s here); the same
    # compilation on every core, once all is unpacked, took 25 s (a host that sets PYTHONDONTWRITEBYTECODE, as this
    # one does, would otherwise compile torch again on every import)
    run(python, "-m", "pip", "install", "--quiet", "--no-compile", "-r", LOCK)
    run(python, "-c", COMPILE_SITE_PACKAGES)
    os.environ["PYTHONWARNINGS"] = "ignore:Editable installation"
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "-e", ".")
    (VENV / OVERRIDES_AT).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / OVERRIDES, VENV / OVERRIDES_AT)
    stamp().touch()


def installed() -> None:
    """Install unless .venv was installed by this Python after the lock and pyproject.toml last changed."""
    newest = max((ROOT / name).stat().st_mtime for name in (LOCK, "pyproject.toml", OVERRIDES))
    if not stamp().exists() or stamp().stat().st_mtime < newest:
        install()


PYTEST = [venv_bin("python"), "-m", "pytest", "-p", "no:randomly"]


def main(argv: list[str]) -> None:
    """The command line: one of install, lab, test, nbval."""
    commands = ("install", "lab", "test", "nbval")
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python tools/course.py {{{','.join(commands)}}}")
        sys.exit(2)
    if argv[0] == "install":
        return install()
    installed()
    # The course's own bytecode, written now (a no-op when it is up to date): the course is installed editable, so
    # pip compiled none of it, and where PYTHONDONTWRITEBYTECODE is set every kernel would compile the modules it
    # imports again (about 0.5 s for all of them here)
    run(venv_bin("python"), "-m", "compileall", "-q", "course_utils")
    if argv[0] == "lab":
        run(venv_bin("jupyter"), "lab", *LAB, *(["--allow-root"] if hasattr(os, "getuid") and os.getuid() == 0 else []))
    elif argv[0] == "test":
        if os.name != "nt" and shutil.which("bash"):
            run("bash", "tools/ensure_chromium.sh")   # the browser test's Chromium (Debian's package)
        # Two phases, so that every core works all the time and what the browser times is not slowed by the
        # unit tests: the unit and widget tests on every core (pytest-xdist, a file per worker); then the
        # browser tests, with the two notebook passes in the background on the cores they leave idle.
        # Every pytest process (two xdist workers, the phases, the tests that collect or run pytest themselves)
        # rewrites the asserts of all 120 test files unless it may cache the result: where the host sets
        # PYTHONDONTWRITEBYTECODE (this one does), a collection of the whole suite took 14.9 s instead of 9.5 s.
        # The caches go to the clone's __pycache__ folders, which git ignores.
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        # matplotlib's font list of this .venv's own (the default, ~/.cache/matplotlib, is shared by every checkout of
        # the user's: one written from a checkout since deleted made every chapter's first figure warn on stderr,
        # "findfont: Font family ['cmb10'] not found", and nbval compare that warning as an output)
        cached.setdefault("MPLCONFIGDIR", str(VENV / "matplotlib"))
        # The doctor's published-loop corpus (about 220 s of one core, no timing in it) runs beside both phases at
        # the lowest priority, on the CPU they leave idle (tools/background_corpus.py); its verdict comes last.
        import background_corpus     # tools/ (standard library only; install and lab need only this file)
        corpus = background_corpus.start(python=str(venv_bin("python")), env=cached)
        try:
            unit = [*UNIT_PHASE, f"--ignore-glob={background_corpus.PATTERN}"]     # the corpus runs beside it
            codes = [call(*PYTEST, *unit, env=cached), call(*PYTEST, *BROWSER_PHASE, env=cached)]
        except BaseException:                        # Ctrl-C: its session is its own, so stop it here
            corpus.stop()
            raise
        corpus.close()                               # waits for its end
        print(corpus.verdict(), flush=True)
        sys.exit(max(*codes, 0 if corpus.code == 0 and corpus.count > 0 else 1))
    else:
        run(venv_bin("python"), "-m", "pytest", *NBVAL, "notebooks/")


if __name__ == "__main__":
    main(sys.argv[1:])
