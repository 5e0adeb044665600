"""Generated cases (chapters 0-8): hypothesis searches for a failing case and shrinks it to the simplest one.

Each checker first runs its named edge cases, in a fixed order (what a typical mistake trips on),
then asks hypothesis for more: ``find`` draws up to `examples` cases from a strategy, stops at the
first that fails and shrinks it, so the learner reads the smallest case that shows their bug
(N=1, B=2, not N=3,817, B=409). The search is derandomized (the same cases in every run) and keeps no
example database. Hypothesis keeps a small cache of constants; in a notebook kernel it goes beside the
learner's progress instead of into the notebooks folder.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from course_utils.exercises.words import Fail

_configured = False


def _keep_cache_out_of_the_notebooks() -> None:
    global _configured
    if _configured:
        return
    _configured = True
    if "ipykernel" in sys.modules and not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        from hypothesis.configuration import set_hypothesis_home_dir

        from course_utils.infra.quiz import default_progress_path
        set_hypothesis_home_dir(Path(default_progress_path()).parent / "hypothesis")


def search(strategy: Any, check_case: Callable[[Any], None], examples: int = 150) -> int:
    """Run `check_case` on up to `examples` generated cases; raise the Fail of the simplest failing one.

    Returns how many cases were tried when none failed. `check_case` raises Fail for a wrong case.
    """
    _keep_cache_out_of_the_notebooks()
    from hypothesis import HealthCheck, Phase, Verbosity, find, settings
    from hypothesis.errors import NoSuchExample

    tried = [0]
    last: list[Fail] = []

    def fails(case: Any) -> bool:
        tried[0] += 1
        try:
            check_case(case)
        except Fail as failure:
            last[:] = [failure]
            return True
        return False

    options = settings(database=None, derandomize=True, max_examples=examples, deadline=None,
                       suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                       phases=[Phase.explicit, Phase.generate, Phase.shrink])
    try:
        simplest = find(strategy, fails, settings=options)
    except NoSuchExample:
        return tried[0]
    try:
        check_case(simplest)      # the simplest case's own message (a learner's function may be flaky)
    except Fail:
        raise
    raise last[0]
