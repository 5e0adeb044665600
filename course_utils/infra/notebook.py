"""setup_notebook(): the one call at the top of every chapter (numeric path, seeds, threads, plots, warnings)."""
from __future__ import annotations

import contextlib
import gc
import math
import os
import random
import warnings
from collections.abc import Iterator

import numpy as np
import torch

DEFAULT_SEED = 0

# The CPU code path the chapters' numbers are computed on (issues 21 and 38). Float32 kernels round differently in
# the last bit on AVX-512, AVX2 and generic code, and between MKL's per-CPU branches; a chaotic run amplifies that
# into printed digits. The pin puts ATen on its AVX2 kernels, MKL on its AVX2 branch in strict mode and oneDNN at
# AVX2 at most, with one thread: the same code on every CPU that has AVX2 (x86-64 since 2013-15), and Intel
# documents MKL's AVX2 branch as giving the same results on every Intel CPU with AVX2 (on other vendors' CPUs MKL
# uses its own choice: docs/instructors.md). A CPU without AVX2 (an old or low-end x86, an arm64 machine) gets
# GENERIC_PATH instead: ATen's generic kernels, MKL's compatible branch. Nothing nbval compares may depend on which
# (the perturbed pass runs GENERIC_PATH, nudged); the pin only makes figures and a cell marked as this machine's
# come out the same again. It was GENERIC_PATH everywhere until issue 38's budget: that cost 3.3x on chapter 7's
# transformer (13.2 s against 4.0 s for its two epochs) for no guarantee the AVX2 path does not give. The pin must
# be set before torch runs its first operation; an explicit value in the environment wins (the perturbed passes).
NUMERIC_PIN = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"}
GENERIC_PATH = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE,STRICT", "ONEDNN_MAX_CPU_ISA": "SSE41"}


def seed_everything(seed: int = DEFAULT_SEED) -> None:
    """Seed Python's `random`, NumPy and torch (CPU and, if present, CUDA). Used by every chapter."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def numeric_path() -> dict[str, str]:
    """The pin for this CPU: NUMERIC_PIN where it has AVX2, else GENERIC_PATH (forcing AVX2 on a CPU without it
    would stop the kernel on an illegal instruction, and arm64 builds of torch refuse the name with a warning)."""
    has_avx2 = getattr(torch.cpu, "_is_avx2_supported", lambda: False)     # reads CPUID; fixes no code path
    return NUMERIC_PIN if has_avx2() else GENERIC_PATH


def pin_numerics() -> bool:
    """Put the chapters on this CPU's pinned code path (every chapter, via setup_notebook); False if torch already ran.

    Where the environment already names a path (an instructor's choice, or the perturbed nbval test), that wins.
    """
    ours = "ATEN_CPU_CAPABILITY" not in os.environ
    pin = numeric_path()
    for name, value in pin.items():
        os.environ.setdefault(name, value)
    path = torch.backends.cpu.get_cpu_capability()  # this call fixes the path for the rest of the process
    return not ours or path == pin["ATEN_CPU_CAPABILITY"].upper()


def setup_notebook(seed: int = DEFAULT_SEED, threads: int = 1) -> None:
    """Make a chapter deterministic and quiet: numeric path, seeds, a fixed thread count, plot style, precision."""
    if not pin_numerics():
        warnings.warn("torch ran before setup_notebook(), so this kernel computes on its own CPU path and printed "
                      "figures may differ from the committed ones in the last digits: restart the kernel and run "
                      "the chapter from the top", RuntimeWarning, stacklevel=2)
    seed_everything(seed)
    torch.set_num_threads(threads)  # same thread count -> same float reductions, run after run
    torch.set_printoptions(precision=4, sci_mode=False)
    np.set_printoptions(precision=4, suppress=True)
    try:  # inside a kernel: the static inline backend, whatever MPLBACKEND says (ipympl's HTML breaks nbval)
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and getattr(shell, "kernel", None) is not None:
            shell.run_line_magic("matplotlib", "inline")
            # each figure sets its own margins (tight_layout, subplots_adjust): the inline backend's default
            # tight bounding box would draw it a second time to measure it (chapter 5's panels: 0.35 -> 0.23 s)
            shell.run_line_magic("config", "InlineBackend.print_figure_kwargs = {'bbox_inches': None}")
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
    # What is loaded by now (torch, NumPy, matplotlib, IPython: over a million objects) stays for the kernel's
    # life: frozen, the garbage collector no longer walks it on each full collection (measured: 0.2 s each, 5 to 9
    # per chapter), and forked runs no longer copy the pages it would have touched
    gc.freeze()


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run a block on one torch thread, the notebooks' setting (chapters 6, 8: many tiny runs).

    The course's runs are far too small to gain from threads: two threads on two busy cores made them
    7x slower (measured, issue 22), and one thread computes the figures the chapters print.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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
