"""Curves that cost what they show (chapters 6 and 8): a long history kept as a bounded number of buckets.

A live panel is a few hundred pixels wide, so drawing more than a few hundred points per curve only
costs time. ``Buckets`` keeps a curve as at most ``limit`` buckets of ``width`` consecutive steps each:
while the run is short every point is its own bucket (drawn exactly); when the buckets would pass the
limit, the width doubles and neighbours merge, so a run of a million steps is still <= ``limit``
buckets, each with its mean and its min-max range (drawn as a band, so noise stays visible).
Adding a point costs O(1) (a merge, O(limit), happens once per doubling of the history), and
``changed()`` says which buckets a browser needs again since the last call.
"""
from __future__ import annotations

import math

LIMIT = 256          # buckets per curve: a panel's plot area is about 220 px wide


class Buckets:
    """One curve as at most `limit` buckets: [x, y] for a single point, [x, mean, min, max] for several."""

    def __init__(self, limit: int = LIMIT):
        if limit < 2:
            raise ValueError(f"limit must be at least 2, got {limit}")
        self.limit = limit
        self.width = 1
        self.points = 0                       # every point ever added (the history's length)
        self._key: list[int] = []
        self._n: list[int] = []               # finite points per bucket
        self._count: list[int] = []           # all points per bucket (finite or not)
        self._sx: list[float] = []
        self._sy: list[float] = []
        self._lo: list[float] = []
        self._hi: list[float] = []
        self._dirty: int | None = None        # first bucket changed since the last changed() call

    def __len__(self) -> int:
        return len(self._key)

    def add(self, x: float, y: float | None) -> None:
        """One new point (x never decreases along a curve; a non-finite y leaves a gap)."""
        self.points += 1
        finite = y is not None and math.isfinite(y)
        key = int(x // self.width) if math.isfinite(x) else (self._key[-1] if self._key else 0)
        if not self._key or key != self._key[-1]:
            self._key.append(key)
            for column in (self._n, self._count):
                column.append(0)
            for column in (self._sx, self._sy):
                column.append(0.0)
            self._lo.append(math.inf)
            self._hi.append(-math.inf)
        i = len(self._key) - 1
        self._count[i] += 1
        self._sx[i] += x
        if finite:
            self._n[i] += 1
            self._sy[i] += y
            self._lo[i] = min(self._lo[i], y)
            self._hi[i] = max(self._hi[i], y)
        self._dirty = i if self._dirty is None else min(self._dirty, i)
        if len(self._key) > self.limit:
            self._merge()

    def _merge(self) -> None:
        """Double the width: neighbours merge, the browser needs every bucket again."""
        self.width *= 2
        columns = (self._key, self._n, self._count, self._sx, self._sy, self._lo, self._hi)
        merged: tuple[list, ...] = tuple([] for _ in columns)
        for i, key in enumerate(self._key):
            key //= 2
            if merged[0] and merged[0][-1] == key:
                for column, old, combine in zip(merged[1:], columns[1:],
                                                (int.__add__, int.__add__, float.__add__, float.__add__, min, max)):
                    column[-1] = combine(column[-1], old[i])
            else:
                merged[0].append(key)
                for column, old in zip(merged[1:], columns[1:]):
                    column.append(old[i])
        (self._key, self._n, self._count, self._sx, self._sy, self._lo, self._hi) = merged
        self._dirty = 0

    def bucket(self, i: int) -> list:
        """Bucket `i` as the browser draws it: [x, y] (y None for a gap) or [x, mean, min, max]."""
        x = self._sx[i] / self._count[i]
        if self._n[i] == 0:
            return [x, None]
        if self._lo[i] == self._hi[i]:            # one point (drawn exactly), or several equal ones
            return [x, self._lo[i]]
        return [x, self._sy[i] / self._n[i], self._lo[i], self._hi[i]]

    def all(self) -> list[list]:
        """Every bucket, oldest first."""
        return [self.bucket(i) for i in range(len(self._key))]

    def changed(self) -> tuple[int, list[list]] | None:
        """(first index, buckets from there on) changed since the last call, or None; marks them sent."""
        if self._dirty is None:
            return None
        start, self._dirty = self._dirty, None
        return start, [self.bucket(i) for i in range(start, len(self._key))]


def log_decimate(points: list[tuple[float, float]], buckets: int = 300) -> list[tuple[float, float]]:
    """At most ~2 x `buckets` points of a curve drawn on a log x axis: the first and the min and max per log bucket.

    Chapter 8's live race figure redraws its curve every half second; this keeps each redraw the
    same cost however many updates the race has run.
    """
    if len(points) <= 2 * buckets:
        return list(points)
    xs = [x for x, _ in points if x > 0]
    if not xs:
        return list(points)
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    span = (hi - lo) or 1.0
    kept: dict[int, list[tuple[float, float]]] = {}
    for x, y in points:
        key = int((math.log10(x) - lo) / span * (buckets - 1)) if x > 0 else -1
        group = kept.setdefault(key, [])
        if len(group) < 2:
            group.append((x, y))
        else:
            low, high = min(group, key=lambda p: p[1]), max(group, key=lambda p: p[1])
            if y < low[1]:
                low = (x, y)
            elif y > high[1]:
                high = (x, y)
            group[:] = sorted({low, high})
    return [p for key in sorted(kept) for p in sorted(kept[key])]
