"""Argument checks shared by every configuration (chapters 5-8): one rule, one message shape."""
from __future__ import annotations

import math


def require(ok: bool, name: str, requirement: str, value: object) -> None:
    """Raise ValueError("NAME must be REQUIREMENT, got VALUE") unless `ok`."""
    if not ok:
        raise ValueError(f"{name} must be {requirement}, got {value!r}")


def is_int(value: object) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """A finite int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
