"""What a call raises, in torch's own words (chapters 1, 3, 7): ``"TypeError: message"``, or ``"no error"``."""
from __future__ import annotations

from collections.abc import Callable


def raised(call: Callable[[], object], whole: bool = True, sentences: int | None = None) -> str:
    """Run `call`; the exception it raised as ``"Type: message"`` (its first line unless `whole`; of that line, the
    first `sentences` sentences when given), else "no error"."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - torch's own message is the result
        text = str(e) if whole and sentences is None else str(e).strip().splitlines()[0]
        end = -1
        for _ in range(sentences or 0):
            end = text.find(". ", end + 1)
            if end < 0:
                break
        return f"{type(e).__name__}: {text if sentences is None or end < 0 else text[:end + 1]}"
    return "no error"
