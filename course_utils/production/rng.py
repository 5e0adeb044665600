"""RNG states as checkpointable values (chapter 7): torch, CUDA, NumPy and `random`, no pickled objects."""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture() -> dict[str, Any]:
    """Every global generator's state, as tensors and plain Python values (loadable with weights_only=True)."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [str(kind), keys.tolist(), int(position), int(has_gauss), float(cached)],
        "random": [version, list(internal), gauss],
    }


def restore(state: dict[str, Any]) -> None:
    """Put back what `capture` saved."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, cached))
    version, internal, gauss = state["random"]
    random.setstate((version, tuple(internal), gauss))
