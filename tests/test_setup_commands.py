"""The README's commands without make (tools/course.py) and the Makefile install and run the same things."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import course  # noqa: E402  (tools/course.py: the no-make setup, standard library only)

MAKEFILE = (ROOT / "Makefile").read_text()


def recipe(target: str) -> tuple[list[str], list[str]]:
    """A Makefile rule's (prerequisites, recipe lines)."""
    match = re.search(rf"^{re.escape(target)}:(?!=)([^\n]*)\n((?:\t[^\n]*\n)*)", MAKEFILE, flags=re.M)
    assert match, target
    return match.group(1).split(), [line.strip() for line in match.group(2).splitlines()]


def test_the_readme_gives_the_two_commands_without_make():
    text = (ROOT / "README.md").read_text()
    named = re.findall(r"^python tools/course\.py (\w+)", text, flags=re.M)
    assert named == ["lab", "test"]
    for command in named:   # and each has its PowerShell form
        assert re.search(rf"py -3\.\d+ tools\\course\.py {command}\b", text), command


@pytest.mark.parametrize("target", ["lab", "test", "nbval"])
def test_make_targets_run_the_same_command(target):
    prerequisites, lines = recipe(target)
    assert prerequisites == ["$(STAMP)"]
    assert lines == [f"$(PY) tools/course.py {target}"]


def test_make_installs_with_the_same_command_and_the_same_inputs():
    prerequisites, lines = recipe("$(STAMP)")
    assert lines == ["$(BASE_PYTHON) tools/course.py install"]
    assert {course.LOCK, course.OVERRIDES, "pyproject.toml", "tools/course.py"} <= set(prerequisites)
    assert course.LOCK == "requirements.lock" and (ROOT / course.OVERRIDES).is_file()
    assert "$(VENV)/.installed-py$(PYVER)" in MAKEFILE and course.stamp().name.startswith(".installed-py")


def test_install_runs_the_lock_then_the_course_without_extras(monkeypatch, tmp_path):
    """What install runs, recorded: the lock (which holds every extra's packages), then `-e .` with no extras."""
    ran = []
    monkeypatch.setattr(course, "VENV", tmp_path / ".venv")
    monkeypatch.setattr(course, "run", lambda *args: ran.append([str(a) for a in args]))
    course.install()
    pip = [args[args.index("install") + 1:] for args in ran if "pip" in args]
    assert pip == [["--quiet", "--upgrade", "pip", "setuptools>=77"], ["--quiet", "--no-compile", "-r", "requirements.lock"],
                   ["--quiet", "--no-deps", "--no-build-isolation", "-e", "."]]
    lock = next(i for i, args in enumerate(ran) if "requirements.lock" in args)
    assert ran[lock + 1][1:] == ["-c", course.COMPILE_SITE_PACKAGES]          # then the bytecode, on every core
    assert ran[0][1:] == ["-m", "venv", str(tmp_path / ".venv")]
    copied = tmp_path / ".venv" / course.OVERRIDES_AT
    assert copied.read_text() == (ROOT / course.OVERRIDES).read_text()
    assert copied.parent.name == "overrides.d" and (tmp_path / ".venv" / course.stamp().name).exists()


def test_nbval_arguments_are_the_ones_ci_relies_on():
    assert {"--nbval", "--nbval-current-env", "tests/nbval_sanitize.cfg"} <= set(course.NBVAL)
    assert (ROOT / "tests" / "nbval_sanitize.cfg").is_file()


def test_a_wrong_command_is_one_line_and_exit_2():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "course.py"), "frob"], capture_output=True, text=True)
    assert result.returncode == 2 and len(result.stdout.splitlines()) == 1 and "lab" in result.stdout


def test_an_unsupported_python_is_refused_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(course, "VENV", tmp_path / ".venv")
    monkeypatch.setattr(course.sys, "version_info", (3, 10, 14))
    with pytest.raises(SystemExit) as stop:
        course.install()
    assert stop.value.code == 2
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "Python 3.10" in out[0] and "3.11 to 3.13" in out[0]
    assert not (tmp_path / ".venv").exists()


def test_the_bytecode_step_compiles_what_pip_left_uncompiled(tmp_path):
    """install's second step writes the bytecode pip was told not to: a module dropped into a fresh venv's
    site-packages has its .pyc afterwards, and a file that is not valid Python does not stop the step."""
    import sysconfig
    import venv
    venv.create(tmp_path / "v", with_pip=False)
    python = tmp_path / "v" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "pkg").mkdir(parents=True, exist_ok=True)
    (purelib / "pkg" / "good.py").write_text("x = 1\n")
    (purelib / "pkg" / "bad.py").write_text("def (:\n")                  # some wheels ship such files; pip skips them
    done = subprocess.run([str(python), "-c", course.COMPILE_SITE_PACKAGES], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tag = sysconfig.get_config_var("py_version_nodot")
    assert list((purelib / "pkg" / "__pycache__").glob(f"good.*{tag}*.pyc"))
    assert not list((purelib / "pkg" / "__pycache__").glob("bad.*.pyc"))
