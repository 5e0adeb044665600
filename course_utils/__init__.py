"""course_utils: the helper package of the Training Loop Mechanics course (the map is in ``README.md`` here).

Notebooks import these few names from the top; everything else lives in ``infra/``, ``engine/``,
``production/``, ``doctor/``, ``exercises/``, ``chapters/`` and ``widgets/``. The old top-level
module paths still import (``_moved.py``).
"""
from course_utils import _moved
from course_utils.engine.arithmetic import TrainingArithmetic, training_arithmetic
from course_utils.infra import nudge as _nudge

_moved.install()
_nudge.install()   # only under COURSE_NUDGE: nbval's nudged pass (infra/nudge.py)

__all__ = ["setup_notebook", "seed_everything", "sig", "training_arithmetic", "TrainingArithmetic"]
_NOTEBOOK = ("setup_notebook", "seed_everything", "sig")


def __getattr__(name: str):
    """The notebook helpers, imported when first asked for: they import torch (about a second), which a command
    that needs none of it (``python -m course_utils.explain``) should not wait for."""
    if name in _NOTEBOOK:
        from course_utils.infra import notebook
        return getattr(notebook, name)
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
