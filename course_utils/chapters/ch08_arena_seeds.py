"""Chapter 8's trade-offs, each measured on five seeds: batch size, batch size with learning rate,
schedules within the budget, and the winner's count checked on fresh data.

Each function races the arena's challenge (``ch08_arena.race``) once per seed (another spiral, initialisation
and shuffle each time: ``Challenge.seed``) and returns a record whose ``text(figures=False)`` the notebook
compares (counts of seeds, and the ``claims()`` the chapter draws, each checked on the runs;
``tests/test_arena_seeds.py`` fails when one stops holding) and whose ``text()`` adds the medians and ranges of
update counts. Those come from chaotic races: a
nudge of 1e-6 to the initial weights moved a range's end (issue 38), and so can another CPU's last bits, so they
are printed in a cell nbval does not compare, marked as this machine's. So is ``time_text()``: wall-clock time.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from course_utils.chapters.ch08_arena import Challenge, Knobs, RaceResult, _val_accuracy, race
from course_utils.chapters.ch08_arena_search import horizon_epochs, probe
from course_utils.engine.arithmetic import examples_after
from course_utils.engine.data import make_spiral
from course_utils.infra.notebook import one_thread
from course_utils.infra.parallel import in_groups, map_runs, runs
from course_utils.chapters.over_seeds import SEEDS, Spread, claims_text, tally
from course_utils.engine.schedules import SCHEDULES

HELD_OUT = (3000, 12345)      # fresh spiral points for the held-out check: how many, and their seed


@runs(maxsize=256)
def to_target(challenge: Challenge, knobs: Knobs) -> RaceResult:
    """Race `knobs` on `challenge` until the target (or the epoch limit), on one thread (cached)."""
    with one_thread():
        return race(challenge, knobs, stop_at_target=True)


def _on(challenge: Challenge, seeds) -> list[Challenge]:
    return [replace(challenge, seed=s) for s in seeds]


@dataclass(frozen=True)
class Row:
    """One configuration raced on every seed: updates to the target and examples processed by then."""

    knobs: Knobs
    n_train: int
    results: tuple[RaceResult, ...]

    @property
    def updates(self) -> Spread:
        return Spread(tuple(r.updates_to_target for r in self.results))

    @property
    def examples(self) -> Spread:
        return Spread(tuple(None if r.updates_to_target is None else
                            examples_after(r.updates_to_target, self.n_train, self.knobs.batch_size)
                            for r in self.results))

    @property
    def reached(self) -> int:
        return len(self.updates.found)

    @property
    def max_updates(self) -> int:
        return self.results[0].config.arithmetic().total_weight_updates

    def seconds_per_update(self) -> Spread:
        """Wall-clock seconds per update on this machine (varies from run to run and machine to machine)."""
        return Spread(tuple(r.wall_s / r.total_updates for r in self.results if r.total_updates))

    def text(self, figures: bool = True) -> str:
        """The seeds that reached the target; with `figures`, the updates and examples (median and range)."""
        n = len(self.results)
        shown = figures and self.reached
        hit = (f"90% on {self.reached} of {n} seeds" + (f", updates {Spread(tuple(self.updates.found)).text(3)}"
                                                         if shown else "" if self.reached
                                                         else f" within {self.max_updates} updates"))
        examples = f"; examples {Spread(tuple(self.examples.found)).text(3)}" if shown else ""
        return f"{self.knobs.optimizer:<5} lr {self.knobs.lr:<5g} B={self.knobs.batch_size:<4} {hit}{examples}"


def rows(challenge: Challenge, knobs: list[Knobs], seeds=SEEDS) -> list[Row]:
    """Race each of `knobs` on every seed of `challenge` (chapter 8): all the races side by side."""
    challenges = _on(challenge, seeds)
    done = to_target.many((c, k) for k in knobs for c in challenges)
    return [Row(k, challenge.n_train, tuple(group)) for k, group in zip(knobs, in_groups(done, len(challenges)))]


def row(challenge: Challenge, knobs: Knobs, seeds=SEEDS) -> Row:
    """Race `knobs` on every seed of `challenge` (chapter 8)."""
    return rows(challenge, [knobs], seeds)[0]


# --- batch size at a fixed learning rate ----------------------------------------------------------

@dataclass(frozen=True)
class BatchTrade:
    """Several batch sizes at one optimizer and lr, on every seed (chapter 8)."""

    rows: tuple[Row, ...]

    def fewer_updates(self, small: Row, big: Row) -> int:
        """On how many seeds `big` reaches the target in fewer updates than `small`."""
        return sum(b is not None and (a is None or b < a) for a, b in zip(small.updates.values, big.updates.values))

    def claims(self) -> dict[str, bool]:
        rows = self.rows
        pairs = list(zip(rows, rows[1:]))
        n = len(rows[0].results)
        return {"every batch size reaches 90% on every seed": all(r.reached == len(r.results) for r in rows),
                "a bigger batch needs fewer updates (median)": all(b.updates.median < a.updates.median
                                                                   for a, b in pairs),
                "but not on every seed against the smallest batch": self.fewer_updates(rows[0], rows[1]) < n,
                "a bigger batch processes more examples on every seed": all(
                    all(x < y for x, y in zip(a.examples.values, b.examples.values)) for a, b in pairs),
                "peak memory grows in proportion to B": all(
                    abs(r.results[0].peak_memory / rows[0].results[0].peak_memory
                        - r.knobs.batch_size / rows[0].knobs.batch_size) < 0.02 * r.knobs.batch_size
                    for r in rows)}

    def text(self, figures: bool = True) -> str:
        n = len(self.rows[0].results)
        if figures:
            return "\n".join([f"Adam, lr {self.rows[0].knobs.lr:g}, {n} seeds, on this machine: updates to 90% and "
                              f"examples processed by then (median and range)"] + [f"  {r.text()}" for r in self.rows])
        lines = [f"Adam, lr {self.rows[0].knobs.lr:g}, {n} seeds: peak memory per step (bytes saved for backward, CPU)"]
        lines += [f"  {r.text(False)}; memory {r.results[0].peak_memory:,} B" for r in self.rows]
        lines += [f"  B={b.knobs.batch_size} needs fewer updates than B={a.knobs.batch_size} on "
                  f"{self.fewer_updates(a, b)} of {n} seeds" for a, b in zip(self.rows, self.rows[1:])]
        return "\n".join(lines + claims_text(self.claims()))

    def time_text(self) -> str:
        return "\n".join(f"  B={r.knobs.batch_size:<4} milliseconds per update on this CPU: "
                         f"{Spread(tuple(1000 * s for s in r.seconds_per_update().values)).text(2)}"
                         for r in self.rows)


def batch_trade(challenge: Challenge = Challenge(), batches=(16, 64, 300), optimizer: str = "adam",
                lr: float = 0.03, seeds=SEEDS) -> BatchTrade:
    """Chapter 8: the same optimizer and lr at several batch sizes, raced to the target on every seed."""
    return BatchTrade(tuple(rows(challenge, [Knobs(b, optimizer, lr) for b in batches], seeds)))


# --- batch size and learning rate go together -----------------------------------------------------

SCALING = ((("sgd", 32, 0.3), ("sgd", 128, 0.3), ("sgd", 128, 1.2)),
           (("adam", 32, 0.03), ("adam", 128, 0.03), ("adam", 128, 0.06), ("adam", 128, 0.12)))


@dataclass(frozen=True)
class Scaling:
    """Batch 32 -> 128 with the lr kept, scaled by 4 (linear) and by 2 (square root), on every seed (chapter 8)."""

    sgd: tuple[Row, ...]
    adam: tuple[Row, ...]

    def claims(self) -> dict[str, bool]:
        (s32, s128, s128x4), (a32, a128, a128x2, a128x4) = self.sgd, self.adam
        n = len(s32.results)
        return {"SGD: lr kept at B=128 never reaches 90%": s128.reached == 0 < s32.reached == n,
                "SGD: lr x4 at B=128 reaches it on every seed, in fewer updates": s128x4.reached == n and all(
                    b < a for a, b in zip(s32.updates.values, s128x4.updates.values)),
                "Adam: lr kept at B=128 still reaches it on every seed": a128.reached == a32.reached == n,
                "Adam: lr x2 (square root) is best at B=128 (median)":
                    a128x2.reached == n and a128x2.updates.median <= min(a128.updates.median, a128x4.updates.median),
                "Adam: lr x2 beats lr kept and lr x4 at B=128 on every seed": self.square_root_wins() == n}

    def square_root_wins(self) -> int:
        """On how many seeds Adam's lr x2 at B=128 needs fewer updates than both lr kept and lr x4."""
        _, a128, a128x2, a128x4 = self.adam
        return sum(b is not None and all(o is None or b < o for o in others) for b, *others in
                   zip(a128x2.updates.values, a128.updates.values, a128x4.updates.values))

    def text(self, figures: bool = True) -> str:
        n = len(self.sgd[0].results)
        where = ", on this machine" if figures else ""
        lines = [f"batch 32 -> 128, {n} seeds{where}: lr kept, x4 (linear scaling), x2 (square root)"]
        lines += [f"  {r.text(figures)}" for r in self.sgd + self.adam]
        if figures:
            return "\n".join(lines)
        lines.append(f"  Adam at B=128: lr x2 needs fewer updates than lr kept and lr x4 on {self.square_root_wins()} "
                     f"of {n} seeds")
        return "\n".join(lines + claims_text(self.claims()))


def scaling(challenge: Challenge = Challenge(), seeds=SEEDS) -> Scaling:
    """Chapter 8: does the learning rate have to follow the batch size? SGD and Adam, 32 -> 128."""
    done = rows(challenge, [Knobs(b, o, lr) for group in SCALING for o, b, lr in group], seeds)
    return Scaling(tuple(done[:len(SCALING[0])]), tuple(done[len(SCALING[0]):]))


# --- schedules within the 50-update budget ---------------------------------------------------------

@dataclass(frozen=True)
class ScheduleRace:
    """One configuration with every schedule, each raced for at most `budget` updates on every seed."""

    knobs: Knobs
    budget: int
    counts: dict          # schedule -> Spread of updates to the target (None: not within the budget)

    def faster_than_constant(self, schedule: str) -> int:
        return sum(a is not None and (b is None or a < b)
                   for a, b in zip(self.counts[schedule].values, self.counts["constant"].values))

    def claims(self) -> dict[str, bool]:
        n = len(self.counts["constant"].values)
        others = [s for s in self.counts if s not in ("constant", "step")]
        constant = self.counts["constant"]
        return {"constant reaches it on every seed": len(constant.found) == n,
                "step cuts fail on most seeds": len(self.counts["step"].found) <= n // 2,
                "no schedule beats constant on every seed": all(self.faster_than_constant(s) < n for s in others),
                "the decaying schedules' medians within the seeds' range of constant": all(
                    constant.low <= self.counts[s].median <= constant.high for s in others)}

    def text(self, figures: bool = True) -> str:
        n = len(self.counts["constant"].values)
        where = ", on this machine" if figures else ""
        lines = [f"{self.knobs.optimizer} lr {self.knobs.lr:g} B={self.knobs.batch_size}, at most {self.budget} "
                 f"updates, {n} seeds{where}: updates to 90%"]
        for schedule, spread in self.counts.items():
            if figures:
                lines.append(f"  {schedule:<14} {Spread(tuple(spread.found)).text(2) if spread.found else '-'}")
                continue
            vs = "" if schedule == "constant" else f"; faster than constant on {self.faster_than_constant(schedule)}"
            lines.append(f"  {schedule:<14} reached on {len(spread.found)} of {n}{vs}")
        return "\n".join(lines + ([] if figures else claims_text(self.claims())))


def schedule_race(challenge: Challenge, knobs: Knobs, budget: int = 50, seeds=SEEDS) -> ScheduleRace:
    """Chapter 8: every schedule at `knobs`, epochs sized to the budget as in the search, on every seed."""
    epochs = horizon_epochs(challenge, knobs.batch_size, budget)
    challenges = _on(challenge, seeds)
    done = map_runs(probe, [(c, replace(knobs, schedule=s, epochs=epochs), budget)
                            for s in SCHEDULES for c in challenges])
    counts = {s: Spread(tuple(p.updates_to_target for p in group))
              for s, group in zip(SCHEDULES, in_groups(done, len(challenges)))}
    return ScheduleRace(replace(knobs, epochs=epochs), budget, counts)


# --- the winner on fresh data ---------------------------------------------------------------------

@dataclass(frozen=True)
class HeldOut:
    """The winner on fresh points: at the update where validation first reached the target, and at the
    budget's end (chapter 8)."""

    knobs: Knobs
    target: float
    budget: int
    n: int
    hits: tuple[int | None, ...]
    at_hit: tuple[float | None, ...]       # accuracy on the fresh points at the first hit
    at_end: tuple[float | None, ...]       # ... and after the budget's last update (None: never hit)

    def claims(self) -> dict[str, bool]:
        return {"reached on every seed": None not in self.hits,
                "fresh accuracy at the hit within 2 points of the target on every seed": all(
                    f is not None and f >= self.target - 0.02 for f in self.at_hit),
                "fresh accuracy at the budget's end >= target on every seed": all(
                    f is not None and f >= self.target for f in self.at_end)}

    def text(self) -> str:
        k, t = len(self.hits), self.target
        return "\n".join([
            f"{self.knobs.label()}, {k} seeds: first update at {t:.0%} validation accuracy: "
            f"{Spread(self.hits).text(3)}",
            f"  on {self.n:,} fresh points, at that update: at least {t:.0%} on "
            f"{tally(f is not None and f >= t for f in self.at_hit)} seeds, at least {t - 0.02:.0%} on "
            f"{tally(f is not None and f >= t - 0.02 for f in self.at_hit)}",
            f"  on the fresh points after update {self.budget}: at least {t:.0%} on "
            f"{tally(f is not None and f >= t for f in self.at_end)}"])

    def raw_text(self) -> str:
        def rounded(values):
            return [None if f is None else round(f, 3) for f in values]
        return (f"  fresh accuracy, seed by seed: at the hit {rounded(self.at_hit)}, "
                f"after update {self.budget} {rounded(self.at_end)}")


def held_out(challenge: Challenge, knobs: Knobs, budget: int = 50, seeds=SEEDS, n: int = HELD_OUT[0],
             data_seed: int = HELD_OUT[1]) -> HeldOut:
    """Chapter 8: race `knobs` for `budget` updates on every seed, scoring `n` fresh spiral points at the first
    hit of the target and at the end."""
    fresh = make_spiral(n, 3, challenge.noise, data_seed)
    hits, at_hit, at_end = zip(*map_runs(_scored_on, [(c, knobs, budget, fresh) for c in _on(challenge, seeds)]))
    return HeldOut(knobs, challenge.target, budget, n, hits, at_hit, at_end)


def _scored_on(challenge: Challenge, knobs: Knobs, budget: int, fresh) -> tuple:
    """One seed of `held_out`: (first update at the target, accuracy on `fresh` then, and after the budget)."""
    x, y = fresh.tensors
    seen: list = []
    with one_thread():
        r = race(challenge, knobs, max_updates=budget,
                 at_hit=lambda model: seen.append((model, _val_accuracy(model, x, y))))
    if not seen:
        return r.updates_to_target, None, None
    return r.updates_to_target, seen[0][1], _val_accuracy(seen[0][0], x, y)   # the same model, after the last update
