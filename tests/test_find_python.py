"""The interpreter choice (tools/find_python.sh, used by the Makefile and .ci/run) on a PATH of fake interpreters."""
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
FIND = ROOT / "tools" / "find_python.sh"
SPEC = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
SUPPORTED = [f"3.{m}" for m in range(8, 20) if f"3.{m}.0" in SPEC]
TOO_OLD, TOO_NEW = f"3.{int(SUPPORTED[0][2:]) - 1}", f"3.{int(SUPPORTED[-1][2:]) + 1}"


def fake(folder: Path, name: str, version: str | None) -> Path:
    """A stub interpreter answering the version probe with `version`, or failing like a pyenv shim (None)."""
    stub = folder / name
    stub.write_text("#!/bin/sh\n" + (f"echo {version}\n" if version else "echo 'pyenv: not installed' >&2; exit 127\n"))
    stub.chmod(0o755)
    return stub


def choose(folder: Path, **env: str) -> subprocess.CompletedProcess:
    """tools/find_python.sh with PATH holding only `folder` (the script needs no other program)."""
    return subprocess.run(["/bin/sh", str(FIND)], env={"PATH": str(folder), **env}, capture_output=True, text=True)


def test_the_supported_versions_are_3_11_to_3_13():
    assert SUPPORTED == ["3.11", "3.12", "3.13"]


def test_newest_supported_wins_over_older_broken_and_unsupported(tmp_path):
    fake(tmp_path, f"python{TOO_NEW}", TOO_NEW)             # too new: skipped
    fake(tmp_path, f"python{SUPPORTED[-1]}", None)           # a shim that does not run: skipped
    for version in SUPPORTED[:-1]:
        fake(tmp_path, f"python{version}", version)
    fake(tmp_path, "python3", TOO_OLD)
    result = choose(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(tmp_path / f"python{SUPPORTED[-2]}"), SUPPORTED[-2]]
    assert f"python{SUPPORTED[-2]} (Python {SUPPORTED[-2]})" in result.stderr     # it says which one it chose


def test_plain_python3_is_the_fallback(tmp_path):
    fake(tmp_path, "python3", SUPPORTED[0])
    assert choose(tmp_path).stdout.split() == [str(tmp_path / "python3"), SUPPORTED[0]]


def test_PYTHON_overrides_the_newest(tmp_path):
    for version in SUPPORTED:
        fake(tmp_path, f"python{version}", version)
    result = choose(tmp_path, PYTHON=f"python{SUPPORTED[0]}")
    assert result.stdout.split() == [str(tmp_path / f"python{SUPPORTED[0]}"), SUPPORTED[0]]
    assert "as PYTHON asks" in result.stderr


@pytest.mark.parametrize("case", ["only unsupported", "unsupported PYTHON", "PYTHON missing"])
def test_no_supported_python_gives_one_line_and_exit_2(tmp_path, case):
    fake(tmp_path, "python3", TOO_OLD)
    fake(tmp_path, f"python{TOO_NEW}", TOO_NEW)
    fake(tmp_path, f"python{SUPPORTED[0]}", None)
    env = {"only unsupported": {}, "unsupported PYTHON": {"PYTHON": "python3"},
           "PYTHON missing": {"PYTHON": str(tmp_path / "nowhere")}}[case]
    result = choose(tmp_path, **env)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert f"{SUPPORTED[0]} to {SUPPORTED[-1]}" in lines[0]
    if case == "only unsupported":                        # the quickest ways to get one
        assert all(way in lines[0] for way in ("uv python install", "conda env create", "apt install"))


def make_copy(tmp_path: Path) -> Path:
    """The Makefile and what its install reads, in a scratch folder (so .venv there is a throwaway)."""
    repo = tmp_path / "repo"
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "tools/find_python.sh", "tools/course.py",
                 "tools/jupyterlab_overrides.json"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    return repo


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_without_a_supported_python_says_one_line_and_exits_2(tmp_path):
    repo, bin_ = make_copy(tmp_path), tmp_path / "bin"
    bin_.mkdir()
    fake(bin_, "python3", TOO_OLD)
    result = subprocess.run([shutil.which("make"), "-C", str(repo), "--no-print-directory", "install"],
                            env={"PATH": str(bin_)}, capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "No supported Python on PATH" in lines[0], lines
    assert not (repo / ".venv").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_rebuilds_a_venv_built_by_another_python(tmp_path):
    """A .venv from Python 3.11 meets a newer chosen Python: make starts it again from nothing."""
    import sys
    repo, bin_ = make_copy(tmp_path), tmp_path / "bin"
    bin_.mkdir()
    old, new = SUPPORTED[0], SUPPORTED[-1]
    fake(bin_, f"python{new}", new)
    old_venv = repo / ".venv" / "bin"
    old_venv.mkdir(parents=True)
    fake(old_venv, "python", old)
    (repo / ".venv" / "left-over").write_text("from the old .venv")
    (repo / ".venv" / f".installed-py{old}").touch()
    # make -n shows the choice and the command without running pip
    shown = subprocess.run([shutil.which("make"), "-n", "-C", str(repo), "--no-print-directory", "install"],
                           env={"PATH": str(bin_)}, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert f"{bin_ / f'python{new}'} tools/course.py install" in shown.stdout
    # tools/course.py's own check, run by a Python that is not the one the old .venv has
    probe = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'tools'); import course;"
                            "course.rebuild_if_other_python(sys.argv[1])", new],
                           cwd=repo, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert f".venv was built with Python {old}: rebuilding it with Python {new}" in probe.stdout
    assert not (repo / ".venv").exists()
