"""Chapter 5's engine: run the healthy and the bugged loop with the same seed, measure the difference.

- ``compare(bugs, **config)`` trains both runs and returns a ``Comparison`` (curves + signature numbers);
- ``EXHIBITS`` holds, for every loop bug, a configuration in which its signature shows (the same ones
  tests/test_bugs.py checks);
- ``ch05_museum_figure.comparison_figure`` draws eight panels (loss, gradient norm, lr, updates, memory, graph nodes,
  validation loss, validation and test accuracy) against the healthy run; ``visible_panels`` says
  which of them a bug visibly changes;
- ``MYSTERY`` is the one shared run of the mystery game (``course_utils/chapters/ch05_mystery.py``).
"""
from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from course_utils.engine.bugs import BUGS, LOOP_BUGS
from course_utils.engine.loop import EpochEvent, StepEvent
from course_utils.engine.session import Session, TrainConfig
from course_utils.infra.notebook import sig

# The base of the exhibits: a run that converges when healthy (val accuracy about 0.88 after 180 steps):
# 300 spiral points in batches of 20 (15 per epoch), SGD with momentum, 12 epochs.
BASE = dict(n_train=300, n_val=122, batch_size=20, epochs=12, noise=0.3, hidden=64, optimizer="momentum", lr=0.2,
            measure_memory=False)

# per loop bug: a run in which its harm shows (checked in tests/test_museum.py: the healthy run converges
# and the bugged run is measurably worse, or its signature is there in the numbers)
EXHIBITS: dict[str, dict] = {
    "missing_zero_grad": dict(BASE, optimizer="sgd", lr=0.5),
    "zero_grad_after_backward": dict(BASE),
    "eval_in_train_mode": dict(BASE, dropout=0.3, lr=0.5, clip_norm=1.0, schedule="cosine", epochs=20),
    "missing_no_grad": dict(BASE, measure_memory=True),
    "graph_attached_logging": dict(BASE, measure_memory=True),
    # dropout only helps a model that can overfit: 100 noisy points and a wide, deep network
    "missing_train_switch": dict(BASE, n_train=100, n_val=200, n_test=400, noise=0.8, hidden=256, depth=3,
                                 dropout=0.5, epochs=60, optimizer="adam", lr=0.01, batch_size=25),
    "clip_before_backward": dict(BASE, optimizer="sgd", lr=3.0, clip_norm=0.5),
    "clip_after_step": dict(BASE, optimizer="sgd", lr=3.0, clip_norm=0.5),
    "epoch_schedule_per_batch": dict(BASE, schedule="step"),
    "unscaled_accumulation": dict(BASE, lr=0.3, accum_steps=4, epochs=20),     # K = 4: fewer updates an epoch
    "accumulation_without_flush": dict(BASE, accum_steps=4, epochs=20),
    "mean_of_batch_means": dict(BASE),
    # a model that memorises its training set (train accuracy near 1), so copied examples score near 1
    "data_leakage": dict(BASE, n_train=150, n_val=150, n_test=400, noise=1.0, hidden=256, epochs=40,
                         optimizer="adam", lr=0.01, batch_size=32),
}

# The mystery game's one configuration, shared by every round (and the detector's): dropout, SGD with
# momentum, accumulation over 2 micro-batches with a short last window, clipping that bites, an epoch
# schedule, a validation set whose last batch holds 2 examples and a clean test set, memory measured.
# Nothing in it points at one bug; every bug changes at least one panel visibly (tests/test_museum.py).
MYSTERY = dict(n_train=300, n_val=122, n_test=300, batch_size=20, epochs=12, noise=0.3, hidden=64, dropout=0.2,
               optimizer="momentum", lr=0.5, accum_steps=2, clip_norm=1.0, schedule="cosine", measure_memory=True)
DETECTOR = MYSTERY

# where each bug's signature shows in the figure (tests/test_museum.py: that panel differs visibly)
SIGNATURE_PANEL = {
    "missing_zero_grad": "gradient norm (pre-clip)", "zero_grad_after_backward": "gradient norm (pre-clip)",
    "eval_in_train_mode": "validation loss", "missing_no_grad": "graph memory (KiB)",
    "graph_attached_logging": "graph nodes kept by the loss log", "missing_train_switch": "training loss",
    "clip_before_backward": "gradient norm (pre-clip)", "clip_after_step": "training loss",
    "epoch_schedule_per_batch": "learning rate", "unscaled_accumulation": "gradient norm (pre-clip)",
    "accumulation_without_flush": "weight updates so far", "mean_of_batch_means": "validation loss",
    "data_leakage": "accuracy: validation, test",
}


@dataclass(frozen=True)
class Curves:
    """What one run logged: per micro-step and per epoch."""

    loss: list[float]
    grad_norm: list[float]
    memory: list[int]
    lr: list[float]
    graph_nodes: list[int]
    step_updates: list[int]        # optimizer.step() calls so far, after each micro-step
    epoch_step: list[int]          # the micro-step count at each epoch's end (x of epoch curves)
    val_loss: list[float]
    val_acc: list[float]
    eval_memory: list[int]
    updates: list[int]
    train_loss: list[float]
    test_acc: list[float | None]

    @classmethod
    def of(cls, session: Session) -> Curves:
        steps: list[StepEvent] = session.steps
        epochs: list[EpochEvent] = session.epochs
        return cls([e.loss for e in steps], [e.grad_norm for e in steps], [e.memory for e in steps],
                   [e.lr for e in steps], [e.graph_nodes for e in steps], [e.updates for e in steps],
                   [e.steps for e in epochs], [e.val_loss for e in epochs], [e.val_acc for e in epochs],
                   [e.eval_memory for e in epochs], [e.updates for e in epochs], [e.train_loss for e in epochs],
                   [e.test_acc for e in epochs])


# (label, how to read it from Curves) for the signature table
QUANTITIES = [
    ("final train loss", lambda c: c.train_loss[-1]),
    ("max train loss (a step)", lambda c: max(c.loss)),
    ("final val loss", lambda c: c.val_loss[-1]),
    ("final val accuracy", lambda c: c.val_acc[-1]),
    ("final test accuracy", lambda c: c.test_acc[-1]),
    ("max grad norm", lambda c: max(c.grad_norm)),
    ("last grad norm", lambda c: c.grad_norm[-1]),
    ("peak step memory (bytes)", lambda c: max(c.memory)),
    ("peak eval memory (bytes)", lambda c: max(c.eval_memory)),
    ("graph nodes kept (max)", lambda c: max(c.graph_nodes)),
    ("weight updates", lambda c: c.updates[-1]),
    ("final lr", lambda c: c.lr[-1]),
]


def _fmt(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{sig(x):g}"


@dataclass(frozen=True)
class Harm:
    """A checked claim about an exhibit: how the bugged run's quantity compares with the healthy run's.

    A chaotic run's digits change with the CPU's code path (issue 21), its conclusion does not: each claim's
    threshold leaves a margin over seeds 0-4 and over code paths (tests/test_museum.py checks every seed), so
    the printed verdict is the same wherever the chapter runs. Counts and bytes are exact and printed as such.
    """

    quantity: str        # a label of QUANTITIES
    relation: str        # "lower", "higher", "times", "fraction", "equal", "differs", "zero", "counts"
    amount: float = 0.0

    def holds(self, healthy: float, bugged: float) -> bool:
        """Does the claim hold for these two values?"""
        return {"lower": lambda: bugged < healthy - self.amount, "higher": lambda: bugged > healthy + self.amount,
                "times": lambda: bugged > self.amount * healthy, "fraction": lambda: bugged < self.amount * healthy,
                "equal": lambda: bugged == healthy, "differs": lambda: bugged != healthy,
                "zero": lambda: bugged == 0 != healthy, "counts": lambda: bugged != healthy}[self.relation]()

    def claim(self, healthy: float, bugged: float) -> str:
        """The claim in words; exact counts are shown as numbers."""
        if self.relation == "counts":
            return f"healthy {healthy:,.0f}, bugged {bugged:,.0f}"
        by = f" by more than {self.amount:g}" if self.amount else ""
        return {"lower": f"bugged lower{by}", "higher": f"bugged higher{by}",
                "times": f"bugged more than {self.amount:g}x healthy",
                "fraction": f"bugged below {self.amount:g}x healthy", "equal": "identical in both runs",
                "differs": "differs between the runs", "zero": "bugged reads exactly 0"}[self.relation]


# per loop bug: the harm its exhibit shows, as claims that hold on seeds 0-4 (tests/test_museum.py)
HARMS: dict[str, list[Harm]] = {
    "missing_zero_grad": [Harm("final val accuracy", "lower", 0.3), Harm("max grad norm", "times", 4),
                          Harm("max train loss (a step)", "times", 3)],
    "zero_grad_after_backward": [Harm("max grad norm", "zero"), Harm("final val accuracy", "lower", 0.3)],
    "eval_in_train_mode": [Harm("final val accuracy", "lower"), Harm("final train loss", "equal")],
    "missing_no_grad": [Harm("peak eval memory (bytes)", "counts"), Harm("final val loss", "equal")],
    "graph_attached_logging": [Harm("graph nodes kept (max)", "counts"), Harm("final train loss", "equal")],
    "missing_train_switch": [Harm("final train loss", "lower"), Harm("final val loss", "higher", 0.15)],
    "clip_before_backward": [Harm("max grad norm", "zero"), Harm("final val accuracy", "lower", 0.15)],
    "clip_after_step": [Harm("final val accuracy", "lower", 0.15)],
    "epoch_schedule_per_batch": [Harm("final lr", "fraction", 1e-3), Harm("final val accuracy", "lower", 0.15)],
    "unscaled_accumulation": [Harm("max grad norm", "times", 3), Harm("final val accuracy", "lower", 0.3)],
    "accumulation_without_flush": [Harm("weight updates", "counts")],
    "mean_of_batch_means": [Harm("final val loss", "differs"), Harm("final train loss", "equal")],
    "data_leakage": [Harm("final val accuracy", "higher", 0.03), Harm("final test accuracy", "equal")],
}

# chapter 5's two variations of exhibit 1, with their claims (seeds 0-4 checked too): (bugs, config, claims)
VARIATIONS: dict[str, tuple[tuple[str, ...], dict, list[Harm]]] = {
    # at a learning rate far too small the accumulated gradient acts as a bigger step: the bug looks better
    "tiny lr": (("missing_zero_grad",), dict(EXHIBITS["missing_zero_grad"], lr=0.01),
                [Harm("final val accuracy", "higher", 0.05)]),
    # Adam normalises each step, so nothing explodes, but it follows the stale sum of old gradients
    "adam": (("missing_zero_grad",), dict(BASE, optimizer="adam", lr=0.01),
             [Harm("max grad norm", "times", 10), Harm("max train loss (a step)", "times", 1.5),
              Harm("final val accuracy", "lower", 0.3)]),
}


@dataclass(frozen=True)
class Comparison:
    """A healthy and a bugged run of the same configuration and seed."""

    bugs: tuple[str, ...]
    config: dict
    healthy: Curves
    bugged: Curves
    healthy_session: Session = field(repr=False, compare=False)
    bugged_session: Session = field(repr=False, compare=False)

    def signature(self) -> list[tuple[str, float, float]]:
        """(quantity, healthy, bugged) for every quantity this configuration measures."""
        rows = []
        for label, read in QUANTITIES:
            h, b = read(self.healthy), read(self.bugged)
            if h is None or ("memory" in label and not self.config.get("measure_memory", True)):
                continue
            rows.append((label, h, b))
        return rows

    def changed(self) -> list[str]:
        """The quantities that differ between the runs, as printed (4 significant digits)."""
        return [label for label, h, b in self.signature() if _fmt(h) != _fmt(b)]

    def identical(self) -> bool:
        """Did the bugged run log exactly the healthy run's losses, norms and metrics?"""
        return self.healthy == self.bugged

    def verdicts(self, harms: list[Harm] | None = None) -> list[tuple[str, str, bool]]:
        """(quantity, claim, holds) for each claim about this comparison (its single bug's HARMS by default)."""
        if harms is None:
            harms = HARMS[self.bugs[0]] if len(self.bugs) == 1 else []
        values = {label: (h, b) for label, h, b in self.signature()}
        return [(harm.quantity, harm.claim(*values[harm.quantity]), harm.holds(*values[harm.quantity]))
                for harm in harms]

    def verdict_text(self, harms: list[Harm] | None = None) -> str:
        """The claims and whether they hold: what chapter 5 prints (the same on every CPU), not raw digits."""
        name = " + ".join(self.bugs) or "no bug"
        lines = [f"{name}: bugged run against the healthy one (same seed, same data)"]
        for quantity, claim, holds in self.verdicts(harms):
            exact = claim.startswith("healthy ")          # a count shown as numbers: no verdict beside it
            mark = ("" if exact else "yes") if holds else "NO"
            lines.append(f"  {quantity:<26} {claim:<38} {mark}".rstrip())
        return "\n".join(lines)

    def text(self, only_changed: bool = False) -> str:
        """The signature table: every quantity, or only those that differ (as printed)."""
        name = " + ".join(self.bugs) or "no bug"
        lines = [f"{name}: healthy vs bugged (same seed)"]
        for label, h, b in self.signature():
            differs = _fmt(h) != _fmt(b)
            if only_changed and not differs:
                continue
            lines.append(f"  {label:<26} {_fmt(h):>12} {_fmt(b):>12}{'   <- differs' if differs else ''}")
        if self.identical():
            lines.append("  every logged number is identical: this bug leaves no trace in these curves")
        elif len(lines) == 1:
            lines.append("  the runs differ only beyond 4 significant digits")
        return "\n".join(lines)


HEALTHY_RUNS_KEPT, BUGGED_RUNS_KEPT = 64, 128   # small runs (a tiny MLP and its telemetry): keep many
_HEALTHY: dict[tuple, Session] = {}   # healthy runs by configuration: the same config is never trained twice
_BUGGED: dict[tuple, Session] = {}    # bugged runs by (bugs, configuration)


def _quiet_run(session: Session) -> Session:
    with warnings.catch_warnings():   # torch's "scheduler.step() before optimizer.step()" is a bug's symptom here
        warnings.simplefilter("ignore", UserWarning)
        session.run_to_end()
    return session


def _key(bugs: tuple[str, ...], config: dict) -> tuple[tuple, tuple]:
    key = tuple(sorted(config.items()))
    return key, (bugs, key)


def _remember(cache: dict, key: tuple, session: Session, limit: int) -> Session:
    """Keep `session` under `key`, forgetting the least recently used run beyond `limit` runs."""
    if key not in cache and len(cache) >= limit:
        del cache[next(iter(cache))]
    cache[key] = session
    return session


def _recall(cache: dict, key: tuple) -> Session | None:
    """A cached run, marked as just used (or None)."""
    session = cache.pop(key, None)
    if session is not None:
        cache[key] = session
    return session


def compare_steps(bugs: tuple[str, ...], **config) -> Iterator[None]:
    """Train what compare() needs and has not cached, one micro-batch per item (the mystery's prefetch)."""
    healthy_key, bugged_key = _key(bugs, config)
    todo = []
    if healthy_key not in _HEALTHY:
        todo.append((_HEALTHY, healthy_key, TrainConfig(**config), HEALTHY_RUNS_KEPT))
    if bugs and bugged_key not in _BUGGED:
        todo.append((_BUGGED, bugged_key, TrainConfig(**config, bugs=bugs), BUGGED_RUNS_KEPT))
    for cache, key, run_config, limit in todo:
        session = Session(run_config)
        while True:
            with warnings.catch_warnings():   # as in _quiet_run
                warnings.simplefilter("ignore", UserWarning)
                event = session.step()
            if event is None:
                break
            yield
        _remember(cache, key, session, limit)


def compare(bugs: tuple[str, ...] | list[str] | str = (), **config) -> Comparison:
    """Train the healthy and the bugged run (same config, same seed) to the end; ValueError if bugs clash."""
    bugs = (bugs,) if isinstance(bugs, str) else tuple(bugs)
    healthy_config, bugged_config = TrainConfig(**config), TrainConfig(**config, bugs=bugs)
    healthy_key, bugged_key = _key(bugs, config)
    healthy = _recall(_HEALTHY, healthy_key)
    if healthy is None:
        healthy = _remember(_HEALTHY, healthy_key, _quiet_run(Session(healthy_config)), HEALTHY_RUNS_KEPT)
    bugged = _recall(_BUGGED, bugged_key)   # runs are deterministic: the same pair is never trained twice
    if bugged is None:
        bugged = _remember(_BUGGED, bugged_key, _quiet_run(Session(bugged_config)) if bugs else healthy,
                           BUGGED_RUNS_KEPT)
    return Comparison(bugs, dict(config), Curves.of(healthy), Curves.of(bugged), healthy, bugged)


def exhibit(bug: str) -> Comparison:
    """One loop bug in its exhibit configuration."""
    return compare((bug,), **EXHIBITS[bug])


# one line per bug for chapter 5's quick-reference table (the registry's `symptom` is the long form)
ONE_LINE = {
    "missing_zero_grad": "gradient norm climbs in trend, with dips, to several times healthy; SGD loss swings high",
    "zero_grad_after_backward": "gradient norm reads 0, weights never move, loss stays near ln C",
    "eval_in_train_mode": "validation noisy and lower; BN statistics move; later random draws shift (not in "
                          "the course's loop)",
    "missing_no_grad": "evaluation graph memory above 0; metrics unchanged",
    "graph_attached_logging": "graph nodes kept by the log grow by the same amount every step",
    "missing_train_switch": "from epoch 2 training loss below healthy; validation loss higher",
    "clip_before_backward": "pre-clip norm reads 0 (or a partial sum); run = the unclipped run",
    "clip_after_step": "norm looks normal; run = the unclipped run (spikes at a high lr)",
    "epoch_schedule_per_batch": "lr collapses (StepLR) or waves (cosine) within the first epoch",
    "unscaled_accumulation": "gradient norm K times healthy; SGD acts at K times the lr",
    "accumulation_without_flush": "fewer updates per epoch; the short last window is wiped, or added into the "
                                  "next epoch's first update",
    "mean_of_batch_means": "validation loss/accuracy off when the last batch is small",
    "data_leakage": "validation accuracy well above a clean test set's",
    # exhibit 5's demonstrations (not loop variations): what each one shows
    "freeze_after_optimizer":
        "after steps, frozen weights move with momentum, Adam(W) or weight decay if zero_grad(set_to_none=False)",
    "head_after_optimizer": "the new head never moves; the model trains around a random head",
    "half_after_optimizer":
        "after an Adam step, .half() makes the next step raise (.cuda() too: not run); no state yet: runs on",
}


def reference_markdown() -> str:
    """Chapter 5's quick reference, bug -> signature -> fix, as one markdown table."""
    rows = ["| bug | signature | fix |", "|---|---|---|"]
    for name in LOOP_BUGS:
        rows.append(f"| `{name}` | {ONE_LINE[name]} | {BUGS[name].fix} |")
    for name in ("freeze_after_optimizer", "head_after_optimizer", "half_after_optimizer"):
        rows.append(f"| `{name}` | {ONE_LINE[name]} (exhibit 5) | {BUGS[name].fix} |")
    return "\n".join(rows)
