"""RNG states as checkpointable values (chapter 7): torch, CUDA, NumPy and `random`, no pickled objects."""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture(device: torch.device) -> dict[str, Any]:
    """Every generator the run draws from, as tensors and plain Python values (loadable with weights_only=True).

    CUDA's generators only when the run is on CUDA: a CPU run on a machine with a GPU never touches the GPU (no
    CUDA context, a few hundred MB of its memory, is created for it, and it trains in a forked process too).
    """
    kind, keys, position, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if device.type == "cuda" else [],
        "numpy": [str(kind), keys.tolist(), int(position), int(has_gauss), float(cached)],
        "random": [version, list(internal), gauss],
    }


def restore(state: dict[str, Any], device: torch.device) -> None:
    """Put back what `capture` saved (CUDA's generators only for a run on CUDA)."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and device.type == "cuda":
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, cached))
    version, internal, gauss = state["random"]
    random.setstate((version, tuple(internal), gauss))
