"""setup_notebook(): the one call at the top of every chapter (seeds, threads, plots, warnings)."""
from __future__ import annotations

import math
import os
import random
import warnings

import numpy as np
import torch

DEFAULT_SEED = 0


def seed_everything(seed: int = DEFAULT_SEED) -> None:
    """Seed Python's `random`, NumPy and torch (CPU and, if present, CUDA). Used by every chapter."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def setup_notebook(seed: int = DEFAULT_SEED, threads: int = 1) -> None:
    """Make a chapter deterministic and quiet: seeds, a fixed thread count, plot style, print precision."""
    seed_everything(seed)
    torch.set_num_threads(threads)  # same thread count -> same float reductions, run after run
    torch.set_printoptions(precision=4, sci_mode=False)
    np.set_printoptions(precision=4, suppress=True)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    try:  # inside a kernel: the static inline backend, whatever MPLBACKEND says (ipympl's HTML breaks nbval)
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and getattr(shell, "kernel", None) is not None:
            shell.run_line_magic("matplotlib", "inline")
    except ImportError:  # pragma: no cover - IPython is a dependency
        pass
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "figure.figsize": (7.0, 3.2), "figure.dpi": 90, "axes.grid": True, "grid.alpha": 0.3,
        "axes.spines.top": False, "axes.spines.right": False, "font.size": 10,
    })
    for category, pattern in [
        (UserWarning, ".*TypedStorage is deprecated.*"),
        (DeprecationWarning, ".*"),
    ]:
        warnings.filterwarnings("ignore", message=pattern, category=category)


def sig(x: float, digits: int = 4) -> float:
    """Round to `digits` significant digits so printed figures are stable across runs (every chapter)."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - int(math.floor(math.log10(abs(x)))))


MAX_SEED = 2**63 - 1


def valid_seed(seed: object, name: str = "seed") -> int:
    """A seed torch.Generator.manual_seed accepts, 0..2**63-1; ValueError naming `name` otherwise (chapters 1, 2)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number from 0 to {MAX_SEED:,}, got {seed!r}"[:160])
    if not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"{name} must be a whole number from 0 to {MAX_SEED:,}"
                         f" (2**63 - 1), got {int(seed):,}"[:160])
    return int(seed)
