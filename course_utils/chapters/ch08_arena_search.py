"""Can the arena's target be reached in under U updates? An honest grid search (chapter 8).

``search_under`` races every combination of a ``Grid`` of knobs (batch size, optimizer, learning
rate, schedule) on a challenge, each for at most U updates, and ranks them. The full grid takes
minutes, so its result is kept in ``results/arena_search.json`` (regenerate with
``python -m course_utils.chapters.ch08_arena_search``); ``tests/test_arena_search.py`` re-races a sample of that
file's rows and its best rows and checks every count, so the file cannot drift from the engine.
"""
from __future__ import annotations

import itertools
import json
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from course_utils.chapters.ch08_arena import Challenge, Knobs, race
from course_utils.engine.models import OPTIMIZERS
from course_utils.engine.schedules import SCHEDULES
from course_utils.infra.parallel import map_runs
from course_utils.infra.storage import atomic_write_text

SAVED = Path(__file__).with_name("results") / "arena_search.json"


@dataclass(frozen=True)
class Grid:
    """The knobs a search tries: every combination (chapter 8)."""

    batch_sizes: tuple[int, ...] = (16, 32, 64, 128, 300, 600)
    optimizers: tuple[str, ...] = OPTIMIZERS
    lrs: tuple[float, ...] = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
    schedules: tuple[str, ...] = SCHEDULES

    def __iter__(self):
        return iter(itertools.product(self.batch_sizes, self.optimizers, self.lrs, self.schedules))

    def __len__(self) -> int:
        return len(self.batch_sizes) * len(self.optimizers) * len(self.lrs) * len(self.schedules)

    def describe(self) -> str:
        return (f"batch sizes {list(self.batch_sizes)} x optimizers {list(self.optimizers)} x lrs "
                f"{list(self.lrs)} x schedules {list(self.schedules)}")


FULL_GRID = Grid()
SMALL_GRID = Grid(batch_sizes=(32, 128), optimizers=("sgd", "adam"), lrs=(0.03, 0.1),
                  schedules=("constant", "warmup_cosine"))


@dataclass(frozen=True)
class Probe:
    """One configuration raced for at most the budget: its count to the target (None: not within it)."""

    batch_size: int
    optimizer: str
    lr: float
    schedule: str
    epochs: int
    updates_to_target: int | None
    acc_at_end: float               # val accuracy after the probe's last update
    peak_memory: int

    @property
    def knobs(self) -> Knobs:
        return Knobs(self.batch_size, self.optimizer, self.lr, self.schedule, self.epochs)

    def rank(self) -> tuple:
        hit = self.updates_to_target
        return (hit is None, hit or 0, -self.acc_at_end, self.peak_memory)


def horizon_epochs(challenge: Challenge, batch_size: int, budget: int) -> int:
    """The fewest epochs whose updates cover `budget`, so decaying schedules decay within it (chapter 8)."""
    per_epoch = math.ceil(challenge.n_train / batch_size)
    return max(1, min(challenge.max_epochs, math.ceil(budget / per_epoch)))


def probe(challenge: Challenge, knobs: Knobs, budget: int) -> Probe:
    """Race `knobs` for at most `budget` updates, with one torch thread (the notebooks' setting)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = race(challenge, knobs, max_updates=budget)
    finally:
        torch.set_num_threads(threads)
    return Probe(knobs.batch_size, knobs.optimizer, knobs.lr, knobs.schedule, knobs.epochs, r.updates_to_target,
                 r.final_acc, r.peak_memory)


@dataclass(frozen=True)
class SearchResult:
    """Every probe of a search, best first, and the answer to "under `budget` updates?" (chapter 8)."""

    challenge: Challenge
    budget: int
    grid: Grid
    probes: tuple[Probe, ...] = field(repr=False)

    @property
    def best(self) -> Probe | None:
        return self.probes[0] if self.probes and self.probes[0].updates_to_target is not None else None

    @property
    def winners(self) -> list[Probe]:
        """The probes that reached the target in fewer than `budget` updates."""
        return [p for p in self.probes if p.updates_to_target is not None and p.updates_to_target < self.budget]

    @property
    def answer(self) -> bool:
        return bool(self.winners)

    def best_by(self, knob: str) -> dict:
        """For each value of one knob, its fastest probe (None where no probe of it reached the target)."""
        out: dict = {}
        for p in self.probes:                                  # best first: the first seen is the best
            value = getattr(p, knob)
            if value not in out or (out[value] is None and p.updates_to_target is not None):
                out[value] = p if p.updates_to_target is not None else None
        return out

    def text(self, top: int = 5) -> str:
        """The question, the grid searched, the answer with its numbers (printed by chapter 8)."""
        lines = [f"question: {self.challenge.target:.0%} validation accuracy in under {self.budget} updates?",
                 f"searched {len(self.probes)} configurations: {self.grid.describe()};",
                 f"each raced for at most {self.budget} updates (epochs = the fewest that cover them, so "
                 f"schedules finish within the budget)"]
        if not self.answer:
            closest = max(self.probes, key=lambda p: p.acc_at_end, default=None)
            lines.append(f"answer: NO. No configuration reached it; the closest ended at "
                         f"{closest.acc_at_end:.1%}" if closest else "answer: NO (nothing searched)")
            return "\n".join(lines)
        lines.append(f"answer: YES. {len(self.winners)} of {len(self.probes)} configurations reach it; "
                     f"the fastest needs {self.best.updates_to_target} updates")
        lines += [f"  {i}. {p.knobs.label()}: {p.updates_to_target} updates" for i, p in enumerate(self.winners[:top], 1)]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"challenge": asdict(self.challenge), "budget": self.budget,
                "grid": {k: list(v) for k, v in asdict(self.grid).items()},
                "probes": [asdict(p) for p in self.probes]}

    @classmethod
    def from_json(cls, data: dict) -> "SearchResult":
        grid = Grid(**{k: tuple(v) for k, v in data["grid"].items()})
        return cls(Challenge(**data["challenge"]), data["budget"], grid, tuple(Probe(**p) for p in data["probes"]))


def search_under(challenge: Challenge = Challenge(), budget: int = 50, grid: Grid = FULL_GRID) -> SearchResult:
    """Race every combination of `grid` for at most `budget` updates and rank them (chapter 8)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a whole number of updates >= 1, got {budget!r}")
    jobs = [(challenge, Knobs(b, o, lr, s, horizon_epochs(challenge, b, budget)), budget) for b, o, lr, s in grid]
    probes = map_runs(probe, jobs)
    return SearchResult(challenge, budget, grid, tuple(sorted(probes, key=Probe.rank)))


def saved_search(path: Path = SAVED) -> SearchResult:
    """The full grid's result as last computed by `python -m course_utils.chapters.ch08_arena_search` (tests check it)."""
    return SearchResult.from_json(json.loads(path.read_text(encoding="utf-8")))


def seeds_check(challenge: Challenge, knobs: Knobs, seeds, budget: int) -> list[int | None]:
    """The same knobs on other seeds (other data, init and order): is the count luck? (chapter 8)."""
    return [p.updates_to_target for p in map_runs(probe, [(replace(challenge, seed=s), knobs, budget) for s in seeds])]


def dump(result: SearchResult) -> str:
    """The result as JSON text, one probe a line (a readable diff when it is regenerated)."""
    data = result.to_json()
    probes = ",\n  ".join(json.dumps(p) for p in data.pop("probes"))
    head = json.dumps(data)[:-1]
    return f'{head},\n "probes": [\n  {probes}\n ]\n}}\n'


def main(argv: list[str]) -> int:
    """Regenerate results/arena_search.json with the full grid (minutes; on every core, COURSE_WORKERS caps them)."""
    result = search_under()
    atomic_write_text(SAVED, dump(result))
    print(result.text(10))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
