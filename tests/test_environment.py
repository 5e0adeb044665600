"""The pinned set: the lock and environment.yml agree, torch is pinned, pyproject ranges admit the pins."""
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def lock_pins():
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith("#")]


def test_environment_yml_lists_exactly_the_lock():
    text = (ROOT / "environment.yml").read_text()
    pip = [m.group(1) for m in re.finditer(r"^\s+- ([A-Za-z0-9_.\-\[\]]+==\S+)\s*$", text, re.M)]
    assert sorted(pip) == sorted(lock_pins())
    assert "python=3.11" in text


def test_every_pin_is_exact_and_torch_is_2_13_0():
    pins = {Requirement(p).name.lower(): p for p in lock_pins()}
    assert all("==" in p for p in pins.values())
    assert pins["torch"] == "torch==2.13.0"
    for name in ["jupyterlab", "ipywidgets", "matplotlib", "nbval", "pytest", "numpy", "playwright", "hypothesis"]:
        assert name in pins


def test_pyproject_ranges_admit_the_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {Requirement(p).name.lower(): Version(p.split("==")[1]) for p in lock_pins()}
    wanted = project["dependencies"] + [d for group in project["optional-dependencies"].values() for d in group]
    for spec in map(Requirement, wanted):
        assert spec.name.lower() in pins, spec.name
        assert spec.specifier.contains(pins[spec.name.lower()], prereleases=True), (spec, pins[spec.name.lower()])
