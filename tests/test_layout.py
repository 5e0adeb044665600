"""The package's map holds (issue 26): no import cycle, no import against the layer order, a small top level.

Every import of every module counts, also one inside a function or under ``if TYPE_CHECKING:``: a reader
follows those too. Layers, lowest first: infra < engine < tools (production, doctor, exercises, the ``train``
shim) < chapters < widgets < the package's own ``__init__`` (what notebooks import). A module may import its
own layer or a lower one.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_utils"
LAYERS = {"infra": 0, "_moved": 0, "engine": 1, "production": 2, "doctor": 2, "exercises": 2, "train": 2,
          "atlas": 2, "explain": 2,
          "chapters": 3, "widgets": 4}
TOP = 5   # course_utils/__init__.py: the names notebooks import


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The course_utils modules `source` imports anywhere in it (relative imports resolved)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + is_package]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:   # `from pkg import module` imports pkg.module
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return {m for m in found if m == "course_utils" or m.startswith("course_utils.")}


def graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """{module: modules of course_utils it imports} for {module: (source, is_package)}."""
    known = set(sources)
    return {name: imports(name, text, is_package, known) for name, (text, is_package) in sources.items()}


def layer(module: str) -> int:
    parts = module.split(".")
    return TOP if len(parts) == 1 else LAYERS[parts[1]]


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
                  for a, targets in edges.items() for b in targets if layer(b) > layer(a))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module, or a module importing itself (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in edges.get(v, ()):
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def package_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(p, ROOT): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
            for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


EDGES = graph(package_sources())


def test_the_parser_sees_every_kind_of_import():
    edges = graph({
        "course_utils.engine.loop": ("import course_utils.infra.checks\n"
                                     "def f():\n    from course_utils.chapters import ch05_museum\n"
                                     "if False:\n    from ..widgets.base import View\n"
                                     "from . import session\n", False),
        "course_utils.engine.session": ("", False), "course_utils.chapters.ch05_museum": ("", False),
        "course_utils.widgets.base": ("", False), "course_utils.infra.checks": ("", False),
    })
    assert edges["course_utils.engine.loop"] == {"course_utils.infra.checks", "course_utils.chapters.ch05_museum",
                                                "course_utils.widgets.base", "course_utils.engine.session"}


def test_the_checks_fail_on_a_synthetic_cycle_and_upward_import():
    edges = graph({"course_utils.engine.loop": ("from course_utils.engine.session import TrainConfig", False),
                   "course_utils.engine.session": ("def f():\n    from course_utils.engine import loop", False),
                   "course_utils.engine.data": ("from course_utils.widgets.live_plot import COLOURS", False),
                   "course_utils.widgets.live_plot": ("", False)})
    assert cycles(edges) == [["course_utils.engine.loop", "course_utils.engine.session"]]
    assert upward(edges) == ["course_utils.engine.data (layer 1) imports course_utils.widgets.live_plot (layer 4)"]


def test_every_module_has_a_layer():
    assert {m for m in EDGES if m != "course_utils" and m.split(".")[1] not in LAYERS} == set()


def test_no_import_cycle_between_modules():
    assert cycles(EDGES) == []


def test_no_import_against_the_layer_order():
    assert upward(EDGES) == []


def test_the_top_level_holds_at_most_a_dozen_modules():
    top = [p.name for p in PACKAGE.iterdir()
           if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists())]
    assert len(top) <= 12, sorted(top)


def test_every_folder_with_code_is_a_package_and_every_data_file_ships():
    """find_packages() needs an __init__.py; package-data in pyproject.toml must match every data file."""
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()) == []
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["course_utils"]
    data = {p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")}
    shipped = {g: set(PACKAGE.glob(g)) for g in globs}   # setuptools' globs: * stops at a folder
    assert data and sorted(str(p.relative_to(PACKAGE)) for p in data - set().union(*shipped.values())) == []
    assert [g for g, found in shipped.items() if not found] == []   # no glob that matches nothing


def test_old_import_paths_are_the_new_modules():
    import course_utils.engine.loop
    import course_utils.loop
    from course_utils._moved import MOVED
    from course_utils.loop import train_epoch

    assert course_utils.loop is course_utils.engine.loop
    assert sys.modules["course_utils.loop"] is course_utils.engine.loop
    assert train_epoch is course_utils.engine.loop.train_epoch
    assert course_utils.engine.loop.__spec__.name == "course_utils.engine.loop"
    for old, new in MOVED.items():
        assert __import__(old, fromlist=["_"]) is __import__(new, fromlist=["_"]), old
        assert old.rsplit(".", 1)[1] not in {p.stem for p in PACKAGE.glob("*.py")}   # no file shadows an alias
    with pytest.raises(ModuleNotFoundError):
        import course_utils.no_such_module  # noqa: F401


def test_monkeypatching_an_old_name_patches_the_new(monkeypatch):
    import course_utils.engine.arithmetic as new
    import course_utils.arithmetic as old

    monkeypatch.setattr(old, "loss_weight", lambda *a, **k: "patched")
    assert new.loss_weight() == "patched"


@pytest.mark.parametrize("entry", ["course_utils.train", "course_utils.production"])
def test_the_trainer_command_line_runs_under_both_names(entry, tmp_path):
    done = subprocess.run([sys.executable, "-m", entry, "--out", str(tmp_path), "--batch-size", "-3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("python -m course_utils.train: error: --batch-size")
