"""Old import paths keep working: ``import course_utils.loop`` is ``course_utils.engine.loop`` (issue 26).

Until the package was split into ``infra/``, ``engine/``, ``tools`` and ``chapters/`` (``README.md``), every
module sat at the top level, and learners' notebooks and scripts name them there. ``MOVED`` maps each old
name to its new one; a finder on ``sys.meta_path`` answers only those names, and answers them with the new
module itself (``sys.modules`` holds one object under both names), so patching either name patches both.
Any other name is left to Python's own finders, and an unknown one still raises ``ModuleNotFoundError``.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

MOVED = {f"course_utils.{old}": f"course_utils.{new}" for old, new in {
    # infra: storage, argument checks, notebook setup, number boxes, the quiz engine
    "storage": "infra.storage", "checks": "infra.checks", "notebook": "infra.notebook",
    "numbers": "infra.numbers", "quiz": "infra.quiz",
    # engine: what every chapter drives
    "arithmetic": "engine.arithmetic", "data": "engine.data", "models": "engine.models",
    "schedules": "engine.schedules", "loop": "engine.loop", "session": "engine.session",
    "memory": "engine.memory", "bugs": "engine.bugs", "doctor_exhibits": "engine.bug_demos",
    # chapters: one module per chapter or concept
    "pipeline": "chapters.ch01_pipeline", "sampling": "chapters.ch02_sampling",
    "anatomy": "chapters.ch03_anatomy", "evaluation": "chapters.ch04_evaluation",
    "museum": "chapters.ch05_museum", "mystery": "chapters.ch05_mystery", "leakage": "chapters.ch05_leakage",
    "simulator": "chapters.ch06_simulator", "lr_find": "chapters.ch06_lr_find",
    "simulator_seeds": "chapters.ch06_simulator_seeds", "lr_races": "chapters.ch06_lr_races",
    "predictions": "chapters.ch06_predictions", "flowchart": "chapters.ch07_flowchart",
    "flowchart_costs": "chapters.ch07_flowchart_costs", "scheduler_gallery": "chapters.ch07_scheduler_gallery",
    "loop_tables": "chapters.ch07_loop_tables", "clipping": "chapters.ch07_clipping",
    "gpu_figures": "chapters.gpu_figures", "arena": "chapters.ch08_arena",
    "arena_search": "chapters.ch08_arena_search", "arena_seeds": "chapters.ch08_arena_seeds",
    "scoreboard": "chapters.ch08_scoreboard", "cheatsheet": "chapters.ch09_cheatsheet",
    "cheatsheet_page": "chapters.ch09_cheatsheet_page", "cheatsheet_code": "chapters.ch09_cheatsheet_code",
    "over_seeds": "chapters.over_seeds",
}.items()}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module of its new name (one object, two names in ``sys.modules``)."""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        self.spec = module.__spec__          # the import system sets __spec__ to the old name's; put it back
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old names in ``MOVED`` and nothing else."""

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        return None if new is None else importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``course_utils/__init__.py`` calls it)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
