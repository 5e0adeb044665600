"""Argument checks shared by every configuration (chapters 5-8): one rule, one message shape."""
from __future__ import annotations

import math

_SHOWN = 60   # characters of a bad value's repr kept in a message (10**400 has 401 digits)


def require(ok: bool, name: str, requirement: str, value: object) -> None:
    """Raise ValueError("NAME must be REQUIREMENT, got VALUE") unless `ok`."""
    if not ok:
        shown = repr(value)
        if len(shown) > _SHOWN:
            shown = f"{shown[:_SHOWN - 20]}...{shown[-12:]} ({len(shown)} characters)"
        raise ValueError(f"{name} must be {requirement}, got {shown}")


def is_int(value: object) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """A finite int or float that is not a bool; an int too large for a float (10**400) is not finite."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:          # math.isfinite converts an int to a float first
        return False
