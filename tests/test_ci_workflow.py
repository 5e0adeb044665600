"""The instructors' CI workflow parses, and every command it runs is one of the Makefile's own targets."""
import re
import tomllib
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "course.yml"


def make_targets() -> set[str]:
    """The targets the Makefile defines (lines `name: prerequisites`, not variable assignments)."""
    text = (ROOT / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([A-Za-z][\w-]*):(?!=)", text, flags=re.M)}


def test_workflow_parses_and_runs_only_make_targets():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]   # YAML 1.1 reads a bare `on` as True
    assert "schedule" in triggers and "push" in triggers
    targets = make_targets()
    commands = [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]
    assert commands, "the workflow runs nothing"
    for command in commands:
        words = command.split()
        assert words[0] == "make" and len(words) == 2 and words[1] in targets, (command, sorted(targets))
    assert {"make nbval", "make test"} <= set(commands)
    test_job = next(job for job in workflow["jobs"].values() if any(s.get("run") == "make test" for s in job["steps"]))
    assert "schedule" in test_job["if"]                                  # the long suite runs on the schedule
    for job in workflow["jobs"].values():
        python = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python"))
        assert python["with"]["cache"] == "pip"
        version = python["with"]["python-version"]
        if job is test_job:                                              # the whole suite: one Python, 3.11
            assert version == "3.11" and job["env"]["PYTHON"] == "python3.11"
        else:                                                            # nbval: every supported Python
            assert version == "${{ matrix.python-version }}"
            assert job["strategy"]["matrix"]["python-version"] == supported_versions()
            assert job["env"]["PYTHON"] == "python${{ matrix.python-version }}"   # make takes the one set up


def supported_versions() -> list[str]:
    """The minor versions pyproject.toml's requires-python admits, as the workflow writes them ("3.11")."""
    spec = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    return [f"3.{minor}" for minor in range(0, 30) if f"3.{minor}.99" in spec]


def test_make_targets_are_read_from_the_makefile():
    assert {"install", "lab", "test", "nbval", "nbval-perturbed", "notebooks"} <= make_targets()
    assert "PY" not in make_targets() and "NBVAL" not in make_targets()


def test_every_make_command_the_docs_name_exists():
    """README.md and docs/instructors.md name only targets the Makefile has (`make nbval`, `make notebooks NB=05`)."""
    targets = make_targets()
    for doc in (ROOT / "README.md", ROOT / "docs" / "instructors.md"):
        text = doc.read_text()   # commands: in backticks, or at the start of a line in a code block
        named = set(re.findall(r"`make ([a-z][\w-]*)", text)) | set(re.findall(r"^make ([a-z][\w-]*)", text, re.M))
        assert named, doc
        assert named <= targets, (doc.name, sorted(named - targets))
