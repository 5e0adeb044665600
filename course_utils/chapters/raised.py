"""What a call raises, in torch's own words (chapters 1, 3, 7): ``"TypeError: message"``, or ``"no error"``."""
from __future__ import annotations

from collections.abc import Callable


def raised(call: Callable[[], object], whole: bool = True) -> str:
    """Run `call`; the exception it raised as ``"Type: message"`` (its first line unless `whole`), else "no error"."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - torch's own message is the result
        return f"{type(e).__name__}: {e if whole else str(e).splitlines()[0]}"
    return "no error"
