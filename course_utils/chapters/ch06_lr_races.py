"""Chapter 6's learning-rate experiments on five seeds: the range test's suggestion and the plateau it lands
on (experiment 2), SGD against Adam at one shared rate and each at its own range-test rate (experiment 3).

Runs are the cached ones of ``ch06_simulator_seeds`` (``watched``, ``hits``); records print as counts of seeds
and medians with ranges (``text()``), and name the conclusions the chapter draws (``claims()``), which
``tests/test_simulator_seeds.py`` checks.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from course_utils.chapters.ch06_lr_find import LR_FIND, LrSweep, lr_find
from course_utils.chapters.over_seeds import SEEDS, Spread, ratios, tally
from course_utils.engine.session import TrainConfig
from course_utils.infra.parallel import in_groups, runs
from course_utils.chapters.ch06_simulator_seeds import TARGET, Watched, hits, on_seeds, watched


# --- experiment 2: the LR range test over seeds ---------------------------------------------------

@runs(maxsize=32)
def sweep(optimizer: str, seed: int) -> LrSweep:
    """The range test on the simulator's run (LR_FIND) with `optimizer` and `seed` (cached)."""
    return lr_find(replace(LR_FIND, optimizer=optimizer, seed=seed))


@dataclass(frozen=True)
class Suggestions:
    """The range test's suggestion on each seed, for one optimizer (chapter 6)."""

    optimizer: str
    sweeps: tuple[LrSweep, ...]

    @property
    def suggested(self) -> Spread:
        return Spread(tuple(s.suggested for s in self.sweeps))

    @property
    def minimum_rule(self) -> Spread:
        return Spread(tuple(s.minimum_rule for s in self.sweeps))

    def factor(self) -> float:
        """Largest suggestion over the smallest: how far it moves from seed to seed."""
        return self.suggested.high / self.suggested.low

    def text(self) -> str:
        return (f"{self.optimizer:<5} suggested lr (steepest descent) over {len(self.sweeps)} seeds: "
                f"{self.suggested.text(2)}, a factor {self.factor():.0f} apart\n"
                f"{'':<6}fastai's minimum rule (lowest loss / 10):              {self.minimum_rule.text(2)}")


def suggestions(optimizer: str, seeds=SEEDS) -> Suggestions:
    """Chapter 6: the range test of `optimizer` on each seed's run."""
    return Suggestions(optimizer, tuple(sweep.many((optimizer, s) for s in seeds)))


@dataclass(frozen=True)
class Plateau:
    """Validation accuracy after a few epochs at several learning rates, on each seed (chapter 6)."""

    labels: tuple[str, ...]
    lrs: tuple[float, ...]
    epochs: int
    runs: tuple[tuple[Watched, ...], ...]   # one tuple of seeds per lr

    def reached(self, i: int) -> list[bool]:
        return [w.final_acc >= TARGET for w in self.runs[i]]

    def claims(self) -> dict[str, bool]:
        on = {label: all(self.reached(i)) for i, label in enumerate(self.labels)}
        off = {label: not any(self.reached(i)) for i, label in enumerate(self.labels)}
        return {"suggested reaches 90% on every seed": on["suggested"],
                "default 0.01 reaches 90% on every seed": on["default"],
                "30x the suggestion never reaches 90%": off["30x suggested"],
                "suggestion / 30 never reaches 90%": off["suggested / 30"]}

    def text(self) -> str:
        lines = [f"Adam, {self.epochs} epochs, {len(self.runs[0])} seeds: validation accuracy at the end"]
        for i, (label, lr) in enumerate(zip(self.labels, self.lrs)):
            lines.append(f"  {label:<15} lr {lr:<8.3g} at least 90% on {tally(self.reached(i))} seeds")
        return "\n".join(lines)

    def raw_text(self) -> str:
        return "\n".join(f"  {label:<15} median accuracy {Spread(tuple(w.final_acc for w in runs)).text(3)}"
                         for label, runs in zip(self.labels, self.runs))


def plateau(suggested: float, seeds=SEEDS, epochs: int = 5) -> Plateau:
    """Chapter 6: Adam at the suggestion, 30x off either way, and the default 0.01, on every seed."""
    labels = ("suggested / 30", "default", "suggested", "30x suggested")
    lrs = (suggested / 30, 0.01, suggested, suggested * 30)
    done = watched.many((c,) for lr in lrs for c in on_seeds(seeds, lr=lr, epochs=epochs))
    return Plateau(labels, lrs, epochs, tuple(tuple(group) for group in in_groups(done, len(seeds))))


# --- experiment 3: SGD against Adam ---------------------------------------------------------------

@dataclass(frozen=True)
class Race:
    """Updates SGD and Adam needed to reach 90% on each seed; lr per optimizer (chapter 6, experiment 3)."""

    title: str
    lrs: dict
    epochs: int
    max_updates: int
    sgd: Spread
    adam: Spread

    @property
    def ratio(self) -> Spread:
        return ratios(self.sgd.values, self.adam.values)

    def reached(self, optimizer: str) -> int:
        return len(getattr(self, optimizer).found)

    def text(self) -> str:
        n = len(self.sgd.values)
        lines = [f"{self.title}: updates to 90% validation accuracy, {n} seeds, at most {self.max_updates}"]
        for name in ("sgd", "adam"):
            spread = getattr(self, name)
            lr = "its seed's own lr" if self.lrs[name] is None else f"lr {self.lrs[name]:.3g}"
            lines.append(f"  {name:<5} at {lr + ':':<19}90% on {len(spread.found)} of {n} seeds"
                         + (f", {Spread(tuple(spread.found)).text(3)}" if spread.found else ""))
        if self.ratio.found:
            lines.append(f"  SGD's updates / Adam's, seed by seed: {self.ratio.text(2, 'x')}")
        return "\n".join(lines)


def race(lrs: dict, seeds=SEEDS, epochs: int = 20, title: str = "") -> Race:
    """Race SGD and Adam, each at its lr in `lrs`, on every seed (chapter 6)."""
    configs = {name: on_seeds(seeds, optimizer=name, lr=lrs[name], epochs=epochs) for name in ("sgd", "adam")}
    sgd, adam = in_groups(hits.many((c,) for c in configs["sgd"] + configs["adam"]), len(seeds))
    counts = {"sgd": Spread(tuple(sgd)), "adam": Spread(tuple(adam))}
    max_updates = configs["sgd"][0].arithmetic().total_weight_updates
    return Race(title or f"same lr {lrs['sgd']:g}", dict(lrs), epochs, max_updates, counts["sgd"], counts["adam"])


def fair_race(seeds=SEEDS, epochs: int = 20, sweep_seed: int | None = 0) -> Race:
    """Each optimizer at its own range-test lr: seed `sweep_seed`'s sweep for all, or (None) each seed's own."""
    if sweep_seed is not None:
        lrs = {name: sweep(name, sweep_seed).suggested for name in ("sgd", "adam")}
        return race(lrs, seeds, epochs, f"each at its range-test lr (the sweep of seed {sweep_seed})")
    names = ("sgd", "adam")
    pairs = [(name, s) for name in names for s in seeds]
    lr_of = {pair: swept.suggested for pair, swept in zip(pairs, sweep.many(pairs))}
    done = hits.many((TrainConfig(seed=s, optimizer=name, lr=lr_of[name, s], epochs=epochs),) for name, s in pairs)
    counts = {name: Spread(tuple(group)) for name, group in zip(names, in_groups(done, len(seeds)))}
    max_updates = TrainConfig(epochs=epochs).arithmetic().total_weight_updates
    lrs = {name: None for name in ("sgd", "adam")}
    return Race("each at the range-test lr of its own seed's sweep", lrs, epochs, max_updates, counts["sgd"],
                counts["adam"])
