"""What a learner types into a number box (every chapter): one rule, one parser, refusals in their words.

Every number box of every view, and every numeric quiz answer, is read here, so the same text means
the same number everywhere:

- "40", " 40 ", "+40", "1,000", "10_000", "1e3", "2.0" are read exactly as written (1e3 is 1,000);
- a comma that is not a thousands separator ("2,5", "2,30", "1,00") is refused as ambiguous, never
  read as 25 or 230 (a decimal comma in many countries);
- "2.5" in a whole-number box is refused, never truncated to 2 nor read as 25;
- "1e400", "nan", "inf", "1e-400" (which a float would silently turn into 0) are refused;
- every message names the box by its on-screen label and quotes what was typed.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_NUMBER = re.compile(r"^[+-]?(\d[\d,_]*)?(\.\d*)?(e[+-]?\d+)?$", re.IGNORECASE)
_THOUSANDS = re.compile(r"\d{1,3}(,\d{3})+")
MAX_EXPONENT = 30          # 1e30 is already far beyond any box's range; larger exponents are refused in words
MAX_LENGTH = 40


def _shown(text: object) -> str:
    """What the learner typed, trimmed and cut to a readable length, for a message."""
    raw = str(text).strip()
    return raw if len(raw) <= 30 else raw[:27] + "..."


def read_number(text: object, label: str, example: str = "12") -> Decimal:
    """The exact number written in `text` (a Decimal), or a ValueError in the learner's words."""
    raw = str("" if text is None else text).strip().replace(" ", "")
    if not raw:
        raise ValueError(f"{label}: the box is empty; type a number such as {example}")
    if len(raw) > MAX_LENGTH:
        raise ValueError(f"{label}: that number is far too long")
    if not _NUMBER.match(raw) or not any(ch.isdigit() for ch in raw):
        raise ValueError(f"{label}: {_shown(text)!r} is not a number; type a number such as {example}")
    integer_part = re.split(r"[.eE]", raw.lstrip("+-"))[0]
    if "," in integer_part and not _THOUSANDS.fullmatch(integer_part):
        raise ValueError(f"{label}: {raw!r} is ambiguous; write a decimal with a point (2.5) and thousands "
                         "as 1,000 or 1000")
    cleaned = raw.replace(",", "").replace("_", "")
    mantissa, _, exponent = cleaned.lower().partition("e")
    if exponent and abs(int(exponent)) > MAX_EXPONENT:
        raise ValueError(f"{label}: {raw} is out of range")
    try:
        number = Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the pattern above admits only what Decimal reads
        raise ValueError(f"{label}: {_shown(text)!r} is not a number") from None
    if number != 0 and abs(number) < Decimal(10) ** -MAX_EXPONENT:
        raise ValueError(f"{label}: {raw} is out of range")
    return number


def _check_range(number: Decimal, raw: str, label: str, minimum, maximum, shown_as) -> None:
    """Refuse a number outside [minimum, maximum], quoting it as typed (and its value, if written otherwise)."""
    value = shown_as(int(number) if number == number.to_integral_value() else float(number))
    got = raw if value.replace(",", "") == raw.replace(",", "").lstrip("+") else f"{raw} (= {value})"
    low = minimum is not None and number < Decimal(str(minimum))
    high = maximum is not None and number > Decimal(str(maximum))
    if (low or high) and minimum is not None and maximum is not None:
        raise ValueError(f"{label} must be between {shown_as(minimum)} and {shown_as(maximum)}, got {got}")
    if low:
        raise ValueError(f"{label} must be at least {shown_as(minimum)}, got {got}")
    if high:
        raise ValueError(f"{label} must be at most {shown_as(maximum)} in this view, got {got}")


def parse_whole_number(text: object, label: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number from what a learner typed or pasted ("1,000", "1e3", "2.0", " 40 "); ValueError in their words.

    The message names the box by its on-screen `label` and never silently changes the value:
    "2.5" is refused (not truncated to 2, not read as 25). Chapters 0-8.
    """
    number = read_number(text, label, "12")
    raw = str(text).strip()
    if number != number.to_integral_value():
        raise ValueError(f"{label} must be a whole number, got {raw}")
    _check_range(number, raw, label, minimum, maximum, lambda v: f"{v:,}")
    return int(number)


def parse_decimal(text: object, label: str, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite decimal number from what a learner typed ("0.2", ".5", "1e-3", "1,000.5"); ValueError in their words.

    The messages quote the text as typed ("you typed 1e400"), never Python's float of it. Chapters 6 and 7.
    """
    number = read_number(text, label, "0.5")
    raw = str(text).strip()
    _check_range(number, raw, label, minimum, maximum, lambda v: f"{v:g}")
    value = float(number)
    if not math.isfinite(value):  # pragma: no cover - the exponent bound keeps every accepted number finite
        raise ValueError(f"{label}: {raw} is out of range")
    return value
