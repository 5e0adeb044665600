"""The pinned set: one lock for every supported Python, environment.yml in step, torch pinned, ranges admit the pins."""
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REQUIRES_PYTHON = SpecifierSet(PROJECT["requires-python"])
SUPPORTED = [f"3.{m}" for m in range(0, 30) if f"3.{m}.99" in REQUIRES_PYTHON]
# Python releases the lock must serve (first and late patch releases: a pin may need a later patch release)
RELEASES = [f"{v}.{patch}" for v in SUPPORTED for patch in (0, 4, 5, 12)]
PLATFORMS = {"linux": ("linux", "posix", "Linux"), "darwin": ("darwin", "posix", "Darwin"),
             "win32": ("win32", "nt", "Windows")}


def lock_lines():
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith("#")]


def pins_for(python: str, platform: str = "linux") -> dict[str, Requirement]:
    """The lock's lines whose markers hold on that Python and OS, by package name; fails on a name pinned twice."""
    sys_platform, os_name, system = PLATFORMS[platform]
    env = {"python_version": python.rsplit(".", 1)[0], "python_full_version": python, "sys_platform": sys_platform,
           "os_name": os_name, "platform_system": system, "implementation_name": "cpython", "platform_machine": "x86_64"}
    chosen = {}
    for line in lock_lines():
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(env):
            name = requirement.name.lower().replace("_", "-")
            assert name not in chosen, (python, platform, line)
            chosen[name] = requirement
    return chosen


def pinned_version(requirement: Requirement) -> Version:
    (spec,) = requirement.specifier
    assert spec.operator == "==", requirement
    return Version(spec.version)


def test_supported_pythons_are_3_11_to_3_13():
    """3.14 is left out: it starts DataLoader workers with forkserver on Linux, which chapter 1 relies on not doing."""
    assert SUPPORTED == ["3.11", "3.12", "3.13"]


def test_environment_yml_lists_exactly_the_lock_and_the_same_pythons():
    text = (ROOT / "environment.yml").read_text()
    pip = [m.group(1).strip() for m in re.finditer(r"^ {6}- (\S+==.*)$", text, re.M)]
    assert pip == lock_lines()
    python = re.search(r"^  - python([<>=][^\s#]*)", text, re.M).group(1)
    assert SpecifierSet(python) == REQUIRES_PYTHON, python


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
@pytest.mark.parametrize("python", RELEASES)
def test_the_lock_pins_each_package_once_on_every_supported_python_and_os(python, platform):
    pins = pins_for(python, platform)
    assert str(pins["torch"].specifier) == "==2.13.0"
    wanted = PROJECT["dependencies"] + [d for group in PROJECT["optional-dependencies"].values() for d in group]
    for spec in map(Requirement, wanted):                # every direct need pinned, inside pyproject's range
        name = spec.name.lower()
        assert name in pins, (python, platform, name)
        assert spec.specifier.contains(pinned_version(pins[name]), prereleases=True), (spec, pins[name])


def test_every_pin_on_linux_is_exact_and_the_same_across_pythons_from_3_11_5():
    """Outputs stay the same because the packages do: only markers for older 3.11 patch releases differ."""
    reference = {n: pinned_version(r) for n, r in pins_for(f"{SUPPORTED[0]}.5").items()}
    for python in RELEASES:
        if Version(python) < Version(f"{SUPPORTED[0]}.5"):
            continue
        pins = {n: pinned_version(r) for n, r in pins_for(python).items()}
        assert {n: v for n, v in pins.items() if n in reference} == {n: reference[n] for n in pins if n in reference}
    for name in ["jupyterlab", "ipywidgets", "matplotlib", "nbval", "pytest", "numpy", "playwright", "hypothesis"]:
        assert name in reference


def test_installed_pins_admit_the_pythons_their_markers_give_them():
    """Each installed distribution's own Requires-Python admits every supported release where the lock picks it."""
    checked = 0
    for line in lock_lines():
        requirement = Requirement(line)
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            continue                                     # another OS's package, or another Python's pin
        if dist.version != str(pinned_version(requirement)):
            continue
        needs = SpecifierSet(dist.metadata.get("Requires-Python") or "")
        for python in RELEASES:
            if requirement.marker is None or requirement.marker.evaluate({"python_full_version": python,
                                                                           "python_version": python[:4]}):
                assert python in needs, (line, python, str(needs))
        checked += 1
    assert checked > 100


def test_jupyters_commands_start_without_building_a_grammar():
    """`jupyter nbconvert` and JupyterLab import jsonschema with jupyter-events' format extra; from jsonschema 4.25
    that extra brings rfc3987-syntax, which builds Lark grammars on import (about 1.1 s on this course's reference
    machine, before every notebook the budget counts). The lock keeps jsonschema below 4.25: checked by importing
    what nbconvert imports, in a fresh interpreter, and looking for the grammar library."""
    import subprocess
    import sys

    probe = "import sys, nbconvert.nbconvertapp, jupyter_events; print(sorted(m for m in sys.modules if 'lark' in m " \
            "or m.startswith('rfc3987_syntax')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
