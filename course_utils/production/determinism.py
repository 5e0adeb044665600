"""Deterministic kernels for one run (chapter 7, "What bitwise needs on a GPU"): the trainer's --deterministic.

On the CPU the course's runs are bitwise reproducible as they are; on a GPU several kernels (cuBLAS's split-K
reductions, atomics in some backward passes, cuDNN's autotuned algorithms) are not. ``deterministic(device)``
switches torch to its deterministic implementations for the duration of a run and puts the settings back after.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

import torch

CUBLAS = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_VALUES = (":4096:8", ":16:8")   # the two values torch's reproducibility notes accept


def check_environment(device: torch.device, environ: Mapping[str, str] = os.environ) -> None:
    """ValueError (one line) when deterministic CUDA kernels cannot be had: cuBLAS reads its variable at start."""
    if device.type == "cuda" and environ.get(CUBLAS) not in CUBLAS_VALUES:
        raise ValueError(f"--deterministic on CUDA needs {CUBLAS}={CUBLAS_VALUES[0]} (or {CUBLAS_VALUES[1]}) set "
                         f"before the run starts; it is {environ.get(CUBLAS, 'not set')!r}")


@contextlib.contextmanager
def deterministic(device: torch.device, on: bool = True) -> Iterator[None]:
    """Deterministic algorithms on, cuDNN's autotuner off, for the block (nothing changes when `on` is False)."""
    if not on:
        yield
        return
    check_environment(device)
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = before[2], before[3]
