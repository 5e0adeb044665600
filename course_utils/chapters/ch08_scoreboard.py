"""The arena's scoreboard (chapter 8): the best runs of each challenge, kept between sessions.

It lives beside the quiz progress (``scoreboard.json`` in the folder of
``quiz.default_progress_path()``) and is read and written only through ``storage.JsonStore``: every
record re-reads the file under a lock and writes it atomically, so two kernels never lose a run; a
damaged file is repaired row by row (``repair_scoreboard``: every valid row is kept, even of a file
cut off in the middle), its bytes are set aside (never deleted), and one line says so.

A row keeps the run's full ``TrainConfig`` and target, so ``rerun(row)`` repeats it exactly.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict
from pathlib import Path

from course_utils.chapters.ch08_arena import Challenge, RaceResult, knobs_from, race_config, rank_key
from course_utils.infra.quiz import default_progress_path
from course_utils.engine.session import TrainConfig
from course_utils.infra.storage import JsonStore

KEEP = 100          # rows kept per challenge (the best ones)
VERSION = 1
_KNOB_TYPES = {"batch_size": int, "optimizer": str, "lr": (int, float), "schedule": str, "epochs": int}


def default_scoreboard_path() -> Path:
    """``scoreboard.json`` beside the quiz progress file (``$COURSE_PROGRESS``'s folder or ~/.training_loop_course)."""
    return default_progress_path().with_name("scoreboard.json")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def valid_row(row: object) -> bool:
    """Does a stored row have every field, of the right type, and a config TrainConfig accepts?"""
    if not isinstance(row, dict):
        return False
    knobs, config = row.get("knobs"), row.get("config")
    if not (isinstance(knobs, dict) and set(knobs) == set(_KNOB_TYPES)
            and all(isinstance(knobs[k], t) and not isinstance(knobs[k], bool) for k, t in _KNOB_TYPES.items())):
        return False
    if not isinstance(config, dict):
        return False
    try:
        TrainConfig(**config)
    except (TypeError, ValueError):
        return False
    hit = row.get("updates_to_target")
    return (_number(row.get("target")) and (hit is None or _count(hit)) and _count(row.get("total_updates"))
            and _count(row.get("peak_memory")) and all(_number(row.get(k)) for k in ("final_acc", "best_acc", "wall_s"))
            and isinstance(row.get("recorded"), str))


def valid_scoreboard(data: dict) -> bool:
    """The file's shape: {"version", "challenges": {key: {"challenge": {...}, "runs": [row, ...]}}}."""
    challenges = data.get("challenges", {})
    if not isinstance(challenges, dict):
        return False
    for entry in challenges.values():
        if not (isinstance(entry, dict) and isinstance(entry.get("challenge"), dict)
                and isinstance(entry.get("runs"), list) and all(valid_row(r) for r in entry["runs"])):
            return False
    return True


def count_runs(data: object) -> int:
    """How many rows a (possibly damaged) scoreboard object holds, valid or not."""
    challenges = data.get("challenges") if isinstance(data, dict) else None
    if not isinstance(challenges, dict):
        return 0
    return sum(len(entry["runs"]) for entry in challenges.values()
               if isinstance(entry, dict) and isinstance(entry.get("runs"), list))


def repair_scoreboard(data: object) -> dict:
    """The valid part of a damaged scoreboard: every valid row under its challenge, the rest dropped (chapter 8)."""
    challenges = data.get("challenges") if isinstance(data, dict) else None
    kept: dict[str, dict] = {}
    for key, entry in (challenges.items() if isinstance(challenges, dict) else ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("runs"), list):
            continue
        runs = [row for row in entry["runs"] if valid_row(row)]
        if runs:
            challenge = entry.get("challenge") if isinstance(entry.get("challenge"), dict) else {}
            kept[key] = {"challenge": challenge, "runs": sorted(runs, key=rank_key)[:KEEP]}
    return {"version": VERSION, "challenges": kept}


def row_from(result: RaceResult) -> dict:
    """A scoreboard row: the knobs, the full config, and what the race measured."""
    config = asdict(result.config)
    config["bugs"] = list(config["bugs"])
    return {"knobs": asdict(result.knobs), "config": config, "target": result.target,
            "updates_to_target": result.updates_to_target, "final_acc": result.final_acc,
            "best_acc": result.best_acc, "peak_memory": result.peak_memory, "total_updates": result.total_updates,
            "wall_s": round(result.wall_s, 3), "recorded": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
            "pid": os.getpid()}


def same_run(a: dict, b: dict) -> bool:
    """Two rows of the same configuration and target (the second only repeats the first)."""
    return a["config"] == b["config"] and a["target"] == b["target"]


class Scoreboard:
    """Best runs per challenge, persisted with the quiz progress (chapter 8)."""

    def __init__(self, path: str | os.PathLike | None = None, quiet: bool = False):
        self.path = Path(path) if path is not None else default_scoreboard_path()
        self.quiet = quiet                  # the arena view says what happened itself: no RuntimeWarning
        self.warnings_seen: list[str] = []

    def _store(self) -> JsonStore:
        return JsonStore(self.path, valid=valid_scoreboard, what="arena scoreboard file", repair=repair_scoreboard,
                         count=count_runs, unit="saved runs", quiet=self.quiet)

    def _read(self) -> dict:
        store = self._store()
        data = store.read()
        self.warnings_seen += store.warnings_seen
        return data

    def record(self, challenge: Challenge, result: RaceResult) -> dict:
        """Add a finished race under its challenge; returns the stored row with its "rank" (1 = best)."""
        if result.stopped or result.capped:
            raise ValueError("only a race run to its end is recorded (this one was stopped early)")
        row = row_from(result)

        def change(data: dict) -> dict:
            data["version"] = VERSION
            entry = data.setdefault("challenges", {}).setdefault(challenge.key, {"runs": []})
            entry["challenge"] = asdict(challenge)
            runs = [r for r in entry["runs"] if not same_run(r, row)] + [row]
            runs.sort(key=rank_key)
            entry["runs"] = runs[:KEEP]
            rank = next((i for i, r in enumerate(entry["runs"], 1) if r is row), None)
            return {**row, "rank": rank}

        store = self._store()
        stored = store.update(change)
        self.warnings_seen += store.warnings_seen
        return stored

    def rows(self, challenge: Challenge) -> list[dict]:
        """The challenge's rows, best first."""
        entry = self._read().get("challenges", {}).get(challenge.key, {})
        return sorted(entry.get("runs", []), key=rank_key)

    def best(self, challenge: Challenge) -> dict | None:
        rows = self.rows(challenge)
        return rows[0] if rows else None

    def challenges(self) -> list[str]:
        return sorted(self._read().get("challenges", {}))


def rerun(row: dict, **options) -> RaceResult:
    """Race a stored row's exact configuration again (chapter 8); options as in arena.race_config."""
    config = TrainConfig(**row["config"])
    return race_config(config, row["target"], knobs_from(row["knobs"]), **options)


def reproduces(row: dict, result: RaceResult) -> bool:
    """Did a re-run repeat the row's counts and accuracies exactly?"""
    return (result.updates_to_target == row["updates_to_target"] and result.total_updates == row["total_updates"]
            and result.final_acc == row["final_acc"] and result.peak_memory == row["peak_memory"])


def describe(row: dict) -> str:
    """One row as text (no wall time or date: what nbval compares)."""
    k = row["knobs"]
    hit = f"{row['updates_to_target']:>4}" if row["updates_to_target"] is not None else "   -"
    return (f"{hit}  {row['final_acc']:>6.1%}  {k['optimizer']:<8} {k['lr']:<7g} {k['batch_size']:>4}  "
            f"{k['schedule']:<13} {k['epochs']:>3}  {row['peak_memory']:>8,}")


HEADER = "upd.  final   optim.   lr        B    schedule      ep.  memory B"


def scoreboard_text(rows: list[dict], top: int = 10, mark: dict | None = None) -> str:
    """The top rows as a plain-text table; `mark` (the latest run) gets an arrow."""
    if not rows:
        return "scoreboard: no runs yet for this challenge"
    lines = ["#   " + HEADER]
    for i, row in enumerate(rows[:top], 1):
        arrow = " <- your latest" if mark is not None and same_run(row, mark) else ""
        lines.append(f"{i:<3} {describe(row)}{arrow}")
    if len(rows) > top:
        lines.append(f"(first {top} of {len(rows)} runs)")
    return "\n".join(lines)

