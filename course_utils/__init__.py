"""course_utils: the helper package of the Training Loop Mechanics course (the map is in ``README.md`` here).

Notebooks import these few names from the top; everything else lives in ``infra/``, ``engine/``,
``production/``, ``doctor/``, ``exercises/``, ``chapters/`` and ``widgets/``. The old top-level
module paths still import (``_moved.py``).
"""
from course_utils import _moved
from course_utils.engine.arithmetic import TrainingArithmetic, training_arithmetic
from course_utils.infra import nudge as _nudge
from course_utils.infra.notebook import seed_everything, setup_notebook, sig

_moved.install()
_nudge.install()   # only under COURSE_NUDGE: nbval's nudged pass (infra/nudge.py)

__all__ = ["setup_notebook", "seed_everything", "sig", "training_arithmetic", "TrainingArithmetic"]
