"""Claims over seeds (chapters 6 and 8): a figure measured on several seeds, told as a median and a range.

A comparison the chapters draw a conclusion from is run on at least five seeds (each seed is another
spiral, another initialisation, another shuffle). ``Spread`` holds one figure's values, one per seed,
and prints them as "median M (range A-B)"; ``tally`` counts the seeds on which a claim held.
Only figures that every CPU computes alike are printed where nbval compares; a chaotic run's
figures are told by counts of seeds (``tally``), its raw values go in a figure or an ignored cell.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

SEEDS = tuple(range(5))   # the seeds every multi-seed claim of chapters 6 and 8 is measured on


def _fmt(x: float, digits: int) -> str:
    """`x` to `digits` significant digits, without trailing zeros ("0.0376", "180", "5.8", "10,300")."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{round(x, digits - 1 - int(math.floor(math.log10(abs(x))))):,g}"


@dataclass(frozen=True)
class Spread:
    """One figure measured on several seeds (None where the run never got there)."""

    values: tuple[float | None, ...]

    def __post_init__(self):
        object.__setattr__(self, "values", tuple(self.values))
        if not self.values:
            raise ValueError("a spread needs at least one seed's value")

    @property
    def found(self) -> list[float]:
        """The values that exist (a race that reached its target, say)."""
        return [v for v in self.values if v is not None]

    @property
    def median(self) -> float | None:
        return statistics.median(self.found) if self.found else None

    @property
    def low(self) -> float | None:
        return min(self.found, default=None)

    @property
    def high(self) -> float | None:
        return max(self.found, default=None)

    def text(self, digits: int = 2, unit: str = "") -> str:
        """'median 5.8x (range 5-6.8x)'; with missing values, 'on 3 of 5 seeds: median ...'."""
        found = self.found
        if not found:
            return f"on none of {len(self.values)} seeds"
        where = "" if len(found) == len(self.values) else f"on {len(found)} of {len(self.values)} seeds: "
        if len(found) == 1:
            return f"{where}{_fmt(found[0], digits)}{unit}"
        return (f"{where}median {_fmt(self.median, digits)}{unit} "
                f"(range {_fmt(self.low, digits)}-{_fmt(self.high, digits)}{unit})")


def claims_text(claims: dict[str, bool]) -> list[str]:
    """One line a claim, 'holds' or 'does NOT hold' (chapters 6 and 8 print their conclusions so)."""
    return [f"  {claim}: {'holds' if held else 'does NOT hold'}" for claim, held in claims.items()]


def tally(flags: Iterable[bool]) -> str:
    """'4 of 5': on how many seeds a claim held."""
    flags = [bool(f) for f in flags]
    return f"{sum(flags)} of {len(flags)}"


def ratios(numerators: Iterable[float | None], denominators: Iterable[float | None]) -> Spread:
    """Seed by seed a / b, None where either is missing (SGD's updates over Adam's, say)."""
    return Spread(tuple(None if a is None or b is None else a / b for a, b in zip(numerators, denominators)))

